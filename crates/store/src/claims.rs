//! Claims: each delivery of a task to a worker gets a new fencing epoch.

use std::collections::HashMap;

use sqlx::Row;
use taskwire_protocol::{ClaimEpoch, TaskId, TaskStatus, WorkerId};

use crate::lifecycle::claim_statement;
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
        let statement = claim_statement(limit.is_some());
        let query = sqlx::query(statement).bind(&ids).bind(&workers).bind(limit);
        let rows = self
            .on_connection("claim tasks", async |conn| {
                match limit {
                    // One statement is one transaction: no BEGIN and COMMIT round trips.
                    None => query.fetch_all(conn).await,
                    Some(_) => {
                        // Serialise claims per tenant, so concurrent batches cannot both
                        // take the last slot. Locks are taken in tenant order (no deadlock
                        // between batches), in a statement before the claim's: a statement
                        // sees what was committed when it began, so the count must start
                        // after the locks.
                        let mut tx = sqlx::Connection::begin(conn)
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
                .map_err(|e| StoreError::from_sqlx("claim tasks", e))
            })
            .await?;

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
                    if row.get::<bool, _>("ended") {
                        ClaimOutcome::Ended(status)
                    } else if status == TaskStatus::Queued {
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
