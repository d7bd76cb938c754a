//! Status writes: every statement that changes a task's status is here, fenced by the
//! from-states of `taskwire_protocol::lifecycle` ([`sources`]) and writing the states
//! it names. Each returns the tasks it changed as [`Transitioned`], with the effects the
//! lifecycle says must follow; the store performs `Dispatch` and `RecordAttempt` in the
//! same statement or transaction, the caller the rest.
//!
//! The statements, by event: claim (with the claims' admission rules, [`claim_statement`]),
//! finish ([`finish_statement`]), ask approval and approval closed, and one template for
//! the events that end live tasks (cancel, cancel by an ancestor, expire, dead-letter).

use sqlx::PgConnection;
use taskwire_protocol::lifecycle::{
    self, CancelCause, Effect, EventKind, InvalidTransition, Report, TaskEvent, sources,
};
use taskwire_protocol::{ClaimEpoch, TaskId, TaskStatus};

use crate::tasks::sql;
use crate::{Store, StoreError};

/// A task a transition changed, and what must follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transitioned {
    pub task_id: TaskId,
    /// Its new status.
    pub status: TaskStatus,
    /// What the lifecycle says must follow (see [`lifecycle::effects`]).
    pub effects: &'static [Effect],
    /// Why, where the event names a reason (a cancel, a dead letter): the task's
    /// `last_error`, or `None`.
    pub reason: Option<String>,
    /// Whether the task had children when the transition was written, where the
    /// statement looked (a recorded result); `None`: not known. A task known to have
    /// none has no descendants to cancel, and its end costs no walk (nor the probe
    /// before it).
    pub children: Option<bool>,
}

impl Transitioned {
    pub(crate) fn new(
        task_id: uuid::Uuid,
        kind: EventKind,
        status: &str,
        reason: Option<String>,
    ) -> Result<Self, StoreError> {
        let status = parse_status(task_id, status)?;
        Ok(Self {
            task_id: TaskId::from_uuid(task_id),
            status,
            effects: lifecycle::effects(kind, status),
            reason,
            children: None,
        })
    }

    /// Whether the lifecycle says `effect` follows.
    pub fn has(&self, effect: Effect) -> bool {
        self.effects.contains(&effect)
    }
}

pub(crate) fn parse_status(task_id: uuid::Uuid, status: &str) -> Result<TaskStatus, StoreError> {
    status
        .parse()
        .map_err(|e: taskwire_protocol::ProtocolError| StoreError::Corrupt {
            task_id: task_id.to_string(),
            column: "status",
            reason: e.to_string(),
        })
}

/// `'name'`: a status as an SQL literal (a constant, never caller input).
pub(crate) fn lit(status: TaskStatus) -> String {
    format!("'{}'", status.as_str())
}

/// `('a', 'b')`: the statuses an event of `kind` may change, as an SQL list.
pub(crate) fn from(kind: EventKind) -> String {
    list(sources(kind))
}

/// `('queued', 'running', 'awaiting_approval')`: the live statuses. A task is in one of
/// them, or `scheduled`, exactly while its `finished_at` is null (a check of the table,
/// migrations 0010 and 0015); scans for unfinished tasks test `finished_at IS NULL`,
/// which the partial indexes cover.
pub(crate) fn live() -> String {
    list(&lifecycle::LIVE)
}

fn list(statuses: &[TaskStatus]) -> String {
    let names: Vec<String> = statuses.iter().copied().map(lit).collect();
    format!("({})", names.join(", "))
}

/// What each result's report becomes: `(with attempts left, with the budget spent)`,
/// by [`lifecycle::after_attempt`]. The statement picks one by the task's row.
pub(crate) fn outcomes(report: Report) -> Result<(TaskStatus, TaskStatus), InvalidTransition> {
    Ok((
        lifecycle::after_attempt(report, true)?,
        lifecycle::after_attempt(report, false)?,
    ))
}

/// The finish of a batch of attempts, in one statement: `$1` the ids, `$2` the epochs,
/// `$3` the status with attempts left and `$5` with the budget spent (chosen by the
/// row's `attempt - attempt_base < max_attempts`, [`lifecycle::TaskState::attempts_left`]),
/// `$4` the stored result, `$6` the error, `$7` the title, `$8`..`$11`, `$17`, `$18`
/// the attempt's own usage, `$12` retryable; `saved` writes the transcripts.
///
/// The attempt's row gets its outcome (`RecordAttempt`: the status the task moves to,
/// `queued` for a retry) in a CTE, so the statement sees every table as it was before
/// it. It returns each changed task with its new
/// status, agent, the seconds since its submit and its claim, and whether it has
/// children (`tasks_parent`: an ended task's descendants are cancelled next, and most
/// tasks have none, so then no statement follows).
pub(crate) fn finish_statement(saved: &str) -> sqlx::AssertSqlSafe<String> {
    let claimed = from(EventKind::Finish);
    sql(format!(
        "WITH decided AS ( \
             SELECT r.*, CASE WHEN t.attempt - t.attempt_base < t.max_attempts THEN r.if_left ELSE r.if_spent END AS next \
             FROM UNNEST($1::uuid[], $2::bigint[], $3::text[], $5::text[], $4::bytea[], $6::text[], $7::text[], \
                         $8::int8[], $9::int8[], $10::int8[], $11::int8[], $17::int8[], $18::int8[], $12::bool[]) \
                  AS r(task_id, epoch, if_left, if_spent, result, error, title, own_input, own_output, own_cost, \
                       own_unpriced, own_cached, own_cache_write, retryable) \
             JOIN tasks t ON t.task_id = r.task_id), \
         attempt AS ( \
             UPDATE attempts a SET status = r.next, error = r.error, retryable = r.retryable, finished_at = now() \
             FROM decided r \
             WHERE a.task_id = r.task_id AND a.claim_epoch = r.epoch AND a.status = 'running' AND r.next IS NOT NULL), \
         saved AS ({saved}) \
         UPDATE tasks t SET status = r.next, \
                result = CASE WHEN r.next NOT IN {live} THEN r.result ELSE t.result END, \
                last_error = COALESCE(r.error, t.last_error), updated_at = now(), \
                finished_at = CASE WHEN r.next NOT IN {live} THEN now() ELSE NULL END, \
                title = COALESCE(r.title, t.title), \
                own_input_tokens = t.own_input_tokens + r.own_input, \
                own_output_tokens = t.own_output_tokens + r.own_output, \
                own_cost_picousd = t.own_cost_picousd + r.own_cost, \
                own_unpriced_tokens = t.own_unpriced_tokens + r.own_unpriced, \
                own_cached_input_tokens = t.own_cached_input_tokens + r.own_cached, \
                own_cache_write_input_tokens = t.own_cache_write_input_tokens + r.own_cache_write \
         FROM decided r \
         WHERE t.task_id = r.task_id AND t.claim_epoch = r.epoch AND t.status IN {claimed} AND r.next IS NOT NULL \
         RETURNING t.task_id, t.claim_epoch, t.status, t.agent, \
                   EXTRACT(EPOCH FROM now() - t.created_at)::float8, \
                   (SELECT EXTRACT(EPOCH FROM now() - a.started_at)::float8 FROM attempts a \
                    WHERE a.task_id = t.task_id AND a.claim_epoch = t.claim_epoch), \
                   EXISTS (SELECT 1 FROM tasks c WHERE c.parent_task_id = t.task_id)",
        live = live(),
    ))
}

/// The claim of a batch, in one statement (so one round trip and, without a tenant
/// limit, its own transaction): `$1` the task ids, `$2` the workers, `$3` the limit.
///
/// In order, as CTEs:
/// - `locked`: the tasks' rows, locked in id order and read as the last committed
///   write left them (not as they were when the statement began): two claims of one
///   task at once run one after the other, so the second sees the first's attempt
///   (without it, two claims of a task on its last attempt both started one);
/// - `due`/`ended`: a task past its deadline becomes `deadline_exceeded`, one whose
///   attempt budget is spent `dead_lettered` (the lifecycle's claim with
///   `deadline_passed`, or without [`lifecycle::TaskState::attempts_left`]; found by
///   primary key alone: a materialized CTE, so no other index is intersected with it;
///   usually none);
/// - `queued`/`fresh`/`allowed`: the admission rules, not the lifecycle's: the others
///   that may start are queued ones whose session runs nothing else (its first only)
///   and, with a limit, within their tenant's free slots; and every redelivery of a
///   task already running (it holds its slot);
/// - `claimed`: each gets a new epoch and attempt. The update changes no indexed
///   column (the unfinished tasks are indexed by `finished_at`, which a claim leaves
///   null), so Postgres writes it in place as a heap-only tuple (migration 0010);
/// - `superseded`/`started`: the attempt rows (`RecordAttempt`): a still-running
///   attempt it supersedes is `abandoned`, and the new attempt gets its row.
///
/// It returns one row per task found: granted ones with their epoch, ended ones with
/// their new status and `ended`, the rest with their status (queued: busy).
pub(crate) fn claim_statement(limited: bool) -> sqlx::AssertSqlSafe<String> {
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
    let claimable = from(EventKind::Claim);
    let expired = lit(TaskStatus::DeadlineExceeded);
    let spent = lit(TaskStatus::DeadLettered);
    let running = lit(TaskStatus::Running);
    sql(format!(
        "WITH c AS (SELECT * FROM UNNEST($1::uuid[], $2::text[]) AS c(task_id, worker_id)), \
         locked AS MATERIALIZED ( \
             SELECT task_id, status, deadline, attempt, attempt_base, max_attempts, tenant, created_at, \
                    updated_at, session_id \
             FROM tasks WHERE task_id = ANY($1) ORDER BY task_id FOR UPDATE), \
         due AS MATERIALIZED ( \
             SELECT task_id, deadline IS NOT NULL AND deadline <= now() AS expired FROM locked \
             WHERE status IN {claimable} \
               AND ((deadline IS NOT NULL AND deadline <= now()) OR attempt - attempt_base >= max_attempts)), \
         ended AS ( \
             UPDATE tasks t SET updated_at = now(), finished_at = now(), \
                    status = CASE WHEN due.expired THEN {expired} ELSE {spent} END, \
                    last_error = CASE WHEN due.expired THEN t.last_error \
                                      ELSE COALESCE(t.last_error, 'attempts exhausted') END \
             FROM due WHERE t.task_id = due.task_id AND t.status IN {claimable} \
             RETURNING t.task_id, t.status), \
         queued AS ( \
             SELECT t.task_id, c.worker_id, t.tenant, t.created_at, t.updated_at AS queued_since, \
                    row_number() OVER (PARTITION BY COALESCE(t.session_id, t.task_id) \
                                       ORDER BY t.created_at, t.task_id) AS in_session \
             FROM locked t JOIN c ON t.task_id = c.task_id \
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
             SELECT c.task_id, c.worker_id, NULL::timestamptz FROM c JOIN locked t ON t.task_id = c.task_id \
             WHERE t.status IN ('running', 'awaiting_approval') AND t.task_id NOT IN (SELECT task_id FROM due)), \
         claimed AS ( \
             UPDATE tasks t SET status = {running}, attempt = t.attempt + 1, claim_epoch = t.claim_epoch + 1, \
                    worker_id = a.worker_id, updated_at = now() \
             FROM allowed a \
             WHERE t.task_id = a.task_id AND t.status IN {claimable} \
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
         SELECT task_id, status, epoch, attempt, last_attempt, queued_secs, false AS ended FROM claimed \
         UNION ALL \
         SELECT task_id, status, NULL::bigint, NULL::int, NULL::bool, NULL::float8, true FROM ended \
         UNION ALL \
         SELECT t.task_id, t.status, NULL::bigint, NULL::int, NULL::bool, NULL::float8, false FROM tasks t \
         WHERE t.task_id = ANY($1) \
           AND t.task_id NOT IN (SELECT task_id FROM claimed) AND t.task_id NOT IN (SELECT task_id FROM ended)"
    ))
}

/// Moves the task to `awaiting_approval` if `(task, epoch)` is its current attempt;
/// returns whether it is.
pub(crate) async fn ask_approval(
    conn: &mut PgConnection,
    task: TaskId,
    epoch: ClaimEpoch,
) -> Result<bool, StoreError> {
    let moved = sqlx::query(sql(format!(
        "UPDATE tasks SET status = {}, updated_at = now() \
         WHERE task_id = $1 AND claim_epoch = $2 AND status IN {}",
        lit(TaskStatus::AwaitingApproval),
        from(EventKind::AskApproval)
    )))
    .bind(task.as_uuid())
    .bind(i64::try_from(epoch.0).unwrap_or(i64::MAX))
    .execute(conn)
    .await
    .map_err(|e| StoreError::from_sqlx("mark a task awaiting approval", e))?;
    Ok(moved.rows_affected() == 1)
}

/// After one of its approvals closed: back to `running` when none is pending.
pub(crate) async fn approval_closed(
    conn: &mut PgConnection,
    task: TaskId,
) -> Result<(), StoreError> {
    sqlx::query(sql(format!(
        "UPDATE tasks SET status = {}, updated_at = now() \
         WHERE task_id = $1 AND status IN {} \
           AND NOT EXISTS (SELECT 1 FROM approvals WHERE task_id = $1 AND status = 'pending')",
        lit(TaskStatus::Running),
        from(EventKind::ApprovalClosed)
    )))
    .bind(task.as_uuid())
    .execute(conn)
    .await
    .map_err(|e| StoreError::from_sqlx("resume a task after approval", e))?;
    Ok(())
}

/// Queues a failed task again with a fresh attempt budget; returns its trace id, its
/// replay count and its stored request (for the outbox row the caller writes in the
/// same transaction), or `None` when the task is not replayable.
pub(crate) async fn replay(
    conn: &mut PgConnection,
    task: TaskId,
) -> Result<Option<(String, i32, Vec<u8>)>, StoreError> {
    sqlx::query_as(sql(format!(
        "UPDATE tasks SET status = {}, attempt_base = attempt, replays = replays + 1, result = NULL, \
                finished_at = NULL, updated_at = now() \
         WHERE task_id = $1 AND status IN {} \
         RETURNING trace_id, replays, request",
        lit(TaskStatus::Queued),
        from(EventKind::Replay)
    )))
    .bind(task.as_uuid())
    .fetch_optional(conn)
    .await
    .map_err(|e| StoreError::from_sqlx("replay a task", e))
}

/// Which live tasks an ending event reaches.
enum Reach<'a> {
    /// The task and its whole subtree.
    Tree(TaskId),
    /// The live descendants of these terminal tasks.
    DescendantsOf(&'a [uuid::Uuid]),
    /// These tasks.
    Ids(&'a [uuid::Uuid]),
    /// Up to this many tasks past their deadline.
    Overdue(i64),
}

impl Store {
    /// Cancels a task and every live descendant (one event, `Cancel(Requested)`);
    /// returns those cancelled (empty when the task was already finished). Cancelling
    /// twice is harmless. An error of an earlier attempt is cleared: the reason is
    /// the cancel.
    pub async fn cancel_tree(&self, task_id: TaskId) -> Result<Vec<Transitioned>, StoreError> {
        self.end(
            Reach::Tree(task_id),
            TaskEvent::Cancel(CancelCause::Requested),
            None,
        )
        .await
    }

    /// Cancels every live descendant of the tasks in `ended` that are terminal (the
    /// others are skipped), each with a reason naming the task that ended and how,
    /// e.g. `parent task … ended (error)`; returns those cancelled. Cancelling twice
    /// is harmless.
    pub async fn cancel_descendants(
        &self,
        ended: &[TaskId],
    ) -> Result<Vec<Transitioned>, StoreError> {
        if ended.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<uuid::Uuid> = ended.iter().map(|t| t.as_uuid()).collect();
        // Most tasks start no children: an index probe (`tasks_parent`) finds the few
        // that did, and the walk, whose planning alone costs more than the probe, runs
        // for those only. A child submitted after the probe, while its parent ended, is
        // the orphan sweep's (`ended_with_live_children`), as one submitted after the
        // walk always was.
        let ids: Vec<uuid::Uuid> = sqlx::query_scalar(
            "SELECT DISTINCT parent_task_id FROM tasks \
             WHERE parent_task_id = ANY($1) AND parent_task_id IS NOT NULL",
        )
        .bind(&ids)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("find ended tasks' children", e))?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.end(
            Reach::DescendantsOf(&ids),
            TaskEvent::Cancel(CancelCause::AncestorEnded),
            None,
        )
        .await
    }

    /// Marks a live task `dead_lettered` with `reason`; returns it if it was live.
    pub async fn dead_letter_task(
        &self,
        task_id: TaskId,
        reason: &str,
    ) -> Result<Option<Transitioned>, StoreError> {
        let ids = [task_id.as_uuid()];
        Ok(self
            .end(Reach::Ids(&ids), TaskEvent::DeadLetter, Some(reason))
            .await?
            .pop())
    }

    /// Dispatches up to `limit` scheduled tasks whose `not_before` came (the lifecycle's
    /// `due`), in one statement: each becomes `queued` and gets its outbox row (to
    /// `subject`, in its tenant's turn at its priority, as a submit's), so the relay
    /// publishes it. Returns how many; skips rows another coordinator holds.
    pub async fn dispatch_due(&self, limit: i64, subject: &str) -> Result<u64, StoreError> {
        let count: i64 = sqlx::query_scalar(sql(format!(
            "WITH due AS ( \
                 SELECT task_id FROM tasks \
                 WHERE finished_at IS NULL AND not_before <= now() AND status IN {from} \
                 ORDER BY not_before LIMIT $1 FOR UPDATE SKIP LOCKED), \
             queued AS ( \
                 UPDATE tasks t SET status = {to}, updated_at = now() \
                 FROM due WHERE t.task_id = due.task_id \
                 RETURNING t.task_id, t.trace_id, t.request, t.priority, t.tenant), \
             dispatched AS ( \
                 INSERT INTO outbox (task_id, trace_id, subject, msg_id, payload, priority, tenant, turn) \
                 SELECT q.task_id, q.trace_id, $2, q.task_id::text, q.request, q.priority, q.tenant, \
                        {turn} \
                 FROM queued q) \
             SELECT count(*) FROM queued",
            from = from(EventKind::Due),
            to = lit(TaskStatus::Queued),
            turn = crate::outbox::turn_sql(
                "q",
                "row_number() OVER (PARTITION BY q.priority, q.tenant ORDER BY q.task_id)"
            ),
        )))
        .bind(limit)
        .bind(subject)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("dispatch due tasks", e))?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// Marks live tasks past their deadline `deadline_exceeded`; returns them.
    pub async fn expire_overdue(&self, limit: i64) -> Result<Vec<Transitioned>, StoreError> {
        self.end(Reach::Overdue(limit), TaskEvent::Expire, None)
            .await
    }

    /// The one statement for events that end live tasks: the targets selected by
    /// `reach`, fenced by the event's sources, moved to the status the lifecycle names.
    async fn end(
        &self,
        reach: Reach<'_>,
        event: TaskEvent,
        reason: Option<&str>,
    ) -> Result<Vec<Transitioned>, StoreError> {
        use taskwire_protocol::lifecycle::TaskState;
        let kind = event.kind();
        // Any live state ends the same way: the target of the event from `queued`.
        let to = lifecycle::apply(TaskState::submitted(1), event)?
            .state
            .status;
        // `reason` the target's own error, `$2`; a cancel by request clears it.
        let (targets, error) = match reach {
            Reach::Tree(_) => (
                "WITH RECURSIVE tree AS ( \
                     SELECT task_id FROM tasks WHERE task_id = $1 \
                     UNION ALL SELECT t.task_id FROM tree CROSS JOIN LATERAL ( \
                         SELECT task_id FROM tasks WHERE parent_task_id = tree.task_id OFFSET 0) t), \
                 target AS (SELECT task_id, NULL::text AS reason FROM tree)"
                    .to_owned(),
                "NULL",
            ),
            // The walk goes through finished descendants too: a live grandchild under a
            // finished child is as orphaned as a live child. It starts from the
            // children (`tasks_parent`, which holds child tasks only), so tasks without
            // children, most of them, cost one index probe each, never a scan. Each step
            // below (and in `Tree`) is a `LATERAL` subquery behind `OFFSET 0`, which the
            // planner cannot flatten into a join: a probe of `tasks_parent` per task
            // whatever the statistics say (see `usage::subtree_usage`).
            Reach::DescendantsOf(_) => (
                format!(
                    "WITH RECURSIVE tree AS ( \
                         SELECT c.task_id, p.task_id AS ended, p.status AS ended_status, 1 AS depth \
                         FROM tasks c JOIN tasks p ON p.task_id = c.parent_task_id \
                         WHERE c.parent_task_id = ANY($1) AND c.parent_task_id IS NOT NULL \
                           AND p.status NOT IN {live} \
                         UNION ALL \
                         SELECT c.task_id, tree.ended, tree.ended_status, tree.depth + 1 \
                         FROM tree CROSS JOIN LATERAL ( \
                             SELECT task_id FROM tasks WHERE parent_task_id = tree.task_id OFFSET 0) c), \
                     target AS ( \
                         SELECT task_id, CASE WHEN depth = 1 THEN 'parent' ELSE 'ancestor' END \
                                         || ' task ' || ended || ' ended (' || ended_status || ')' AS reason \
                         FROM tree)",
                    live = live()
                ),
                "target.reason",
            ),
            Reach::Ids(_) => (
                "WITH target AS (SELECT task_id, $2::text AS reason FROM UNNEST($1::uuid[]) AS i(task_id))"
                    .to_owned(),
                "target.reason",
            ),
            Reach::Overdue(_) => (
                "WITH target AS (SELECT task_id, NULL::text AS reason FROM tasks WHERE finished_at IS NULL \
                                 AND deadline IS NOT NULL AND deadline <= now() LIMIT $1)"
                    .to_owned(),
                "t.last_error",
            ),
        };
        // The targets are also named as an array (`= ANY`), which the planner, not
        // knowing its length, takes for a few keys to look up in `tasks_pkey`: joined
        // on `target` alone, a walk's guessed size (thousands of rows on a table without
        // statistics) made it hash the whole table.
        let statement = sql(format!(
            "{targets} \
             UPDATE tasks t SET status = {to}, last_error = {error}, updated_at = now(), finished_at = now() \
             FROM target WHERE t.task_id = ANY(ARRAY(SELECT task_id FROM target)) \
               AND t.task_id = target.task_id AND t.status IN {from} \
             RETURNING t.task_id, t.status, t.last_error",
            to = lit(to),
            from = from(kind),
        ));
        let query = sqlx::query_as::<_, (uuid::Uuid, String, Option<String>)>(statement);
        let query = match reach {
            Reach::Tree(id) => query.bind(id.as_uuid()),
            Reach::DescendantsOf(ids) => query.bind(ids),
            Reach::Ids(ids) => query.bind(ids).bind(reason),
            Reach::Overdue(limit) => query.bind(limit),
        };
        let rows = query
            .fetch_all(&self.pool)
            .await
            .map_err(|e| StoreError::from_sqlx("end tasks", e))?;
        rows.into_iter()
            .map(|(id, status, reason)| Transitioned::new(id, kind, &status, reason))
            .collect()
    }
}
