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
        let limit = max_running_per_tenant.map(|l| i64::from(l.max(1)));
        let statement = sql(claim_statement(limit.is_some()));
        let query = sqlx::query(statement).bind(&ids).bind(&workers).bind(limit);
        let rows = match limit {
            // One statement is one transaction: no BEGIN and COMMIT round trips.
            None => query.fetch_all(&self.pool).await,
            Some(_) => {
                // Serialise claims per tenant, so concurrent batches cannot both take
                // the last slot. Locks are taken in tenant order (no deadlock between
                // batches), in a statement before the claim's: a statement sees what
                // was committed when it began, so the count must start after the locks.
                let mut tx = self
                    .pool
                    .begin()
                    .await
                    .map_err(|e| StoreError::from_sqlx("begin a claim", e))?;
                sqlx::query(
                    "SELECT pg_advisory_xact_lock(hashtext('taskwire-tenant:' || tenant)) \
                     FROM (SELECT DISTINCT tenant FROM tasks WHERE task_id = ANY($1) ORDER BY tenant) AS t",
                )
                .bind(&ids)
                .execute(&mut *tx)
                .await
                .map_err(|e| StoreError::from_sqlx("lock tenants for a claim", e))?;
                let rows = query.fetch_all(&mut *tx).await;
                if rows.is_ok() {
                    tx.commit()
                        .await
                        .map_err(|e| StoreError::from_sqlx("commit a claim", e))?;
                }
                rows
            }
        }
        .map_err(|e| StoreError::from_sqlx("claim tasks", e))?;

        let mut outcome: HashMap<uuid::Uuid, ClaimOutcome> = HashMap::with_capacity(rows.len());
        for row in rows {
            let id: uuid::Uuid = row.get("task_id");
            let status: String = row.get("status");
            let verdict = match row.get::<Option<i64>, _>("epoch") {
                Some(epoch) => ClaimOutcome::Granted {
                    epoch: ClaimEpoch(u64::try_from(epoch).unwrap_or_default()),
                    attempt: u32::try_from(row.get::<i32, _>("attempt")).unwrap_or_default(),
                    last_attempt: row.get("last_attempt"),
                    queued_for: row
                        .get::<Option<f64>, _>("queued_secs")
                        .map(|s| std::time::Duration::from_secs_f64(s.max(0.0))),
                },
                None => {
                    let status = status
                        .parse::<TaskStatus>()
                        .map_err(|e| StoreError::Corrupt {
                            task_id: id.to_string(),
                            column: "status",
                            reason: e.to_string(),
                        })?;
                    // Neither granted nor ended, and still queued: its tenant is at
                    // its running limit, or its session is in use.
                    if status == TaskStatus::Queued {
                        ClaimOutcome::Busy
                    } else {
                        ClaimOutcome::Finished(status)
                    }
                }
            };
            outcome.insert(id, verdict);
        }
        Ok(ids
            .iter()
            .map(|id| outcome.get(id).copied().unwrap_or(ClaimOutcome::Unknown))
            .collect())
    }
}

/// The claim of a batch, in one statement (so one round trip and, without a tenant
/// limit, its own transaction): `$1` the task ids, `$2` the workers, `$3` the limit.
///
/// In order, as CTEs over the rows as they were when it began:
/// - `due`/`ended`: a task past its deadline becomes `deadline_exceeded`, one whose
///   attempt budget is spent `dead_lettered` (found by primary key alone: a
///   materialized CTE, so no other index is intersected with it; usually none);
/// - `queued`/`fresh`/`allowed`: the others that may start: queued ones whose session
///   runs nothing else (its first only) and, with a limit, within their tenant's free
///   slots; and every redelivery of a task already running (it holds its slot);
/// - `claimed`: each gets a new epoch and attempt. The update changes no indexed
///   column (the unfinished tasks are indexed by `finished_at`, which a claim leaves
///   null), so Postgres writes it in place as a heap-only tuple (migration 0010);
/// - `superseded`/`started`: a still-running attempt it supersedes is `abandoned`, and
///   the new attempt gets its row.
///
/// It returns one row per task found: granted ones with their epoch, ended ones with
/// their new status, the rest with their status (queued: busy).
fn claim_statement(limited: bool) -> String {
    // The session check looks a task's session up by `tasks_session` alone (`OFFSET 0`
    // keeps its status test out of the index scan): otherwise the planner may
    // intersect it with an index of unfinished tasks, reading every one's entry for
    // each task claimed. Without a limit the running tasks are not counted at all.
    let (busy, admitted) = if limited {
        (
            "busy AS ( \
                 SELECT tenant, count(*) AS n FROM tasks \
                 WHERE finished_at IS NULL AND status = 'running' AND tenant IN (SELECT tenant FROM fresh) \
                 GROUP BY tenant),",
            "SELECT fresh.task_id, fresh.worker_id, fresh.queued_since FROM fresh LEFT JOIN busy USING (tenant) \
             WHERE COALESCE(busy.n, 0) + fresh.rn <= $3",
        )
    } else {
        (
            "",
            "SELECT fresh.task_id, fresh.worker_id, fresh.queued_since FROM fresh WHERE $3::bigint IS NULL",
        )
    };
    format!(
        "WITH c AS (SELECT * FROM UNNEST($1::uuid[], $2::text[]) AS c(task_id, worker_id)), \
         due AS MATERIALIZED ( \
             SELECT task_id, deadline IS NOT NULL AND deadline <= now() AS expired FROM tasks \
             WHERE task_id = ANY($1) \
               AND ((deadline IS NOT NULL AND deadline <= now()) OR attempt - attempt_base >= max_attempts)), \
         ended AS ( \
             UPDATE tasks t SET updated_at = now(), finished_at = now(), \
                    status = CASE WHEN due.expired THEN 'deadline_exceeded' ELSE 'dead_lettered' END, \
                    last_error = CASE WHEN due.expired THEN t.last_error \
                                      ELSE COALESCE(t.last_error, 'attempts exhausted') END \
             FROM due WHERE t.task_id = due.task_id AND t.status IN {LIVE} \
             RETURNING t.task_id, t.status), \
         queued AS ( \
             SELECT t.task_id, c.worker_id, t.tenant, t.created_at, t.updated_at AS queued_since, \
                    row_number() OVER (PARTITION BY COALESCE(t.session_id, t.task_id) \
                                       ORDER BY t.created_at, t.task_id) AS in_session \
             FROM tasks t JOIN c ON t.task_id = c.task_id \
             WHERE t.status = 'queued' AND t.task_id NOT IN (SELECT task_id FROM due) \
               AND NOT EXISTS (SELECT 1 FROM (SELECT o.task_id, o.status FROM tasks o \
                                              WHERE o.session_id = t.session_id OFFSET 0) o \
                               WHERE o.task_id <> t.task_id AND o.status IN ('running', 'awaiting_approval'))), \
         fresh AS ( \
             SELECT task_id, worker_id, tenant, queued_since, \
                    row_number() OVER (PARTITION BY tenant ORDER BY created_at, task_id) AS rn \
             FROM queued WHERE in_session = 1), \
         {busy} \
         allowed AS ( \
             {admitted} \
             UNION ALL \
             SELECT c.task_id, c.worker_id, NULL::timestamptz FROM c JOIN tasks t ON t.task_id = c.task_id \
             WHERE t.status IN ('running', 'awaiting_approval') AND t.task_id NOT IN (SELECT task_id FROM due)), \
         claimed AS ( \
             UPDATE tasks t SET status = 'running', attempt = t.attempt + 1, claim_epoch = t.claim_epoch + 1, \
                    worker_id = a.worker_id, updated_at = now() \
             FROM allowed a \
             WHERE t.task_id = a.task_id AND t.status IN {LIVE} \
             RETURNING t.task_id, t.status, t.claim_epoch AS epoch, t.attempt, \
                       t.attempt - t.attempt_base >= t.max_attempts AS last_attempt, a.worker_id, \
                       EXTRACT(EPOCH FROM now() - a.queued_since)::float8 AS queued_secs), \
         superseded AS ( \
             UPDATE attempts a SET status = 'abandoned', finished_at = now(), retryable = true, \
                    error = 'redelivered: the worker stopped responding' \
             FROM claimed g \
             WHERE a.task_id = ANY($1) AND a.task_id = g.task_id AND g.epoch > 1 \
               AND a.status = 'running' AND a.claim_epoch < g.epoch), \
         started AS ( \
             INSERT INTO attempts (task_id, attempt, claim_epoch, worker_id, status) \
             SELECT task_id, attempt, epoch, worker_id, 'running' FROM claimed) \
         SELECT task_id, status, epoch, attempt, last_attempt, queued_secs FROM claimed \
         UNION ALL \
         SELECT task_id, status, NULL::bigint, NULL::int, NULL::bool, NULL::float8 FROM ended \
         UNION ALL \
         SELECT t.task_id, t.status, NULL::bigint, NULL::int, NULL::bool, NULL::float8 FROM tasks t \
         WHERE t.task_id = ANY($1) \
           AND t.task_id NOT IN (SELECT task_id FROM claimed) AND t.task_id NOT IN (SELECT task_id FROM ended)"
    )
}
