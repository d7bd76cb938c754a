//! The agent half of taskwire: what an agent is, what it may do, and the loop that
//! runs it.
//!
//! A worker takes a resolved [`AgentSpec`] from a task envelope, builds a
//! [`Workspace`] and calls [`run_session`] with a model [`Provider`] and the
//! [`ToolRegistry`]; progress comes back through a [`SessionObserver`] and the end as
//! a [`SessionOutcome`]. The crate does no network IO of its own and never depends on
//! tonic, sqlx or async-nats.
//!
//! Modules:
//! - [`agent`]: [`AgentName`], [`AgentMode`], [`AgentSpec`].
//! - [`builtin`]: the built-in agents (`general`, `explore`) and [`AgentRegistry`].
//! - [`permission`]: `allow | ask | deny` rules, wildcard matching, last match wins.
//! - [`workspace`]: [`Workspace`], which confines every tool path to one directory.
//! - [`tools`]: the [`Tool`] trait, [`ToolRegistry`] and the `read`, `list`, `glob`
//!   and `grep` tools.
//! - [`session`]: the step loop, its events and its outcome.
//! - [`error`]: [`ToolError`], [`SessionError`], [`InvalidName`].
//!
//! [`Provider`]: taskwire_llm::Provider

pub mod agent;
pub mod builtin;
pub mod error;
pub mod permission;
pub mod session;
pub mod tools;
pub mod workspace;

pub use agent::{AgentMode, AgentName, AgentSpec};
pub use builtin::AgentRegistry;
pub use error::{InvalidName, SessionError, ToolError};
pub use permission::{PermissionAction, PermissionRule};
pub use session::{
    NoopObserver, SessionEvent, SessionObserver, SessionOutcome, SessionParams, SessionStatus,
    ToolCallState, ToolCallSummary, run_session,
};
pub use tools::{Tool, ToolContext, ToolOutput, ToolRegistry};
pub use workspace::Workspace;
