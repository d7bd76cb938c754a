//! Claims: each delivery of a task to a worker gets a new fencing epoch.

use std::collections::HashMap;

use sqlx::Row;
use taskwire_protocol::{ClaimEpoch, TaskId, TaskStatus, WorkerId};

use crate::tasks::{LIVE, sql};
use crate::{ClaimOutcome, Store, StoreError};

impl Store {
    /// Claims tasks for workers: each live task gets a new epoch and attempt, and an
    /// attempt row; a still-running attempt it supersedes is marked `abandoned`.
    ///
    /// A task past its deadline becomes `deadline_exceeded`, and a task whose attempt
    /// budget is spent becomes `dead_lettered`; both are reported finished, so they never
    /// start. Outcomes are in the order of `claims`; a task id may appear at most once.
    ///
    /// With `max_running_per_tenant`, a queued task whose tenant already runs that many
    /// tasks is not granted but reported [`ClaimOutcome::Busy`] (a redelivery of a task
    /// that is already running is always granted: it holds its slot already). A task
    /// whose session is in use by another running task is `Busy` too: one run at a time
    /// per session.
    pub async fn claim_tasks(
        &self,
        claims: &[(TaskId, WorkerId)],
        max_running_per_tenant: Option<u32>,
    ) -> Result<Vec<ClaimOutcome>, StoreError> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<uuid::Uuid> = claims.iter().map(|(t, _)| t.as_uuid()).collect();
        let workers: Vec<String> = claims.iter().map(|(_, w)| w.to_string()).collect();
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(|e| StoreError::from_sqlx("begin a claim", e))?;
        // A task past its deadline expires first; one whose budget is spent is dead-
        // lettered. The candidates are found by primary key alone (a materialized CTE,
        // so no status index is intersected with it); usually there are none.
        sqlx::query(sql(format!(
            "WITH due AS MATERIALIZED ( \
                 SELECT task_id, deadline IS NOT NULL AND deadline <= now() AS expired FROM tasks \
                 WHERE task_id = ANY($1) \
                   AND ((deadline IS NOT NULL AND deadline <= now()) OR attempt - attempt_base >= max_attempts)) \
             UPDATE tasks t SET updated_at = now(), finished_at = now(), \
                    status = CASE WHEN due.expired THEN 'deadline_exceeded' ELSE 'dead_lettered' END, \
                    last_error = CASE WHEN due.expired THEN t.last_error \
                                      ELSE COALESCE(t.last_error, 'attempts exhausted') END \
             FROM due WHERE t.task_id = due.task_id AND t.status IN {LIVE}"
        )))
        .bind(&ids)
        .execute(&mut *tx)
        .await
        .map_err(|e| StoreError::from_sqlx("expire or dead-letter claimed tasks", e))?;
        let limit = max_running_per_tenant.map(|l| i64::from(l.max(1)));
        if limit.is_some() {
            // Serialise claims per tenant, so concurrent batches cannot both take the
            // last slot. Locks are taken in tenant order (no deadlock between batches).
            sqlx::query(
                "SELECT pg_advisory_xact_lock(hashtext('taskwire-tenant:' || tenant)) \
                 FROM (SELECT DISTINCT tenant FROM tasks WHERE task_id = ANY($1) ORDER BY tenant) AS t",
            )
            .bind(&ids)
            .execute(&mut *tx)
            .await
            .map_err(|e| StoreError::from_sqlx("lock tenants for a claim", e))?;
        }
        // The session check looks a task's session up by `tasks_session` alone (`OFFSET
        // 0` keeps its status test out of the index scan): otherwise the planner may
        // intersect it with an index of unfinished tasks, reading every one's entry for
        // each task claimed.
        // The claim's update changes no indexed column (the status is in no index; the
        // unfinished tasks are indexed by `finished_at`, which a claim leaves null), so
        // Postgres writes it in place as a heap-only tuple: migration 0010.
        // Without a limit the running tasks are not counted at all (one statement per
        // case, so the plan of one never carries the other's work).
        let (limited, admitted) = match limit {
            Some(_) => (
                "busy AS ( \
                     SELECT tenant, count(*) AS n FROM tasks \
                     WHERE finished_at IS NULL AND status = 'running' AND tenant IN (SELECT tenant FROM fresh) \
                     GROUP BY tenant),",
                "SELECT fresh.task_id, fresh.worker_id, fresh.queued_since FROM fresh LEFT JOIN busy USING (tenant) \
                 WHERE COALESCE(busy.n, 0) + fresh.rn <= $3",
            ),
            None => (
                "",
                "SELECT fresh.task_id, fresh.worker_id, fresh.queued_since FROM fresh WHERE $3::bigint IS NULL",
            ),
        };
        let granted = sqlx::query(sql(format!(
            "WITH c AS (SELECT * FROM UNNEST($1::uuid[], $2::text[]) AS c(task_id, worker_id)), \
             queued AS ( \
                 SELECT t.task_id, c.worker_id, t.tenant, t.created_at, t.updated_at AS queued_since, \
                        row_number() OVER (PARTITION BY COALESCE(t.session_id, t.task_id) \
                                           ORDER BY t.created_at, t.task_id) AS in_session \
                 FROM tasks t JOIN c ON t.task_id = c.task_id WHERE t.status = 'queued' \
                   AND NOT EXISTS (SELECT 1 FROM (SELECT o.task_id, o.status FROM tasks o \
                                                  WHERE o.session_id = t.session_id OFFSET 0) o \
                                   WHERE o.task_id <> t.task_id AND o.status IN ('running', 'awaiting_approval'))), \
             fresh AS ( \
                 SELECT task_id, worker_id, tenant, queued_since, \
                        row_number() OVER (PARTITION BY tenant ORDER BY created_at, task_id) AS rn \
                 FROM queued WHERE in_session = 1), \
             {limited} \
             allowed AS ( \
                 {admitted} \
                 UNION ALL \
                 SELECT c.task_id, c.worker_id, NULL::timestamptz FROM c JOIN tasks t ON t.task_id = c.task_id \
                 WHERE t.status IN ('running', 'awaiting_approval')) \
             UPDATE tasks t SET status = 'running', attempt = t.attempt + 1, claim_epoch = t.claim_epoch + 1, \
                    worker_id = a.worker_id, updated_at = now() \
             FROM allowed a \
             WHERE t.task_id = a.task_id AND t.status IN {LIVE} \
             RETURNING t.task_id, t.claim_epoch, t.attempt, t.attempt - t.attempt_base >= t.max_attempts, a.worker_id, \
                       EXTRACT(EPOCH FROM now() - a.queued_since)::float8"
        )))
        .bind(&ids)
        .bind(&workers)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| StoreError::from_sqlx("claim tasks", e))?;

        let mut outcome: HashMap<uuid::Uuid, ClaimOutcome> = HashMap::with_capacity(granted.len());
        let (mut g_ids, mut g_epochs, mut g_attempts, mut g_workers) =
            (vec![], vec![], vec![], vec![]);
        for row in granted {
            let id: uuid::Uuid = row.get(0);
            let epoch: i64 = row.get(1);
            let attempt: i32 = row.get(2);
            let last_attempt: bool = row.get(3);
            let queued_secs: Option<f64> = row.get(5);
            g_ids.push(id);
            g_epochs.push(epoch);
            g_attempts.push(attempt);
            g_workers.push(row.get::<String, _>(4));
            outcome.insert(
                id,
                ClaimOutcome::Granted {
                    epoch: ClaimEpoch(u64::try_from(epoch).unwrap_or_default()),
                    attempt: u32::try_from(attempt).unwrap_or_default(),
                    last_attempt,
                    queued_for: queued_secs.map(|s| std::time::Duration::from_secs_f64(s.max(0.0))),
                },
            );
        }
        // Only a task claimed before (epoch above 1) can have an attempt to supersede.
        let (again_ids, again_epochs): (Vec<uuid::Uuid>, Vec<i64>) = g_ids
            .iter()
            .zip(&g_epochs)
            .filter(|(_, epoch)| **epoch > 1)
            .map(|(id, epoch)| (*id, *epoch))
            .unzip();
        if !again_ids.is_empty() {
            sqlx::query(
                "UPDATE attempts a SET status = 'abandoned', finished_at = now(), retryable = true, \
                        error = 'redelivered: the worker stopped responding' \
                 FROM UNNEST($1::uuid[], $2::bigint[]) AS g(task_id, epoch) \
                 WHERE a.task_id = ANY($1) AND a.task_id = g.task_id AND a.status = 'running' \
                   AND a.claim_epoch < g.epoch",
            )
            .bind(&again_ids)
            .bind(&again_epochs)
            .execute(&mut *tx)
            .await
            .map_err(|e| StoreError::from_sqlx("close superseded attempts", e))?;
        }
        if !g_ids.is_empty() {
            sqlx::query(
                "INSERT INTO attempts (task_id, attempt, claim_epoch, worker_id, status) \
                 SELECT g.task_id, g.attempt, g.epoch, g.worker_id, 'running' \
                 FROM UNNEST($1::uuid[], $2::int[], $3::bigint[], $4::text[]) AS g(task_id, attempt, epoch, worker_id)",
            )
            .bind(&g_ids)
            .bind(&g_attempts)
            .bind(&g_epochs)
            .bind(&g_workers)
            .execute(&mut *tx)
            .await
            .map_err(|e| StoreError::from_sqlx("record attempts", e))?;
        }
        let rest: Vec<uuid::Uuid> = ids
            .iter()
            .filter(|id| !outcome.contains_key(id))
            .copied()
            .collect();
        if !rest.is_empty() {
            let rows = sqlx::query("SELECT task_id, status FROM tasks WHERE task_id = ANY($1)")
                .bind(&rest)
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| StoreError::from_sqlx("read unclaimable tasks", e))?;
            for row in rows {
                let id: uuid::Uuid = row.get(0);
                let status: String = row.get(1);
                let status = status
                    .parse::<TaskStatus>()
                    .map_err(|e| StoreError::Corrupt {
                        task_id: id.to_string(),
                        column: "status",
                        reason: e.to_string(),
                    })?;
                // Still queued after the claim: its tenant is at its running limit.
                let verdict = if status == TaskStatus::Queued {
                    ClaimOutcome::Busy
                } else {
                    ClaimOutcome::Finished(status)
                };
                outcome.insert(id, verdict);
            }
        }
        tx.commit()
            .await
            .map_err(|e| StoreError::from_sqlx("commit a claim", e))?;
        Ok(ids
            .iter()
            .map(|id| outcome.get(id).copied().unwrap_or(ClaimOutcome::Unknown))
            .collect())
    }
}
