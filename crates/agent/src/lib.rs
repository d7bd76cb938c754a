//! The agent half of taskwire: what an agent is, what it may do, and the loop that
//! runs it.
//!
//! A worker takes a resolved [`AgentSpec`] from a task envelope (narrowed for a child
//! by [`policy`]), builds a [`Workspace`] and calls [`run_session`] with a model
//! [`Provider`], the [`ToolRegistry`] and a [`SessionHost`] through which the session
//! reaches the rest of the fleet (approvals, child tasks); progress comes back
//! through a [`SessionObserver`] and the end as a [`SessionOutcome`] carrying the
//! [`Transcript`] to persist. The crate never depends on tonic, sqlx or async-nats;
//! its only network IO is the `webfetch` tool and the proxy through which `bash`
//! commands reach the hosts a `network` rule allows. Commands run confined by
//! `taskwire-sandbox` ([`CommandSandbox`]).
//!
//! Modules:
//! - [`agent`]: [`AgentName`], [`AgentMode`], [`AgentSpec`].
//! - [`builtin`]: the built-in agents and [`AgentRegistry`].
//! - [`loader`]: user agents from `.taskwire/agents/*.md`, merged over the built-ins.
//! - [`command`]: slash commands from `.taskwire/commands/*.md`, template rendering
//!   (the last placeholder takes the rest), the subtask rule of seed 000, and the
//!   template's !`cmd` run under the session's `bash` rules ([`command::shell`]).
//! - [`policy`]: the tools a child session gets (depth limit, parent scope).
//! - [`permission`]: `allow | ask | deny` rules, wildcard matching, last match wins,
//!   strictest verdict over a call's subjects and over the layers a child inherits
//!   from its ancestors, session approvals.
//! - [`shell`]: splitting command lines for bash rules and command arguments.
//! - [`host`]: [`SessionHost`], what the session needs from the distributed system,
//!   and [`NoopHost`].
//! - [`workspace`]: [`Workspace`], which confines every tool path to one directory.
//! - [`tools`]: the [`Tool`] trait, [`ToolRegistry`] and the built-in tools.
//! - [`session`]: the step loop, its events, state and outcome, and compaction.
//! - [`system_prompt`]: the agent's prompt, the environment block and the project's
//!   instructions (`AGENTS.md`, configured files).
//! - [`title`]: the hidden `title` agent's call and the shape of a title.
//! - [`transcript`]: the serialisable session record and its conversion to messages.
//! - [`output_schema`]: a task's JSON Schema for its answer, the check, and the one
//!   correction before a mismatch.
//! - [`provenance`]: the files read, URLs fetched and commands run, for the result.
//! - [`user_message`]: the prompt with the task's inputs (`@path`, `input`,
//!   `context_refs`, `attachments`) rendered after it.
//! - `spans` (private): the `execute_tool` and `await_approval` trace spans.
//! - [`error`]: [`ToolError`], [`SessionError`], [`InvalidName`], [`LoadError`].
//!
//! [`Provider`]: taskwire_llm::Provider

pub mod agent;
pub mod builtin;
pub mod command;
pub mod error;
mod frontmatter;
pub mod host;
pub mod loader;
pub mod mcp;
pub mod output_schema;
pub mod permission;
pub mod policy;
pub mod provenance;
pub mod session;
pub mod shell;
mod spans;
pub mod system_prompt;
pub mod title;
pub mod tools;
pub mod transcript;
pub mod user_message;
pub mod workspace;

pub use agent::{AgentMode, AgentName, AgentSpec};
pub use builtin::AgentRegistry;
pub use command::{Command, CommandMode, CommandRegistry, SUBTASK_SUMMARY_PROMPT};
pub use error::{InvalidName, LoadError, SessionError, ToolError};
pub use host::{
    ApprovalAnswer, ApprovalRequest, ChildProgress, ChildTaskRequest, ChildTaskResult, LocalHost,
    NoopHost, SessionHost,
};
pub use loader::load_agents;
pub use permission::{PermissionAction, PermissionRule};
pub use policy::{DEFAULT_MAX_DEPTH, child_tools_policy, restrict_to_scope};
pub use session::{
    CompactionPolicy, DEFAULT_COMPACTION_THRESHOLD, NoopObserver, SessionEvent, SessionObserver,
    SessionOutcome, SessionParams, SessionState, SessionStatus, ToolCallState, ToolCallSummary,
    run_session,
};
pub use tools::{CommandSandbox, Tool, ToolContext, ToolOutput, ToolRegistry};
pub use transcript::{MessageRole, Part, SubtaskPart, Transcript, TranscriptMessage};
pub use workspace::Workspace;
