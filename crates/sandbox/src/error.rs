//! The crate's error type.

use std::path::PathBuf;
use std::sync::Arc;

/// Why a command could not be confined (and so must not run).
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel lacks a mechanism the sandbox needs; names what is missing.
    #[error("the command sandbox is unavailable: {missing}")]
    Unavailable { missing: String },

    #[error("failed to build the landlock ruleset: {reason}")]
    Landlock { reason: String },

    #[error("failed to compile the seccomp filter: {reason}")]
    Seccomp { reason: String },

    #[error("failed to open {} for the sandbox: {source}", path.display())]
    Path {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("failed to {action}: {source}")]
    Io {
        action: &'static str,
        #[source]
        source: std::io::Error,
    },

    /// The process did not try to enter a mount namespace of its own at start
    /// ([`crate::mounts::enter_private_mounts`] was not called).
    #[error("not entered at start")]
    MountsNotEntered,

    /// An error recorded when it happened and reported again each time it is asked
    /// for (why the process has no private mounts); shared, as the error itself cannot
    /// be copied.
    #[error(transparent)]
    Recorded(Arc<SandboxError>),
}

impl SandboxError {
    pub(crate) fn io(action: &'static str) -> impl FnOnce(std::io::Error) -> Self {
        move |source| Self::Io { action, source }
    }
}

impl From<landlock::RulesetError> for SandboxError {
    fn from(err: landlock::RulesetError) -> Self {
        Self::Landlock {
            reason: err.to_string(),
        }
    }
}
