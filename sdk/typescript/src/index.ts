// @taskwire/client: a TypeScript client for taskwire's gRPC API.
export { Client, Task, DEFAULT_ADDR } from "./client.js";
export type {
  ApprovalAnswerName,
  CallOptions,
  ClientOptions,
  ListOptions,
  RunCommandOptions,
  SubmitOptions,
} from "./client.js";
export * from "./errors.js";
export { statusName, statusValue } from "./types.js";
export type {
  Agent,
  ApprovalRequiredEvent,
  Attempt,
  ChildTaskEvent,
  CompactionEvent,
  HookRunEvent,
  RateLimitWaitEvent,
  Result,
  ResultEvent,
  StepFinishedEvent,
  StepStartedEvent,
  TaskEvent,
  TaskEventKind,
  TaskInfo,
  TaskStatusName,
  TextEvent,
  ToolCallEvent,
  ToolCallStateName,
  Usage,
  Webhook,
} from "./types.js";
