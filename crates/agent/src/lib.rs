//! The agent at run time: a session's setup, the tools, the MCP servers and the loop
//! that runs an agent. What an agent is and what it may do (specs, built-ins, loader,
//! permissions, policy, output schemas, slash commands, `mcp.json`) is
//! `taskwire_definitions`'.
//!
//! A worker takes a resolved `AgentSpec` from a task envelope, sets its session up
//! ([`SessionSetup`]: narrowed for a child by the definitions' policy), builds a
//! [`Workspace`] and calls [`run_session`] with a model [`Provider`], the
//! [`ToolRegistry`] and a [`SessionHost`] through which the session reaches the rest
//! of the fleet (approvals, child tasks); progress comes back through a
//! [`SessionObserver`] and the end as a [`SessionOutcome`] carrying the [`Transcript`]
//! to persist. The crate never depends on tonic, sqlx or async-nats; its only network
//! IO is the `webfetch` tool, MCP servers and the proxy through which `bash` commands
//! reach the hosts a `network` rule allows. Commands run confined by
//! `taskwire-sandbox` ([`CommandSandbox`]).
//!
//! Modules:
//! - [`command`]: a slash command's subtask run as the session's first delegation, and
//!   the template's !`cmd` run under the session's `bash` rules ([`command::shell`]).
//! - [`hooks`]: running the hooks of a session's spec (commands in the sandbox, HTTP
//!   POSTs to allowed URLs) and reading their answers.
//! - [`fork`]: a parent's conversation handed to a child its `task` call forked.
//! - [`host`]: [`SessionHost`], what the session needs from the distributed system,
//!   and [`NoopHost`].
//! - [`mcp`]: MCP servers as a worker runs them, and their tools.
//! - [`workspace`]: [`Workspace`], which confines every tool path to one directory.
//! - [`tools`]: the [`Tool`] trait, [`ToolRegistry`] and the built-in tools.
//! - [`session`]: the setup, the step loop, its events, state and outcome, and
//!   compaction.
//! - [`system_prompt`]: the agent's prompt, the environment block and the project's
//!   instructions (`AGENTS.md`, configured files).
//! - [`title`]: the hidden `title` agent's call and the shape of a title.
//! - [`transcript`]: the serialisable session record and its conversion to messages.
//! - [`output_schema`]: the one correction before a mismatch.
//! - [`provenance`]: the files read, URLs fetched and commands run, for the result.
//! - [`user_message`]: the prompt with the task's inputs (`@path`, `input`,
//!   `context_refs`, `attachments`) rendered after it.
//! - `spans` (private): the `execute_tool` and `await_approval` trace spans.
//! - [`error`]: [`ToolError`], [`SessionError`].
//!
//! [`Provider`]: taskwire_llm::Provider

#[cfg(test)]
mod builtin_tests;
pub mod command;
pub mod error;
pub mod fork;
pub mod hooks;
pub mod host;
pub mod mcp;
pub mod output_schema;
pub mod provenance;
pub mod session;
mod spans;
pub mod system_prompt;
pub mod title;
pub mod tools;
pub mod transcript;
pub mod user_message;
pub mod workspace;

pub use command::SUBTASK_SUMMARY_PROMPT;
pub use error::{SessionError, ToolError};
pub use host::{
    ApprovalAnswer, ApprovalRequest, ChildProgress, ChildTaskRequest, ChildTaskResult, LocalHost,
    NoopHost, SessionHost,
};
pub use session::{
    CompactionPolicy, DEFAULT_COMPACTION_THRESHOLD, NoopObserver, SessionEvent, SessionObserver,
    SessionOutcome, SessionParams, SessionSetup, SessionState, SessionStatus, SetupError,
    ToolCallState, ToolCallSummary, run_session,
};
pub use tools::{CommandSandbox, Tool, ToolContext, ToolOutput, ToolRegistry};
pub use transcript::{MessageRole, Part, SubtaskPart, Transcript, TranscriptMessage};
pub use workspace::Workspace;
