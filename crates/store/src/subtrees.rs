//! Task trees whose parent ended: nothing under a finished task keeps running.
//!
//! When a task reaches a terminal state (result, deadline, dead letter, cancel), its
//! live descendants (queued, running, awaiting approval) are cancelled, each with a
//! reason naming the task that ended. A task is never cancelled for a parent that is
//! still live: a parent whose attempt crashed or is retried keeps its children, which
//! its next attempt re-attaches to.

use taskwire_protocol::TaskId;

use crate::tasks::{LIVE, sql};
use crate::{Store, StoreError};

/// A descendant cancelled because a task above it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelledDescendant {
    pub task_id: TaskId,
    /// Names the task that ended and how, e.g. `parent task … ended (error)`; kept as
    /// the task's `last_error`.
    pub reason: String,
}

impl Store {
    /// Cancels every live descendant of the tasks in `ended` that are terminal (the
    /// others are skipped); returns those cancelled. Cancelling twice is harmless.
    pub async fn cancel_descendants(
        &self,
        ended: &[TaskId],
    ) -> Result<Vec<CancelledDescendant>, StoreError> {
        if ended.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<uuid::Uuid> = ended.iter().map(|t| t.as_uuid()).collect();
        // The walk goes through finished descendants too: a live grandchild under a
        // finished child is as orphaned as a live child. It starts from the children
        // (`tasks_parent`, which holds child tasks only), so tasks without children,
        // most of them, cost one index probe each and never a scan of the table.
        let rows: Vec<(uuid::Uuid, String)> = sqlx::query_as(sql(format!(
            "WITH RECURSIVE tree AS ( \
                 SELECT c.task_id, p.task_id AS ended, p.status AS ended_status, 1 AS depth \
                 FROM tasks c JOIN tasks p ON p.task_id = c.parent_task_id \
                 WHERE c.parent_task_id = ANY($1) AND c.parent_task_id IS NOT NULL \
                   AND p.status NOT IN {LIVE} \
                 UNION ALL \
                 SELECT c.task_id, tree.ended, tree.ended_status, tree.depth + 1 \
                 FROM tasks c JOIN tree ON c.parent_task_id = tree.task_id) \
             UPDATE tasks t SET status = 'cancelled', updated_at = now(), finished_at = now(), \
                    last_error = CASE WHEN tree.depth = 1 THEN 'parent' ELSE 'ancestor' END \
                                 || ' task ' || tree.ended || ' ended (' || tree.ended_status || ')' \
             FROM tree WHERE t.task_id = tree.task_id AND t.status IN {LIVE} \
             RETURNING t.task_id, t.last_error"
        )))
        .bind(&ids)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("cancel the descendants of ended tasks", e))?;
        Ok(rows
            .into_iter()
            .map(|(id, reason)| CancelledDescendant {
                task_id: TaskId::from_uuid(id),
                reason,
            })
            .collect())
    }

    /// Up to `limit` terminal tasks that still have a live child: trees a coordinator
    /// left behind (it stopped between recording a parent's end and cancelling the
    /// children) or a child submitted while its parent was ending.
    pub async fn ended_with_live_children(&self, limit: i64) -> Result<Vec<TaskId>, StoreError> {
        let ids: Vec<uuid::Uuid> = sqlx::query_scalar(sql(format!(
            "SELECT DISTINCT p.task_id FROM tasks c JOIN tasks p ON p.task_id = c.parent_task_id \
             WHERE c.finished_at IS NULL AND c.parent_task_id IS NOT NULL AND p.status NOT IN {LIVE} LIMIT $1"
        )))
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("find ended tasks with live children", e))?;
        Ok(ids.into_iter().map(TaskId::from_uuid).collect())
    }
}
