//! The store's error type.

/// A store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached (connection refused, pool timeout, shutdown):
    /// the caller may retry later.
    #[error("failed to {action}: database unavailable: {source}")]
    Unavailable {
        action: &'static str,
        source: sqlx::Error,
    },
    /// Any other database error.
    #[error("failed to {action}: {source}")]
    Database {
        action: &'static str,
        source: sqlx::Error,
    },
    /// Applying migrations failed.
    #[error("failed to apply migrations: {0}")]
    Migrate(String),
    /// A stored value could not be read back (a bug or a manual edit).
    #[error("task {task_id} has a corrupt column {column}: {reason}")]
    Corrupt {
        task_id: String,
        column: &'static str,
        reason: String,
    },
    /// The lifecycle refuses the transition (see `taskwire_protocol::lifecycle`).
    #[error("{0}")]
    Transition(#[from] taskwire_protocol::lifecycle::InvalidTransition),
    /// A stored agent spec could not be read back.
    #[error("agent spec {digest} is corrupt: {reason}")]
    CorruptSpec { digest: String, reason: String },
}

impl StoreError {
    pub(crate) fn from_sqlx(action: &'static str, source: sqlx::Error) -> Self {
        match &source {
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Tls(_) => Self::Unavailable { action, source },
            sqlx::Error::Database(db)
                // 57P01 admin_shutdown, 57P03 cannot_connect_now, 08xxx connection exceptions
                if db.code().is_some_and(|c| c.starts_with("08") || c == "57P01" || c == "57P03") =>
            {
                Self::Unavailable { action, source }
            }
            _ => Self::Database { action, source },
        }
    }

    /// Whether retrying later may succeed.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }
}
