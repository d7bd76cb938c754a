//! The session loop against real tools in a temporary workspace. The model and the
//! host are the test doubles: a provider that replays scripted answers and records
//! every request, and a host with scripted approvals and in-process children.
//!
//! - `flow`: tool calls and results in order, resume from a transcript, concurrency.
//! - `refusals`: denied, not offered, unknown, malformed and looping calls never
//!   execute.
//! - `approvals`: `ask` through the host (once, always, reject, time out), bash rules.
//! - `inherited`: a child session bounded by its ancestors' rules.
//! - `tasks`: the `task` tool: parallel children, metadata, failures, usage.
//! - `background`: `task` with `background: true`, `task_status`, results at the
//!   next step, a final answer that waits, children cancelled with the session.
//! - `checkpoints`: a step calling `task` saved before its children start; resuming
//!   from it.
//! - `agents`: markdown agents, tool-less agents, transcripts, slash-command subtasks.
//! - `endings`: step limit, cancellation, model errors.
//! - `compaction`: a session over its share of the context window goes on from a
//!   summary; later runs and resumed checkpoints too.
//! - `hooks`: `PreToolUse`, `PostToolUse`, `SessionStart`, `Stop`, `SubagentStop`
//!   hooks as sandboxed commands and HTTP POSTs.
//! - `structured`: answers checked against an output schema, and the one retry.

mod agents;
mod approvals;
mod background;
mod checkpoints;
mod compaction;
mod endings;
mod flow;
mod hooks;
mod inherited;
mod refusals;
mod structured;
mod support;
mod tasks;
