// The SDK's plain types and their conversion from the generated messages: lowercase
// status names, Dates for timestamps, numbers for token counts, plain JSON objects for
// Structs (the same choices as the coordinator's dashboard JSON, in camelCase).
import type { JsonObject } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import {
  AgentMode,
  PermissionAction,
  TaskStatus,
  ToolCallState,
  type AgentSpec,
  type TaskProgress,
  type TaskResult,
  type Usage as PbUsage,
} from "./gen/taskwire/v1/envelope_pb.js";
import { WebhookState, type Task as PbTask } from "./gen/taskwire/v1/task_service_pb.js";

/** A task's status: the TaskStatus enum's name without its prefix, lowercase. */
export type TaskStatusName =
  | "unspecified"
  | "queued"
  | "running"
  | "awaiting_approval"
  | "completed"
  | "error"
  | "cancelled"
  | "deadline_exceeded"
  | "max_steps"
  | "rejected"
  | "dead_lettered"
  | "budget_exceeded"
  | "scheduled";

/** The lowercase name of a wire status (`"completed"`); `"unknown"` for a value this SDK does not know. */
export function statusName(value: TaskStatus): TaskStatusName {
  const name = TaskStatus[value] as string | undefined;
  return (name === undefined ? "unknown" : name.toLowerCase()) as TaskStatusName;
}

/** The wire status of a lowercase name; undefined for a name that is none. */
export function statusValue(name: string): TaskStatus | undefined {
  const value = (TaskStatus as unknown as Record<string, unknown>)[name.toUpperCase()];
  return typeof value === "number" ? (value as TaskStatus) : undefined;
}

function lower<E extends Record<number, string>>(e: E, value: number): string {
  const name = e[value];
  return name === undefined ? "unknown" : name.toLowerCase();
}

export function date(t: Timestamp | undefined): Date | undefined {
  return t === undefined ? undefined : timestampDate(t);
}

/** Token counts and cost. `costUsd` is undefined when none of the calls was priced. */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  costUsd: number | undefined;
  unpricedTokens: number;
  cachedInputTokens: number;
  cacheWriteInputTokens: number;
}

export function usage(u: PbUsage | undefined): Usage {
  return {
    inputTokens: Number(u?.inputTokens ?? 0n),
    outputTokens: Number(u?.outputTokens ?? 0n),
    costUsd: u?.costUsd,
    unpricedTokens: Number(u?.unpricedTokens ?? 0n),
    cachedInputTokens: Number(u?.cachedInputTokens ?? 0n),
    cacheWriteInputTokens: Number(u?.cacheWriteInputTokens ?? 0n),
  };
}

export type ToolCallStateName = "unspecified" | "pending" | "running" | "completed" | "error" | "unknown";

/** How a task ended (or an attempt, for a retry): its output, changes, errors and usage. */
export interface Result {
  taskId: string;
  traceId: string;
  attempt: number;
  status: TaskStatusName;
  /** The final answer's text. */
  text: string;
  /** The answer parsed and validated against the task's outputSchema, when it had one. */
  structured: JsonObject | undefined;
  /** A `git diff --binary` of what the task changed in its workspace; empty when nothing. */
  patch: string;
  errors: { code: string; message: string; retryable: boolean }[];
  toolCalls: { callId: string; tool: string; title: string; state: ToolCallStateName }[];
  attachments: { name: string; mediaType: string; uri: string; data: Uint8Array }[];
  provenance: { source: string; uri: string; excerpt: string }[];
  /** The task's own model calls. */
  ownUsage: Usage;
  /** The task's and all its descendants' model calls. */
  usage: Usage;
  latencyMs: number;
  steps: number;
  sessionId: string;
  workerId: string;
  title: string;
  retryScheduled: boolean;
}

export function result(r: TaskResult): Result {
  return {
    taskId: r.taskId,
    traceId: r.traceId,
    attempt: r.attempt,
    status: statusName(r.status),
    text: r.output?.text ?? "",
    structured: r.output?.structured,
    patch: r.patch,
    errors: r.errors.map((e) => ({ code: e.code, message: e.message, retryable: e.retryable })),
    toolCalls: r.toolCalls.map((c) => ({
      callId: c.callId,
      tool: c.tool,
      title: c.title,
      state: lower(ToolCallState, c.state) as ToolCallStateName,
    })),
    attachments: r.attachments.map((a) => ({ name: a.name, mediaType: a.mediaType, uri: a.uri, data: a.data })),
    provenance: r.provenance.map((p) => ({ source: p.source, uri: p.uri, excerpt: p.excerpt })),
    ownUsage: usage(r.ownUsage),
    usage: usage(r.usage),
    latencyMs: Number(r.metrics?.latencyMs ?? 0n),
    steps: r.metrics?.steps ?? 0,
    sessionId: r.sessionId,
    workerId: r.workerId,
    title: r.title,
    retryScheduled: r.retryScheduled,
  };
}

/** One claim of a task by a worker, and how it ended. */
export interface Attempt {
  attempt: number;
  workerId: string;
  status: TaskStatusName;
  error: string;
  retryable: boolean;
  startedAt: Date | undefined;
  finishedAt: Date | undefined;
}

/** A task's result webhook and its deliveries. */
export interface Webhook {
  url: string;
  state: "unspecified" | "waiting" | "pending" | "delivered" | "failed" | "unknown";
  attempts: number;
  nextAttemptAt: Date | undefined;
  deliveredAt: Date | undefined;
  deliveries: { attempt: number; startedAt: Date | undefined; statusCode: number; error: string; durationMs: number }[];
}

/** A task's state, as `get`, `list` and `replay` answer it. */
export interface TaskInfo {
  taskId: string;
  parentTaskId: string;
  traceId: string;
  tenant: string;
  agent: string;
  prompt: string;
  title: string;
  status: TaskStatusName;
  priority: number;
  attempt: number;
  maxAttempts: number;
  depth: number;
  createdAt: Date | undefined;
  updatedAt: Date | undefined;
  deadline: Date | undefined;
  /** Its delayed start, if it has one (`"scheduled"` until then). */
  notBefore: Date | undefined;
  /** `"awaiting_rate_limit"` while its next model call waits for a slot; empty otherwise. */
  wait: string;
  waitUntil: Date | undefined;
  attempts: Attempt[];
  /** The task's own model calls (recorded results). */
  usage: Usage;
  /** The task's and its descendants' model calls. */
  subtreeUsage: Usage;
  maxCostUsd: number | undefined;
  maxTokens: number | undefined;
  webhook: Webhook | undefined;
  /** Set once the task finished. */
  result: Result | undefined;
}

export function taskInfo(t: PbTask): TaskInfo {
  return {
    taskId: t.taskId,
    parentTaskId: t.parentTaskId,
    traceId: t.traceId,
    tenant: t.tenant,
    agent: t.agent,
    prompt: t.prompt,
    title: t.title,
    status: statusName(t.status),
    priority: t.priority,
    attempt: t.attempt,
    maxAttempts: t.maxAttempts,
    depth: t.depth,
    createdAt: date(t.createdAt),
    updatedAt: date(t.updatedAt),
    deadline: date(t.deadline),
    notBefore: date(t.notBefore),
    wait: t.wait,
    waitUntil: date(t.waitUntil),
    attempts: t.attempts.map((a) => ({
      attempt: a.attempt,
      workerId: a.workerId,
      status: statusName(a.status),
      error: a.error,
      retryable: a.retryable,
      startedAt: date(a.startedAt),
      finishedAt: date(a.finishedAt),
    })),
    usage: usage(t.usage),
    subtreeUsage: usage(t.subtreeUsage),
    maxCostUsd: t.maxCostUsd,
    maxTokens: t.maxTokens === undefined ? undefined : Number(t.maxTokens),
    webhook:
      t.webhook === undefined
        ? undefined
        : {
            url: t.webhook.url,
            state: lower(WebhookState, t.webhook.state) as Webhook["state"],
            attempts: t.webhook.attempts,
            nextAttemptAt: date(t.webhook.nextAttemptAt),
            deliveredAt: date(t.webhook.deliveredAt),
            deliveries: t.webhook.deliveries.map((d) => ({
              attempt: d.attempt,
              startedAt: date(d.startedAt),
              statusCode: d.statusCode,
              error: d.error,
              durationMs: d.durationMs,
            })),
          },
    result: t.result === undefined ? undefined : result(t.result),
  };
}

/** Fields every event carries. */
interface EventBase {
  /**
   * The task the event concerns: the watched task, or for a descendant's tool call or
   * approval shown in its ancestors' progress, that descendant; for `child_task`, the
   * child.
   */
  taskId: string;
  /** The task whose progress stream carried the event (the one watched, or for a tree, the emitting task). */
  sourceTaskId: string;
  attempt: number;
  /** Monotonic per attempt (0 for a result). */
  seq: number;
  /** The task's status when the event was sent. */
  status: TaskStatusName;
  at: Date | undefined;
}

export interface StepStartedEvent extends EventBase {
  kind: "step_started";
  step: number;
}
export interface StepFinishedEvent extends EventBase {
  kind: "step_finished";
  step: number;
  usage: Usage;
}
export interface ToolCallEvent extends EventBase {
  kind: "tool_call";
  callId: string;
  tool: string;
  state: ToolCallStateName;
  title: string;
  error: string;
  metadata: JsonObject | undefined;
}
export interface TextEvent extends EventBase {
  kind: "text";
  text: string;
}
export interface ChildTaskEvent extends EventBase {
  kind: "child_task";
  /** The child task's id (also `childTaskId`). */
  taskId: string;
  childTaskId: string;
  /** The task that started the child. */
  parentTaskId: string;
  agent: string;
  description: string;
  sessionId: string;
  callId: string;
}
export interface ApprovalRequiredEvent extends EventBase {
  kind: "approval_required";
  /** The asking task: answer with `client.approve(taskId, requestId, ...)`. */
  taskId: string;
  requestId: string;
  permission: string;
  patterns: string[];
}
export interface CompactionEvent extends EventBase {
  kind: "compaction";
  tokensBefore: number;
  tokensAfter: number;
  usage: Usage;
}
export interface RateLimitWaitEvent extends EventBase {
  kind: "rate_limit_wait";
  model: string;
  waitMs: number;
}
/** A hook ran around the session (`hooks.json`, an agent's `hooks`). */
export interface HookRunEvent extends EventBase {
  kind: "hook";
  /** `PreToolUse`, `PostToolUse`, `SessionStart`, `Stop`, `SubagentStop` or `PreCompact`. */
  event: string;
  /** Its command or URL. */
  hook: string;
  source: string;
  /** What it matched: a tool's name, `startup`/`resume`, an agent. */
  subject: string;
  /** The tool call it ran for; empty for session events. */
  callId: string;
  outcome: "ok" | "blocked" | "failed" | string;
  /** The block's or failure's reason, or the context it added. */
  message: string;
  durationMs: number;
}
export interface ResultEvent extends EventBase {
  kind: "result";
  result: Result;
}

/** A task's event: a discriminated union on `kind`. */
export type TaskEvent =
  | StepStartedEvent
  | StepFinishedEvent
  | ToolCallEvent
  | TextEvent
  | ChildTaskEvent
  | ApprovalRequiredEvent
  | CompactionEvent
  | RateLimitWaitEvent
  | HookRunEvent
  | ResultEvent;

export type TaskEventKind = TaskEvent["kind"];

/**
 * The events of one progress message: it, then its `following` events (which inherit
 * its task_id, trace_id and attempt). Heartbeats are dropped.
 */
export function progressEvents(p: TaskProgress): TaskEvent[] {
  const out: TaskEvent[] = [];
  const one = (e: TaskProgress) => {
    const ev = progressEvent(e, p.taskId, p.attempt);
    if (ev !== undefined) out.push(ev);
  };
  one(p);
  for (const f of p.following) one(f);
  return out;
}

function progressEvent(p: TaskProgress, source: string, attempt: number): TaskEvent | undefined {
  const sourceTaskId = p.taskId || source;
  const base = {
    taskId: sourceTaskId,
    sourceTaskId,
    attempt: p.attempt || attempt,
    seq: Number(p.seq),
    status: statusName(p.status),
    at: date(p.at),
  };
  const e = p.event;
  switch (e.case) {
    case "stepStarted":
      return { ...base, kind: "step_started", step: e.value.step };
    case "stepFinished":
      return { ...base, kind: "step_finished", step: e.value.step, usage: usage(e.value.usage) };
    case "toolCall":
      return {
        ...base,
        kind: "tool_call",
        taskId: e.value.taskId || sourceTaskId,
        callId: e.value.callId,
        tool: e.value.tool,
        state: lower(ToolCallState, e.value.state) as ToolCallStateName,
        title: e.value.title,
        error: e.value.error,
        metadata: e.value.metadata,
      };
    case "textDelta":
      return { ...base, kind: "text", text: e.value.text };
    case "childTask":
      return {
        ...base,
        kind: "child_task",
        taskId: e.value.taskId,
        childTaskId: e.value.taskId,
        parentTaskId: sourceTaskId,
        agent: e.value.agent,
        description: e.value.description,
        sessionId: e.value.sessionId,
        callId: e.value.callId,
      };
    case "approvalRequired":
      return {
        ...base,
        kind: "approval_required",
        taskId: e.value.taskId || sourceTaskId,
        requestId: e.value.requestId,
        permission: e.value.permission,
        patterns: [...e.value.patterns],
      };
    case "compaction":
      return {
        ...base,
        kind: "compaction",
        tokensBefore: Number(e.value.tokensBefore),
        tokensAfter: Number(e.value.tokensAfter),
        usage: usage(e.value.usage),
      };
    case "rateLimitWait":
      return { ...base, kind: "rate_limit_wait", model: e.value.model, waitMs: Number(e.value.waitMs) };
    case "hook":
      return {
        ...base,
        kind: "hook",
        event: e.value.event,
        hook: e.value.hook,
        source: e.value.source,
        subject: e.value.subject,
        callId: e.value.callId,
        outcome: e.value.outcome,
        message: e.value.message,
        durationMs: Number(e.value.durationMs),
      };
    default:
      return undefined; // heartbeat, or an event this SDK does not know
  }
}

export function resultEvent(r: TaskResult): ResultEvent {
  const res = result(r);
  return {
    kind: "result",
    taskId: r.taskId,
    sourceTaskId: r.taskId,
    attempt: r.attempt,
    seq: 0,
    status: res.status,
    at: undefined,
    result: res,
  };
}

/** An agent tasks can be sent to. */
export interface Agent {
  name: string;
  description: string;
  mode: "unspecified" | "primary" | "subagent" | "all" | "unknown";
  hidden: boolean;
  prompt: string;
  tools: string[];
  permission: { permission: string; pattern: string; action: "unspecified" | "allow" | "ask" | "deny" | "unknown" }[];
  maxSteps: number;
  model: string | undefined;
  smallModel: string | undefined;
  temperature: number | undefined;
  topP: number | undefined;
  color: string | undefined;
  reasoningEffort: string | undefined;
  thinkingBudget: number | undefined;
  /** The generated message, with everything (MCP servers...). */
  spec: AgentSpec;
}

export function agent(a: AgentSpec): Agent {
  return {
    name: a.name,
    description: a.description,
    mode: lower(AgentMode, a.mode) as Agent["mode"],
    hidden: a.hidden,
    prompt: a.prompt,
    tools: [...a.tools],
    permission: a.permission.map((r) => ({
      permission: r.permission,
      pattern: r.pattern,
      action: lower(PermissionAction, r.action) as Agent["permission"][number]["action"],
    })),
    maxSteps: a.maxSteps,
    model: a.model,
    smallModel: a.smallModel,
    temperature: a.temperature,
    topP: a.topP,
    color: a.color,
    reasoningEffort: a.reasoningEffort,
    thinkingBudget: a.thinkingBudget,
    spec: a,
  };
}
