//! Errors of the agent crate.
//!
//! - [`ToolError`] is the crate's error enum: everything that can go wrong with one
//!   tool call, from bad arguments to a permission rule. Its `Display` text is what the
//!   model reads (as `error: ...`), so messages are lowercase, say what was being done
//!   and name the thing.
//! - [`SessionError`] is not propagated with `?`: it is the record a session ends with
//!   (in [`crate::session::SessionOutcome`]), carrying the retry verdict that the
//!   worker maps to a redelivery or a terminal result.
//! - [`InvalidName`] and [`LoadError`] are the definitions' errors
//!   (`taskwire_definitions::error`), re-exported.

use serde::{Deserialize, Serialize};

pub use taskwire_definitions::error::{InvalidName, LoadError};

/// Why `webfetch` could not turn a response into text for the model (the `reason` of
/// [`ToolError::Fetch`]).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("failed to build the http client: {0}")]
    Client(#[source] reqwest::Error),
    #[error("the content type {content_type} is not text")]
    NotText { content_type: String },
    #[error("failed to convert the page to markdown: {0}")]
    Markdown(#[source] std::io::Error),
}

/// A tool call that failed. Never a session failure: the session loop feeds the text
/// back to the model as the tool's result so the model can recover.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The model's arguments did not fit the tool's schema (or a regex/glob in them
    /// did not compile).
    #[error("invalid arguments for {tool}: {reason}")]
    InvalidArguments { tool: String, reason: String },

    /// A path that resolves outside the workspace root (`..`, an absolute path
    /// elsewhere, or a symlink pointing out).
    #[error("path {path} is outside the workspace")]
    PathOutsideWorkspace { path: String },

    #[error("path {path} does not exist")]
    NotFound { path: String },

    #[error("failed to {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },

    /// The call was understood but the tool will not do it (binary file, directory
    /// where a file was expected, ...).
    #[error("refusing to {action} {path}: {reason}")]
    Refused {
        action: &'static str,
        path: String,
        reason: String,
    },

    #[error("unknown tool {name}")]
    UnknownTool { name: String },

    /// The tool exists but this session did not offer it (allow-list or a blanket
    /// deny). The model is never trusted to respect the offered list.
    #[error("tool {tool} is not available to agent {agent}")]
    NotOffered { tool: String, agent: String },

    #[error("permission denied: {permission} on {subject} is denied by rule \"{rule}\"")]
    Denied {
        permission: String,
        subject: String,
        rule: String,
    },

    /// An `ask` rule matched and the approver said no; `message` is theirs, for the
    /// model to act on.
    #[error(
        "permission rejected: {permission} on {subject} needed approval (rule \"{rule}\") \
         and was rejected{}",
        message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
    )]
    Rejected {
        permission: String,
        subject: String,
        rule: String,
        message: Option<String>,
    },

    /// An `ask` rule matched and nobody answered in time: a deny.
    #[error(
        "permission denied: {permission} on {subject} needed approval (rule \"{rule}\") \
         and approval timed out"
    )]
    ApprovalTimedOut {
        permission: String,
        subject: String,
        rule: String,
    },

    /// The same tool with the same input for the third time in a row: the model is
    /// stuck, and running the call again would not unstick it.
    #[error(
        "refusing to run {tool} a third time in a row with the same input; the result \
         will not change: change the input or try a different approach"
    )]
    DoomLoop { tool: String },

    /// A command ran past its timeout and was killed with everything it started.
    #[error("command timed out after {timeout_ms} ms and was killed; output so far:\n{output}")]
    CommandTimedOut { timeout_ms: u64, output: String },

    #[error("failed to fetch {url}: {reason}")]
    Fetch { url: String, reason: String },

    /// A child task could not run or did not finish with an answer.
    #[error("subagent {agent} failed: {reason}")]
    ChildFailed { agent: String, reason: String },

    /// A child finished, but its changes to the files could not be brought into this
    /// session's workspace (they conflict with its own); the workspace is unchanged.
    #[error(
        "subagent {agent} finished, but its changes were not applied to your workspace: {reason}"
    )]
    ChildChangesNotApplied { agent: String, reason: String },

    /// A hook (`PreToolUse`) refused the call; `reason` is the hook's, for the model.
    #[error("blocked by the {event} hook `{hook}`: {reason}")]
    HookBlocked {
        event: &'static str,
        hook: String,
        reason: String,
    },

    /// A hook that must pass before the call runs could not run or answer: the call is
    /// not run (a check that did not run has not passed).
    #[error("the {event} hook `{hook}` failed, so the call was not run: {reason}")]
    HookFailed {
        event: &'static str,
        hook: String,
        reason: String,
    },

    #[error("tool call was cancelled")]
    Cancelled,

    /// The tool itself broke (a panicked worker thread); a bug, not bad input.
    #[error("tool {tool} failed: {reason}")]
    Failed { tool: String, reason: String },
}

impl ToolError {
    /// Wraps an IO error, mapping "not found" to [`ToolError::NotFound`] so the model
    /// gets the short, actionable message.
    pub fn io(action: &'static str, path: impl Into<String>, source: std::io::Error) -> Self {
        let path = path.into();
        if source.kind() == std::io::ErrorKind::NotFound {
            Self::NotFound { path }
        } else {
            Self::Io {
                action,
                path,
                source,
            }
        }
    }

    pub fn invalid_arguments(tool: &str, reason: impl std::fmt::Display) -> Self {
        Self::InvalidArguments {
            tool: tool.to_owned(),
            reason: reason.to_string(),
        }
    }
}

/// Why a session ended in [`crate::session::SessionStatus::Error`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct SessionError {
    pub message: String,
    /// Whether running the task again may succeed (rate limit, timeout, 5xx) as
    /// opposed to a request the provider will always reject.
    pub retryable: bool,
}

impl From<&taskwire_llm::LlmError> for SessionError {
    fn from(err: &taskwire_llm::LlmError) -> Self {
        // LlmError messages already say what failed ("model request to ... failed").
        Self {
            message: err.to_string(),
            retryable: err.retryable(),
        }
    }
}
