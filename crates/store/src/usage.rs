//! Usage of tasks and subtrees, and what a budgeted tree has spent.
//!
//! Each task row keeps its own usage (the sum of its recorded attempts' own model
//! calls, descendants excluded; see `results`). A subtree's usage is the sum of those
//! rows over the task and all its descendants, computed in one recursive query: the two
//! halves of `cost::TaskUsage`, which every view of a task shows. A
//! budget belongs to the topmost task of the chain of budgeted ancestors (a child
//! inherits its parent's budget, so budgeted tasks form a connected top of the tree):
//! its subtree's recorded usage is what the budget has spent.

use std::collections::HashMap;

use taskwire_protocol::{TaskId, Usage};

use crate::{Store, StoreError};

type UsageRow = (uuid::Uuid, i64, i64, i64, i64, i64, i64);

fn usage_of((_, input, output, cost, unpriced, cached, written): UsageRow) -> Usage {
    let n = |v: i64| u64::try_from(v).unwrap_or_default();
    Usage {
        input_tokens: n(input),
        output_tokens: n(output),
        cost_picousd: n(cost),
        unpriced_tokens: n(unpriced),
        cached_input_tokens: n(cached),
        cache_write_input_tokens: n(written),
    }
}

impl Store {
    /// The usage of each task's whole subtree (it and every descendant), recorded
    /// results only. Tasks not found are left out.
    pub async fn subtree_usage(
        &self,
        tasks: &[TaskId],
    ) -> Result<HashMap<TaskId, Usage>, StoreError> {
        if tasks.is_empty() {
            return Ok(HashMap::new());
        }
        let ids: Vec<uuid::Uuid> = tasks.iter().map(|t| t.as_uuid()).collect();
        // The walk carries each row's usage, so no join back to `tasks` follows it, and
        // finds a task's children with a `LATERAL` subquery behind `OFFSET 0`, which
        // the planner cannot flatten into a join: it runs per task as a probe of
        // `tasks_parent`, whatever the table's statistics say. As a join, on a table
        // that grew since its last analysis (the planner then guesses 1 in 200 rows per
        // parent), both steps hashed the whole table: 20 ms after 20,000 tasks, a cost
        // growing with every task ever run.
        let rows: Vec<UsageRow> = sqlx::query_as(
            "WITH RECURSIVE tree(top, task_id, input, output, cost, unpriced, cached, written) AS ( \
                 SELECT task_id, task_id, own_input_tokens, own_output_tokens, own_cost_picousd, \
                        own_unpriced_tokens, own_cached_input_tokens, own_cache_write_input_tokens \
                 FROM tasks WHERE task_id = ANY($1) \
                 UNION ALL \
                 SELECT tree.top, c.task_id, c.own_input_tokens, c.own_output_tokens, c.own_cost_picousd, \
                        c.own_unpriced_tokens, c.own_cached_input_tokens, c.own_cache_write_input_tokens \
                 FROM tree CROSS JOIN LATERAL ( \
                     SELECT task_id, own_input_tokens, own_output_tokens, own_cost_picousd, \
                            own_unpriced_tokens, own_cached_input_tokens, own_cache_write_input_tokens \
                     FROM tasks WHERE parent_task_id = tree.task_id OFFSET 0) c) \
             SELECT top, SUM(input)::int8, SUM(output)::int8, SUM(cost)::int8, \
                    SUM(unpriced)::int8, SUM(cached)::int8, SUM(written)::int8 \
             FROM tree GROUP BY top",
        )
        .bind(&ids)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("sum the usage of subtrees", e))?;
        Ok(rows
            .into_iter()
            .map(|row| (TaskId::from_uuid(row.0), usage_of(row)))
            .collect())
    }

    /// What the budget `task` runs under has spent so far: the recorded usage of the
    /// subtree of its topmost budgeted ancestor (or itself). Zero when `task` has no
    /// budget or does not exist.
    pub async fn budget_spent(&self, task: TaskId) -> Result<Usage, StoreError> {
        let top: Option<uuid::Uuid> = sqlx::query_scalar(
            "WITH RECURSIVE up(task_id, parent_task_id, budgeted, level) AS ( \
                 SELECT task_id, parent_task_id, \
                        max_tokens IS NOT NULL OR max_cost_picousd IS NOT NULL, 0 \
                 FROM tasks WHERE task_id = $1 \
                 UNION ALL \
                 SELECT p.task_id, p.parent_task_id, \
                        p.max_tokens IS NOT NULL OR p.max_cost_picousd IS NOT NULL, up.level + 1 \
                 FROM tasks p JOIN up ON p.task_id = up.parent_task_id WHERE up.budgeted) \
             SELECT task_id FROM up WHERE budgeted ORDER BY level DESC LIMIT 1",
        )
        .bind(task.as_uuid())
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("find the top of a budgeted tree", e))?;
        let Some(top) = top.map(TaskId::from_uuid) else {
            return Ok(Usage::default());
        };
        Ok(self
            .subtree_usage(&[top])
            .await?
            .remove(&top)
            .unwrap_or_default())
    }
}
