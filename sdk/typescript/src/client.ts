// The client: a thin layer over the generated TaskService client, with plain options
// in, plain objects out and TaskwireErrors for failures.
import { create, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createClient, type Client as ConnectClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { AttachmentSchema, ContextRefSchema, PatchRefSchema, SubtaskSchema } from "./gen/taskwire/v1/envelope_pb.js";
import {
  ApprovalAnswer,
  ApproveRequestSchema,
  CancelRequestSchema,
  GetRequestSchema,
  ListAgentsRequestSchema,
  ListRequestSchema,
  ReplayRequestSchema,
  RunCommandRequestSchema,
  SubmitRequestSchema,
  TaskService,
  WatchRequestSchema,
  type SubmitResponse,
} from "./gen/taskwire/v1/task_service_pb.js";
import { InvalidArgumentError, TimeoutError, toTaskwireError } from "./errors.js";
import {
  agent,
  progressEvents,
  resultEvent,
  statusName,
  statusValue,
  taskInfo,
  type Agent,
  type Result,
  type TaskEvent,
  type TaskInfo,
  type TaskStatusName,
} from "./types.js";

export const DEFAULT_ADDR = "http://127.0.0.1:50051";

export interface ClientOptions {
  /** The coordinator's gRPC address: `http://host:port` (h2c) or `https://host:port` (TLS). Default `http://127.0.0.1:50051`. */
  addr?: string;
  /** A bearer token, sent as `authorization: Bearer <token>` on every call. */
  token?: string;
  /** PEM CA certificate(s) to trust for an https:// address (default: the system's). */
  tlsCa?: string | Uint8Array;
  /** The tenant of submits, lists and commands that name none. */
  tenant?: string;
  /** Interceptors run on every call (after the one adding the token). */
  interceptors?: Interceptor[];
  /** Use this transport as it is instead of building one from addr and tlsCa (then token and interceptors are not applied). */
  transport?: Transport;
}

/** Every SubmitRequest field, in camelCase. */
export interface SubmitOptions {
  agent: string;
  prompt: string;
  tenant?: string;
  sender?: string;
  intent?: string;
  /** A plain JSON object (a google.protobuf.Struct on the wire). */
  input?: JsonObject;
  contextRefs?: { type: string; id?: string; uri?: string }[];
  attachments?: { name: string; mediaType?: string; uri?: string; data?: Uint8Array | string }[];
  authScope?: string[];
  /** A repeated key answers the existing task (`created` false). */
  idempotencyKey?: string;
  deadline?: Date;
  /** A session id to continue. */
  resumeToken?: string;
  model?: string;
  maxSteps?: number;
  parentTaskId?: string;
  /** Join an existing trace. */
  traceId?: string;
  command?: string;
  /** Default 3. */
  maxAttempts?: number;
  subtask?: { agent: string; description?: string; prompt?: string; command?: string };
  workspacePatch?: string;
  /** A JSON Schema the final answer must satisfy: an object (sent as JSON text) or JSON text. */
  outputSchema?: JsonObject | string;
  expandShell?: boolean;
  workspacePatchRef?: { name: string; sha256: string; size: number | bigint };
  /** A budget for the task's subtree, in US dollars. */
  maxCostUsd?: number;
  /** A token budget for the task's subtree. */
  maxTokens?: number | bigint;
  /** 1 (highest) to 5 (lowest); 0 or unset: the default. */
  priority?: number;
  /** A result webhook URL. */
  callbackUrl?: string;
  /** A delayed start: the task waits `"scheduled"` until then (root tasks only). */
  notBefore?: Date;
}

export interface ListOptions {
  traceId?: string;
  parentTaskId?: string;
  /** A lowercase status name (`"completed"`); unset: any. */
  status?: TaskStatusName;
  agent?: string;
  /** Default 50, at most 1000. */
  limit?: number;
  tenant?: string;
}

export interface RunCommandOptions {
  tenant?: string;
  parentTaskId?: string;
  /** Resume this session (prompt mode). */
  sessionId?: string;
  model?: string;
  deadline?: Date;
  idempotencyKey?: string;
  outputSchema?: JsonObject | string;
}

export type ApprovalAnswerName = "once" | "always" | "reject";

export interface CallOptions {
  /** Aborts the call (or ends an event stream). */
  signal?: AbortSignal;
}

function schemaText(s: JsonObject | string | undefined): string {
  if (s === undefined) return "";
  return typeof s === "string" ? s : JSON.stringify(s);
}

function ts(d: Date | undefined) {
  return d === undefined ? undefined : timestampFromDate(d);
}

function bigintOf(v: number | bigint | undefined): bigint | undefined {
  if (v === undefined) return undefined;
  return typeof v === "bigint" ? v : BigInt(Math.trunc(v));
}

const answers: Record<ApprovalAnswerName, ApprovalAnswer> = {
  once: ApprovalAnswer.ONCE,
  always: ApprovalAnswer.ALWAYS,
  reject: ApprovalAnswer.REJECT,
};

/** Runs `f`, turning what it throws into a TaskwireError. */
async function call<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    throw toTaskwireError(err);
  }
}

/** A client of one coordinator. Cheap to keep: calls share one HTTP/2 connection. */
export class Client {
  /** The generated Connect client, for what this layer does not cover. */
  readonly raw: ConnectClient<typeof TaskService>;
  readonly addr: string;
  private readonly tenant: string;
  private readonly sessions: Http2SessionManager | undefined;

  constructor(options: ClientOptions = {}) {
    this.addr = options.addr ?? DEFAULT_ADDR;
    this.tenant = options.tenant ?? "";
    const interceptors: Interceptor[] = [];
    const token = options.token;
    if (token) {
      interceptors.push((next) => async (req) => {
        req.header.set("authorization", `Bearer ${token}`);
        return await next(req);
      });
    }
    interceptors.push(...(options.interceptors ?? []));
    let transport = options.transport;
    if (transport === undefined) {
      let url: URL;
      try {
        url = new URL(this.addr);
      } catch {
        throw new InvalidArgumentError("INVALID_ARGUMENT", `not an address: ${this.addr} (want http://host:port or https://host:port)`);
      }
      if (url.protocol !== "http:" && url.protocol !== "https:") {
        throw new InvalidArgumentError("INVALID_ARGUMENT", `not an http:// or https:// address: ${this.addr}`);
      }
      const ca = options.tlsCa;
      const nodeOptions =
        url.protocol === "https:" && ca !== undefined ? { ca: typeof ca === "string" ? ca : Buffer.from(ca) } : {};
      this.sessions = new Http2SessionManager(url, {}, nodeOptions);
      transport = createGrpcTransport({ baseUrl: this.addr, interceptors, sessionManager: this.sessions });
    }
    this.raw = createClient(TaskService, transport);
  }

  /**
   * Closes the client's HTTP/2 connection (and any open stream). Optional: an idle
   * connection does not keep Node running. A later call opens a new one.
   */
  close(): void {
    this.sessions?.abort();
  }

  /** Submits a task; answers its handle (`created` false when an idempotency key matched). */
  async submit(options: SubmitOptions, callOptions?: CallOptions): Promise<Task> {
    const o = options;
    const req = create(SubmitRequestSchema, {
      agent: o.agent,
      prompt: o.prompt,
      tenant: o.tenant ?? this.tenant,
      sender: o.sender ?? "",
      intent: o.intent ?? "",
      input: o.input,
      contextRefs: (o.contextRefs ?? []).map((r) => create(ContextRefSchema, r)),
      attachments: (o.attachments ?? []).map((a) =>
        create(AttachmentSchema, {
          name: a.name,
          mediaType: a.mediaType ?? "",
          uri: a.uri ?? "",
          data: typeof a.data === "string" ? new TextEncoder().encode(a.data) : a.data,
        }),
      ),
      authScope: o.authScope ?? [],
      idempotencyKey: o.idempotencyKey ?? "",
      deadline: ts(o.deadline),
      notBefore: ts(o.notBefore),
      resumeToken: o.resumeToken ?? "",
      model: o.model,
      maxSteps: o.maxSteps,
      parentTaskId: o.parentTaskId ?? "",
      traceId: o.traceId ?? "",
      command: o.command ?? "",
      maxAttempts: o.maxAttempts,
      subtask: o.subtask === undefined ? undefined : create(SubtaskSchema, o.subtask),
      workspacePatch: o.workspacePatch ?? "",
      outputSchema: schemaText(o.outputSchema),
      expandShell: o.expandShell ?? false,
      workspacePatchRef:
        o.workspacePatchRef === undefined
          ? undefined
          : create(PatchRefSchema, { ...o.workspacePatchRef, size: bigintOf(o.workspacePatchRef.size) }),
      maxCostUsd: o.maxCostUsd,
      maxTokens: bigintOf(o.maxTokens),
      priority: o.priority ?? 0,
      callbackUrl: o.callbackUrl ?? "",
    });
    const res = await call(() => this.raw.submit(req, callOptions));
    return new Task(this, res);
  }

  /** A handle of an existing task (to watch, wait for or cancel it). */
  task(taskId: string): Task {
    return new Task(this, { taskId, traceId: "", created: false, sessionId: "" });
  }

  /** A task's state and, once finished, its result. */
  async get(taskId: string, callOptions?: CallOptions): Promise<TaskInfo> {
    const t = await call(() => this.raw.get(create(GetRequestSchema, { taskId }), callOptions));
    return taskInfo(t);
  }

  /** Tasks, newest first. */
  async list(options: ListOptions = {}, callOptions?: CallOptions): Promise<TaskInfo[]> {
    let status = 0;
    if (options.status !== undefined) {
      const v = statusValue(options.status);
      if (v === undefined) throw new InvalidArgumentError("INVALID_ARGUMENT", `unknown task status: ${options.status}`);
      status = v;
    }
    const req = create(ListRequestSchema, {
      traceId: options.traceId ?? "",
      parentTaskId: options.parentTaskId ?? "",
      status,
      agent: options.agent ?? "",
      limit: options.limit ?? 0,
      tenant: options.tenant ?? this.tenant,
    });
    const res = await call(() => this.raw.list(req, callOptions));
    return res.tasks.map(taskInfo);
  }

  /** Cancels a task; answers its status after the cancel. */
  async cancel(taskId: string, reason?: string, callOptions?: CallOptions): Promise<TaskStatusName> {
    const res = await call(() => this.raw.cancel(create(CancelRequestSchema, { taskId, reason: reason ?? "" }), callOptions));
    return statusName(res.status);
  }

  /** Answers an approval_required event (`taskId` is the event's, the asking task). */
  async approve(
    taskId: string,
    requestId: string,
    answer: ApprovalAnswerName,
    message?: string,
    callOptions?: CallOptions,
  ): Promise<TaskStatusName> {
    const a = answers[answer];
    if (a === undefined) throw new InvalidArgumentError("INVALID_ARGUMENT", `answer must be "once", "always" or "reject", not ${String(answer)}`);
    const req = create(ApproveRequestSchema, { taskId, requestId, answer: a, message: message ?? "" });
    const res = await call(() => this.raw.approve(req, callOptions));
    return statusName(res.status);
  }

  /** Runs a slash command (`name` with or without its `/`); `args` is the text after it (an array is joined with spaces). */
  async runCommand(name: string, args?: string | string[], options: RunCommandOptions = {}, callOptions?: CallOptions): Promise<Task> {
    const req = create(RunCommandRequestSchema, {
      command: name,
      arguments: Array.isArray(args) ? args.join(" ") : (args ?? ""),
      tenant: options.tenant ?? this.tenant,
      parentTaskId: options.parentTaskId ?? "",
      sessionId: options.sessionId ?? "",
      model: options.model,
      deadline: ts(options.deadline),
      idempotencyKey: options.idempotencyKey ?? "",
      outputSchema: schemaText(options.outputSchema),
    });
    const res = await call(() => this.raw.runCommand(req, callOptions));
    return new Task(this, res);
  }

  /** The agents tasks can be sent to (hidden ones too with `includeHidden`). */
  async agents(options: { includeHidden?: boolean } = {}, callOptions?: CallOptions): Promise<Agent[]> {
    const res = await call(() =>
      this.raw.listAgents(create(ListAgentsRequestSchema, { includeHidden: options.includeHidden ?? false }), callOptions),
    );
    return res.agents.map(agent);
  }

  /** Runs a dead-lettered (or failed) task again, with a fresh attempt budget. */
  async replay(taskId: string, callOptions?: CallOptions): Promise<TaskInfo> {
    return taskInfo(await call(() => this.raw.replay(create(ReplayRequestSchema, { taskId }), callOptions)));
  }

  /**
   * A task's events from its start: progress (its own, and its descendants' tool
   * calls and approvals), then its result, after which the iteration ends.
   */
  async *watch(taskId: string, callOptions?: CallOptions): AsyncGenerator<TaskEvent, void, undefined> {
    // Our own signal, aborted when the iteration ends early (a `break`): closing the
    // stream's iterator alone leaves its HTTP/2 stream open.
    const ctl = new AbortController();
    const outer = callOptions?.signal;
    const onAbort = () => ctl.abort(outer?.reason);
    if (outer?.aborted) ctl.abort(outer.reason);
    outer?.addEventListener("abort", onAbort, { once: true });
    try {
      for await (const ev of this.raw.watch(create(WatchRequestSchema, { taskId }), { signal: ctl.signal })) {
        if (ev.event.case === "progress") {
          yield* progressEvents(ev.event.value);
        } else if (ev.event.case === "result") {
          const r = resultEvent(ev.event.value);
          yield r;
          if (!r.result.retryScheduled) return;
        }
      }
    } catch (err) {
      throw toTaskwireError(err);
    } finally {
      outer?.removeEventListener("abort", onAbort);
      ctl.abort();
    }
  }

  /**
   * Waits for a task's result (through Watch; Get when a stream ends without it).
   * `timeoutMs` rejects with a TimeoutError (the task goes on).
   */
  async wait(taskId: string, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Result> {
    const ctl = new AbortController();
    const onAbort = () => ctl.abort(options.signal?.reason);
    options.signal?.addEventListener("abort", onAbort, { once: true });
    let timedOut = false;
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            ctl.abort();
          }, options.timeoutMs);
    try {
      for (let round = 0; ; round++) {
        for await (const ev of this.watch(taskId, { signal: ctl.signal })) {
          if (ev.kind === "result" && !ev.result.retryScheduled) return ev.result;
        }
        // The stream ended without the result: read it, else watch again.
        const t = await this.get(taskId, { signal: ctl.signal });
        if (t.result !== undefined && !t.result.retryScheduled) return t.result;
        await new Promise((r) => setTimeout(r, Math.min(100 * 2 ** round, 2000)));
        if (ctl.signal.aborted) throw ctl.signal.reason;
      }
    } catch (err) {
      if (timedOut) {
        throw new TimeoutError("DEADLINE_EXCEEDED", `no result for task ${taskId} within ${options.timeoutMs} ms`, { cause: err });
      }
      throw toTaskwireError(err);
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
    }
  }
}

/** A submitted task: its ids, and what can be done with it. */
export class Task {
  readonly taskId: string;
  readonly traceId: string;
  /** False when an idempotency key matched an existing task. */
  readonly created: boolean;
  /** The session the task runs in (its resume token). */
  readonly sessionId: string;
  readonly client: Client;

  constructor(client: Client, res: Pick<SubmitResponse, "taskId" | "traceId" | "created" | "sessionId">) {
    this.client = client;
    this.taskId = res.taskId;
    this.traceId = res.traceId;
    this.created = res.created;
    this.sessionId = res.sessionId;
  }

  /** The task's events from its start, ending after its result. */
  events(options: CallOptions = {}): AsyncIterable<TaskEvent> {
    return this.client.watch(this.taskId, options);
  }

  /** Its result, once it finished. `timeoutMs` rejects with a TimeoutError. */
  wait(options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Result> {
    return this.client.wait(this.taskId, options);
  }

  /** Its state now. */
  get(): Promise<TaskInfo> {
    return this.client.get(this.taskId);
  }

  /** Cancels it; answers its status after the cancel. */
  cancel(reason?: string): Promise<TaskStatusName> {
    return this.client.cancel(this.taskId, reason);
  }

  toJSON() {
    return { taskId: this.taskId, traceId: this.traceId, created: this.created, sessionId: this.sessionId };
  }
}

