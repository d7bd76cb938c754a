//! Agent definitions: what an agent is and what it may do, read from files and
//! checked, with no runtime. The coordinator resolves them and ships each task's agent
//! in its envelope (`taskwire_protocol::agent_spec` converts them to and from the
//! wire); the worker's session (`taskwire_agent`) runs them.
//!
//! Modules:
//! - [`agent`]: [`AgentName`], [`AgentMode`], [`AgentSpec`].
//! - [`builtin`]: the built-in agents and [`AgentRegistry`].
//! - [`loader`]: user agents from `.taskwire/agents/*.md`, merged over the built-ins.
//! - `frontmatter` (private): the YAML header of agent and command files.
//! - [`command`]: slash commands from `.taskwire/commands/*.md`, template rendering
//!   (the last placeholder takes the rest) and the subtask rule of seed 000.
//! - [`mcp`]: MCP servers declared in `mcp.json` (OpenCode's shape).
//! - [`hooks`]: hooks run around sessions and tool calls (`hooks.json`, Claude Code's
//!   shape, and an agent's frontmatter `hooks`).
//! - [`skill`]: skills, `skills/NAME/SKILL.md` with their files (the shared format).
//! - [`policy`]: the tools a child session gets (depth limit, parent scope).
//! - [`permission`]: `allow | ask | deny` rules, wildcard matching, last match wins,
//!   strictest verdict over a call's subjects and over the layers a child inherits
//!   from its ancestors, session approvals.
//! - [`output_schema`]: a task's JSON Schema for its answer and the check.
//! - [`shell`]: splitting command lines for bash rules and command arguments.
//! - [`error`]: [`InvalidName`], [`LoadError`].

pub mod agent;
pub mod builtin;
pub mod command;
pub mod error;
mod frontmatter;
pub mod hooks;
pub mod loader;
pub mod mcp;
pub mod output_schema;
pub mod permission;
pub mod policy;
pub mod shell;
pub mod skill;

pub use agent::{AgentMode, AgentName, AgentSpec};
pub use builtin::AgentRegistry;
pub use command::{Command, CommandMode, CommandRegistry};
pub use error::{InvalidName, LoadError};
pub use loader::load_agents;
pub use permission::{PermissionAction, PermissionRule};
pub use policy::{DEFAULT_MAX_DEPTH, child_tools_policy, restrict_to_scope};
