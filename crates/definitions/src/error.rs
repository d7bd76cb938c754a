//! Errors of agent definitions.
//!
//! - [`LoadError`] is one bad agent, command or `mcp.json` file; loaders collect them
//!   and load the rest.
//! - [`InvalidName`] is the parse error of validated names such as
//!   [`crate::AgentName`].

/// One agent or command file that could not be loaded; the others still are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {}{message}", key.as_deref().map(|k| format!("key `{k}`: ")).unwrap_or_default())]
pub struct LoadError {
    /// The file, shown relative to the config directory, e.g. `agents/review.md`.
    pub file: String,
    /// The frontmatter key at fault, as a dotted path (`permission.bash`).
    pub key: Option<String>,
    pub message: String,
}

/// A name that failed validation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid agent name {name:?}: {reason}")]
pub struct InvalidName {
    pub name: String,
    pub reason: &'static str,
}
