//! Task trees whose parent ended: nothing under a finished task keeps running.
//!
//! When a task reaches a terminal state (result, deadline, dead letter, cancel), its
//! live descendants (queued, running, awaiting approval) are cancelled, each with a
//! reason naming the task that ended. A task is never cancelled for a parent that is
//! still live: a parent whose attempt crashed or is retried keeps its children, which
//! its next attempt re-attaches to.

use taskwire_protocol::TaskId;

use crate::lifecycle::live;
use crate::tasks::sql;
use crate::{Store, StoreError};

impl Store {
    /// Up to `limit` terminal tasks that still have a live child: trees a coordinator
    /// left behind (it stopped between recording a parent's end and cancelling the
    /// children) or a child submitted while its parent was ending.
    pub async fn ended_with_live_children(&self, limit: i64) -> Result<Vec<TaskId>, StoreError> {
        let ids: Vec<uuid::Uuid> = sqlx::query_scalar(sql(format!(
            "SELECT DISTINCT p.task_id FROM tasks c JOIN tasks p ON p.task_id = c.parent_task_id \
             WHERE c.finished_at IS NULL AND c.parent_task_id IS NOT NULL AND p.status NOT IN {live} LIMIT $1",
            live = live()
        )))
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("find ended tasks with live children", e))?;
        Ok(ids.into_iter().map(TaskId::from_uuid).collect())
    }
}
