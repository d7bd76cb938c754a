//! The counts behind the coordinator's gauges, read in one cheap statement: each
//! count is over the partial index of unfinished tasks (`tasks_open_tenant`) or a table
//! kept short (the outbox, emptied by the relay).

use crate::{Store, StoreError};

/// Tasks in the states a gauge shows, across the whole deployment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GaugeCounts {
    /// Tasks `running`.
    pub running: i64,
    /// Tasks `awaiting_approval`: an `ask` waits for an answer.
    pub awaiting_approval: i64,
    /// Dispatches written but not yet published to JetStream.
    pub outbox_backlog: i64,
}

impl Store {
    /// The current [`GaugeCounts`].
    pub async fn gauge_counts(&self) -> Result<GaugeCounts, StoreError> {
        let (running, awaiting_approval, outbox_backlog): (i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM tasks WHERE finished_at IS NULL AND status = 'running'), \
                    (SELECT count(*) FROM tasks WHERE finished_at IS NULL AND status = 'awaiting_approval'), \
                    (SELECT count(*) FROM outbox)",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("count tasks for the gauges", e))?;
        Ok(GaugeCounts {
            running,
            awaiting_approval,
            outbox_backlog,
        })
    }

    /// Whether the database answers a trivial query (for readiness probes).
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(|e| StoreError::from_sqlx("ping postgres", e))?;
        Ok(())
    }
}
