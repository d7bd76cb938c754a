//! The crate's error type.

use std::path::PathBuf;

/// Something went wrong preparing, reading or changing a task's workspace.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The `git` binary could not be started (not installed, not on `PATH`).
    #[error("failed to run git: {0}")]
    GitMissing(#[source] std::io::Error),

    /// A git command failed; `action` says what it was for.
    #[error("failed to {action}: {stderr}")]
    Git { action: String, stderr: String },

    /// Reading or writing the file system failed.
    #[error("failed to {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// Another worker holds the directory (two workers with one `--workspaces-dir` and
    /// the same worker id).
    #[error(
        "workspaces directory {} is in use by another worker with the same id; give each worker its own id or --workspaces-dir",
        dir.display()
    )]
    InUse { dir: PathBuf },

    /// A repository named by a task could not be cloned or fetched (network, access,
    /// no such repository). May succeed later.
    #[error("failed to fetch git repository {url}: {reason}")]
    Fetch { url: String, reason: String },

    /// The repository was fetched but has no such branch, tag or commit.
    #[error("git repository {url} has no branch, tag or commit `{reference}`")]
    RefNotFound { url: String, reference: String },

    /// Changes a workspace had to start from do not apply to it (`what` names them:
    /// the parent's changes, an earlier attempt's).
    #[error("{what} do not apply to this workspace: {reason}")]
    DoesNotApply { what: &'static str, reason: String },

    /// A read-only task reads the worker's base directly: it has no workspace to make.
    #[error("a read-only task reads the base directly and has no workspace of its own")]
    ReadsBase,

    /// A patch conflicts with the workspace's own changes; nothing was applied.
    /// `report` shows the conflicting hunks.
    #[error("{report}")]
    Conflict { report: String },
}

impl WorkspaceError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// Whether trying again later (on this or another worker) may succeed: a fetch
    /// that failed, a file system error. A missing ref or a patch that does not apply
    /// stays so.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Fetch { .. } | Self::Io { .. } | Self::GitMissing(_)
        )
    }
}
