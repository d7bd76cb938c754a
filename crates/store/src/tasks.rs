//! The `tasks` table: submit, claim, fenced results, cancel, expire, read.

use std::collections::HashMap;

use sqlx::{Postgres, QueryBuilder, Row};
use taskwire_protocol::{AgentSpecDigest, TaskId};

use crate::outbox::OutboxMessage;
use crate::record::{TASK_COLUMNS, TaskRow};
use crate::{InsertOutcome, ListFilter, NewTask, ReplayOutcome, Store, StoreError, TaskRecord};

/// Only constants are formatted into these statements; values are always bound.
pub(crate) fn sql(s: String) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(s)
}

impl Store {
    /// Inserts tasks and their outbox messages in one statement (one transaction).
    ///
    /// A task whose `(tenant, idempotency_key)` already exists is not inserted: the
    /// outcome says whether the stored request is the same one (same digest) or not.
    /// The outcomes are in the order of `tasks`.
    pub async fn insert_tasks(&self, tasks: &[NewTask]) -> Result<Vec<InsertOutcome>, StoreError> {
        if tasks.is_empty() {
            return Ok(Vec::new());
        }
        self.on_connection("insert tasks", async |conn| {
            Ok(insert_tasks_on(conn, tasks, None).await?.0)
        })
        .await
    }

    /// [`Store::insert_tasks`] for a caller that publishes the dispatches itself once
    /// they are committed: it gets their outbox rows back (built from `tasks`, not read
    /// again), and no relay's scan takes them until `grace` has passed (see
    /// `migrations/0017_outbox_own_relay.sql`). The caller deletes the rows it published
    /// ([`Store::outbox_delete`]); what it could not publish, a scan takes after `grace`.
    pub async fn insert_tasks_relaying(
        &self,
        tasks: &[NewTask],
        grace: std::time::Duration,
    ) -> Result<(Vec<InsertOutcome>, Vec<OutboxMessage>), StoreError> {
        if tasks.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        self.on_connection("insert tasks", async |conn| {
            insert_tasks_on(conn, tasks, Some(grace)).await
        })
        .await
    }
}

/// [`Store::insert_tasks`] on `conn`: in its own statement's transaction, or as part of
/// the caller's (a schedule's fire). With `relay_after`, the outbox rows are returned
/// and kept from other relays' scans for that long.
pub(crate) async fn insert_tasks_on(
    conn: &mut sqlx::PgConnection,
    tasks: &[NewTask],
    relay_after: Option<std::time::Duration>,
) -> Result<(Vec<InsertOutcome>, Vec<OutboxMessage>), StoreError> {
    let n = tasks.len();
    let mut ids = Vec::with_capacity(n);
    let mut parents = Vec::with_capacity(n);
    let mut traces = Vec::with_capacity(n);
    let mut tenants = Vec::with_capacity(n);
    let mut agents = Vec::with_capacity(n);
    let mut prompts = Vec::with_capacity(n);
    let mut depths = Vec::with_capacity(n);
    let mut keys = Vec::with_capacity(n);
    let mut digests = Vec::with_capacity(n);
    let mut deadlines = Vec::with_capacity(n);
    let mut requests = Vec::with_capacity(n);
    let mut created = Vec::with_capacity(n);
    let mut max_attempts = Vec::with_capacity(n);
    let mut sessions = Vec::with_capacity(n);
    let mut max_tokens: Vec<Option<i64>> = Vec::with_capacity(n);
    let mut max_costs: Vec<Option<i64>> = Vec::with_capacity(n);
    let mut spec_digests: Vec<Option<Vec<u8>>> = Vec::with_capacity(n);
    let mut priorities: Vec<i16> = Vec::with_capacity(n);
    // The batch's distinct spec bundles (usually one), stored once each.
    let mut specs: HashMap<AgentSpecDigest, std::sync::Arc<[u8]>> = HashMap::new();
    for t in tasks {
        let r = &t.request;
        ids.push(r.task_id.as_uuid());
        parents.push(r.parent_task_id.map(|p| p.as_uuid()));
        traces.push(r.trace_id.to_string());
        tenants.push(r.tenant.clone());
        agents.push(r.agent.clone());
        prompts.push(r.prompt.clone());
        depths.push(i32::try_from(r.depth).unwrap_or(i32::MAX));
        keys.push(r.idempotency_key.clone());
        digests.push(t.digest.clone());
        deadlines.push(r.deadline);
        let (request, spec) = t.encoded();
        requests.push(request);
        spec_digests.push(spec.as_ref().map(|(d, _)| d.as_bytes().to_vec()));
        if let Some((digest, spec)) = spec {
            specs.entry(digest).or_insert(spec);
        }
        created.push(r.created_at);
        max_attempts.push(i32::try_from(r.max_attempts.max(1)).unwrap_or(i32::MAX));
        sessions.push(r.resume_token.map(|s| s.as_uuid()));
        let limit = |v: Option<u64>| v.map(|v| i64::try_from(v).unwrap_or(i64::MAX));
        max_tokens.push(limit(r.budget.max_tokens));
        max_costs.push(limit(r.budget.max_cost_picousd));
        priorities.push(i16::from(r.priority.get()));
    }

    let (spec_keys, spec_values): (Vec<Vec<u8>>, Vec<Vec<u8>>) = specs
        .into_iter()
        .map(|(d, spec)| (d.as_bytes().to_vec(), spec.to_vec()))
        .unzip();
    let subjects: Vec<&str> = tasks.iter().map(|t| t.subject.as_str()).collect();
    let not_before: Vec<Option<chrono::DateTime<chrono::Utc>>> =
        tasks.iter().map(|t| t.not_before).collect();
    let callbacks: Vec<Option<&str>> = tasks.iter().map(|t| t.callback_url.as_deref()).collect();
    let titles: Vec<Option<&str>> = tasks.iter().map(|t| t.title.as_deref()).collect();
    // One statement, so one round trip and its own transaction: the bundles (an
    // existing one is left as it is: a digest names one bundle), the tasks, and the
    // outbox rows of the tasks actually inserted, in the batch's order.
    let inserted: Vec<(uuid::Uuid, Option<i64>)> = sqlx::query_as(sql(format!(
            "WITH t AS ( \
                 SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], \
                                      $7::int[], $8::text[], $9::text[], $10::timestamptz[], $11::bytea[], \
                                      $12::timestamptz[], $13::int[], $14::uuid[], $15::int8[], $16::int8[], \
                                      $19::bytea[], $20::text[], $21::int2[], $22::text[], $23::timestamptz[], \
                                      $25::text[]) WITH ORDINALITY \
                      AS t(task_id, parent_task_id, trace_id, tenant, agent, prompt, depth, idempotency_key, \
                           request_digest, deadline, request, created_at, max_attempts, session_id, max_tokens, \
                           max_cost_picousd, agent_spec_digest, subject, priority, callback_url, not_before, \
                           title, ord)), \
             specs AS ( \
                 INSERT INTO agent_specs (digest, bundle) \
                 SELECT * FROM UNNEST($17::bytea[], $18::bytea[]) \
                 ON CONFLICT (digest) DO NOTHING), \
             inserted AS ( \
                 INSERT INTO tasks (task_id, parent_task_id, trace_id, tenant, agent, prompt, status, depth, \
                                    idempotency_key, request_digest, deadline, request, created_at, updated_at, \
                                    max_attempts, session_id, max_tokens, max_cost_picousd, agent_spec_digest, \
                                    priority, not_before, title) \
                 SELECT t.task_id, t.parent_task_id, t.trace_id, t.tenant, t.agent, t.prompt, \
                        CASE WHEN t.not_before > now() THEN 'scheduled' ELSE 'queued' END, t.depth, \
                        t.idempotency_key, t.request_digest, t.deadline, t.request, t.created_at, t.created_at, \
                        t.max_attempts, t.session_id, t.max_tokens, t.max_cost_picousd, t.agent_spec_digest, \
                        t.priority, t.not_before, t.title \
                 FROM t ORDER BY t.ord \
                 ON CONFLICT (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING \
                 RETURNING task_id), \
             dispatched AS ( \
                 INSERT INTO outbox (task_id, trace_id, subject, msg_id, payload, priority, tenant, turn, \
                                     relay_after) \
                 SELECT t.task_id, t.trace_id, t.subject, t.task_id::text, t.request, t.priority, t.tenant, \
                        {turn}, now() + make_interval(secs => $24::float8) \
                 FROM t JOIN inserted USING (task_id) \
                 WHERE t.not_before IS NULL OR t.not_before <= now() ORDER BY t.ord \
                 RETURNING id, task_id), \
             hooks AS ( \
                 INSERT INTO webhooks (task_id, tenant, url) \
                 SELECT t.task_id, t.tenant, t.callback_url \
                 FROM t JOIN inserted USING (task_id) WHERE t.callback_url IS NOT NULL) \
             SELECT i.task_id, d.id FROM inserted i LEFT JOIN dispatched d USING (task_id)",
            turn = crate::outbox::turn_sql(
                "t",
                "row_number() OVER (PARTITION BY t.priority, t.tenant ORDER BY t.ord)"
            ),
        )))
        .bind(&ids)
        .bind(&parents)
        .bind(&traces)
        .bind(&tenants)
        .bind(&agents)
        .bind(&prompts)
        .bind(&depths)
        .bind(&keys)
        .bind(&digests)
        .bind(&deadlines)
        .bind(&requests)
        .bind(&created)
        .bind(&max_attempts)
        .bind(&sessions)
        .bind(&max_tokens)
        .bind(&max_costs)
        .bind(&spec_keys)
        .bind(&spec_values)
        .bind(&spec_digests)
        .bind(&subjects)
        .bind(&priorities)
        .bind(&callbacks)
        .bind(&not_before)
        .bind(relay_after.map(|d| d.as_secs_f64()))
        .bind(&titles)
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| StoreError::from_sqlx("insert tasks", e))?;
    // The dispatches to publish, in the batch's order, from what was just written.
    let mut outbox: HashMap<uuid::Uuid, i64> = HashMap::new();
    if relay_after.is_some() {
        outbox.extend(inserted.iter().filter_map(|(t, o)| Some((*t, (*o)?))));
    }
    let inserted: std::collections::HashSet<uuid::Uuid> =
        inserted.into_iter().map(|(t, _)| t).collect();
    let messages: Vec<OutboxMessage> = (0..n)
        .filter_map(|i| {
            Some(OutboxMessage {
                id: *outbox.get(&ids[i])?,
                trace_id: traces[i].clone(),
                subject: tasks[i].subject.clone(),
                msg_id: ids[i].to_string(),
                // Bound to the statement, and not needed after it.
                payload: std::mem::take(&mut requests[i]),
            })
        })
        .collect();

    // Tasks not inserted lost an idempotency-key race: look up the winners.
    let mut existing: HashMap<(String, String), (uuid::Uuid, String)> = HashMap::new();
    let losers: Vec<usize> = (0..n).filter(|i| !inserted.contains(&ids[*i])).collect();
    if !losers.is_empty() {
        let l_tenants: Vec<String> = losers.iter().map(|i| tenants[*i].clone()).collect();
        let l_keys: Vec<Option<String>> = losers.iter().map(|i| keys[*i].clone()).collect();
        let rows = sqlx::query(
            "SELECT t.tenant, t.idempotency_key, t.task_id, t.request_digest FROM tasks t \
                 JOIN UNNEST($1::text[], $2::text[]) AS k(tenant, idempotency_key) \
                   ON t.tenant = k.tenant AND t.idempotency_key = k.idempotency_key",
        )
        .bind(&l_tenants)
        .bind(&l_keys)
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| StoreError::from_sqlx("look up idempotency keys", e))?;
        for row in rows {
            existing.insert((row.get(0), row.get(1)), (row.get(2), row.get(3)));
        }
    }

    let mut outcomes = Vec::with_capacity(n);
    // Within one batch two requests may share a key; the first one inserted wins.
    let mut batch_winner: HashMap<(String, String), (uuid::Uuid, String)> = HashMap::new();
    for i in 0..n {
        let key = keys[i].clone().map(|k| (tenants[i].clone(), k));
        if inserted.contains(&ids[i]) {
            if let Some(k) = key {
                batch_winner.insert(k, (ids[i], digests[i].clone()));
            }
            outcomes.push(InsertOutcome::Created(TaskId::from_uuid(ids[i])));
            continue;
        }
        let found = key
            .as_ref()
            .and_then(|k| existing.get(k).or_else(|| batch_winner.get(k)));
        match found {
            Some((id, digest)) if *digest == digests[i] => {
                outcomes.push(InsertOutcome::Existing(TaskId::from_uuid(*id)))
            }
            Some((id, _)) => outcomes.push(InsertOutcome::Conflict(TaskId::from_uuid(*id))),
            None => {
                return Err(StoreError::Corrupt {
                    task_id: ids[i].to_string(),
                    column: "idempotency_key",
                    reason: "insert skipped but no task holds the key".to_owned(),
                });
            }
        }
    }
    Ok((outcomes, messages))
}

impl Store {
    /// The request a task was submitted with (as dispatched), whatever its tenant.
    pub async fn task_request(
        &self,
        task_id: TaskId,
    ) -> Result<Option<taskwire_protocol::TaskRequest>, StoreError> {
        self.task_request_for(None, task_id).await
    }

    /// Reads one task with its attempt history, whatever its tenant.
    pub async fn get_task(&self, task_id: TaskId) -> Result<Option<TaskRecord>, StoreError> {
        self.get_task_for(None, task_id).await
    }

    /// A task's attempts, oldest first.
    pub(crate) async fn attempts(
        &self,
        task_id: TaskId,
    ) -> Result<Vec<crate::AttemptRecord>, StoreError> {
        sqlx::query_as(
            "SELECT attempt, claim_epoch, worker_id, status, error, retryable, started_at, finished_at \
             FROM attempts WHERE task_id = $1 ORDER BY claim_epoch",
        )
        .bind(task_id.as_uuid())
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("read a task's attempts", e))
    }

    /// Queues a dead-lettered or failed task again with a fresh attempt budget, and
    /// writes its dispatch message to the outbox (a new `Nats-Msg-Id`, so JetStream's
    /// deduplication does not drop it).
    pub async fn replay_task(
        &self,
        task_id: TaskId,
        subject: &str,
    ) -> Result<ReplayOutcome, StoreError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(|e| StoreError::from_sqlx("begin a replay", e))?;
        let replayed = crate::lifecycle::replay(&mut tx, task_id).await?;
        let Some((trace_id, replays, request)) = replayed else {
            let status: Option<String> =
                sqlx::query_scalar("SELECT status FROM tasks WHERE task_id = $1")
                    .bind(task_id.as_uuid())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(|e| StoreError::from_sqlx("read a task", e))?;
            return Ok(
                match status.map(|s| s.parse::<taskwire_protocol::TaskStatus>()) {
                    Some(Ok(s)) => ReplayOutcome::NotReplayable(s),
                    Some(Err(e)) => {
                        return Err(StoreError::Corrupt {
                            task_id: task_id.to_string(),
                            column: "status",
                            reason: e.to_string(),
                        });
                    }
                    None => ReplayOutcome::Unknown,
                },
            );
        };
        sqlx::query(sql(format!(
            "INSERT INTO outbox (task_id, trace_id, subject, msg_id, payload, priority, tenant, turn) \
             SELECT $1, $2, $3, $4, $5, t.priority, t.tenant, {turn} \
             FROM tasks t WHERE t.task_id = $1",
            turn = crate::outbox::turn_sql("t", "1"),
        )))
        .bind(task_id.as_uuid())
        .bind(trace_id)
        .bind(subject)
        .bind(format!("{task_id}:replay:{replays}"))
        .bind(request)
        .execute(&mut *tx)
        .await
        .map_err(|e| StoreError::from_sqlx("queue a replay", e))?;
        tx.commit()
            .await
            .map_err(|e| StoreError::from_sqlx("commit a replay", e))?;
        Ok(ReplayOutcome::Replayed)
    }

    /// The task submitted by `tenant` with `key`, if any.
    pub async fn task_by_idempotency_key(
        &self,
        tenant: &str,
        key: &str,
    ) -> Result<Option<TaskId>, StoreError> {
        let id: Option<uuid::Uuid> = sqlx::query_scalar(
            "SELECT task_id FROM tasks WHERE tenant = $1 AND idempotency_key = $2",
        )
        .bind(tenant)
        .bind(key)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("find a task by idempotency key", e))?;
        Ok(id.map(TaskId::from_uuid))
    }

    /// Lists tasks matching `filter`, newest first, each with its attempt history (one
    /// more query for all of them).
    pub async fn list_tasks(&self, filter: &ListFilter) -> Result<Vec<TaskRecord>, StoreError> {
        let mut q: QueryBuilder<Postgres> =
            QueryBuilder::new(format!("SELECT {TASK_COLUMNS} FROM tasks WHERE true"));
        if let Some(t) = &filter.tenant {
            q.push(" AND tenant = ").push_bind(t.clone());
        }
        if let Some(t) = &filter.trace_id {
            q.push(" AND trace_id = ").push_bind(t.to_string());
        }
        if let Some(p) = &filter.parent_task_id {
            q.push(" AND parent_task_id = ").push_bind(p.as_uuid());
        }
        if let Some(s) = &filter.status {
            q.push(" AND status = ").push_bind(s.as_str());
        }
        if let Some(a) = &filter.agent {
            q.push(" AND agent = ").push_bind(a.clone());
        }
        let limit = if filter.limit == 0 {
            50
        } else {
            filter.limit.min(1000)
        };
        q.push(" ORDER BY created_at DESC, task_id DESC LIMIT ")
            .push_bind(i64::from(limit));
        let rows: Vec<TaskRow> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| StoreError::from_sqlx("list tasks", e))?;
        let mut tasks = rows
            .into_iter()
            .map(TaskRecord::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        let ids: Vec<uuid::Uuid> = tasks.iter().map(|t| t.task_id.as_uuid()).collect();
        let attempts: Vec<ListedAttempt> = sqlx::query_as(
            "SELECT task_id, attempt, claim_epoch, worker_id, status, error, retryable, started_at, finished_at \
             FROM attempts WHERE task_id = ANY($1) ORDER BY task_id, claim_epoch",
        )
        .bind(&ids)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("read listed tasks' attempts", e))?;
        let mut by_task: HashMap<uuid::Uuid, Vec<crate::AttemptRecord>> = HashMap::new();
        for a in attempts {
            by_task.entry(a.task_id).or_default().push(a.attempt);
        }
        for t in &mut tasks {
            t.attempts = by_task.remove(&t.task_id.as_uuid()).unwrap_or_default();
        }
        Ok(tasks)
    }
}

/// An attempt of one of the tasks a list found.
#[derive(sqlx::FromRow)]
struct ListedAttempt {
    task_id: uuid::Uuid,
    #[sqlx(flatten)]
    attempt: crate::AttemptRecord,
}

/// Decodes a stored `request` column, with `bundle`, the stored agent spec bundle it
/// names by digest (`None` for a request with its spec inline).
pub(crate) fn decode_request(
    task_id: TaskId,
    bytes: &[u8],
    bundle: Option<&[u8]>,
) -> Result<taskwire_protocol::TaskRequest, StoreError> {
    use prost::Message;
    use taskwire_protocol::{AgentSpecBundle, TaskRequest, pb};
    let corrupt = |column, reason: String| StoreError::Corrupt {
        task_id: task_id.to_string(),
        column,
        reason,
    };
    let wire = pb::TaskRequest::decode(bytes).map_err(|e| corrupt("request", e.to_string()))?;
    if wire.agent_spec.is_some() {
        return TaskRequest::try_from(wire).map_err(|e| corrupt("request", e.to_string()));
    }
    let Some(bundle) = bundle else {
        return Err(corrupt(
            "request",
            "it names an agent spec that is not stored".to_owned(),
        ));
    };
    let bundle =
        AgentSpecBundle::decode(bundle).map_err(|e| corrupt("agent_spec", e.to_string()))?;
    TaskRequest::from_dispatched(wire, &bundle).map_err(|e| corrupt("request", e.to_string()))
}
