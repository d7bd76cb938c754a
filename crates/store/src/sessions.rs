//! Session transcripts, saved by workers: with their result (the usual way, in the
//! result's transaction) or through the coordinator on their own (large transcripts).

use taskwire_protocol::{ClaimEpoch, SessionId, TaskId};

use crate::{Store, StoreError};

/// A saved session transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSession {
    pub tenant: String,
    /// The task whose attempt saved it last (a checkpoint, or a result's transcript).
    pub saved_by: TaskId,
    pub transcript: serde_json::Value,
}

/// One transcript to save: `(session, task, claim epoch, transcript as JSON text)`.
pub type SessionWrite = (SessionId, TaskId, ClaimEpoch, String);

/// The upsert of [`upsert`], its parameters numbered from `first`: the sessions, the
/// tasks, the epochs and the transcripts. Recording results runs it as a CTE of the
/// same statement.
pub(crate) fn upsert_statement(first: u32) -> String {
    let [s, t, e, j] = [first, first + 1, first + 2, first + 3];
    format!(
        "INSERT INTO sessions (session_id, tenant, task_id, claim_epoch, transcript) \
         SELECT s.session_id, t.tenant, t.task_id, t.claim_epoch, s.transcript::jsonb \
         FROM UNNEST(${s}::uuid[], ${t}::uuid[], ${e}::bigint[], ${j}::text[]) AS s(session_id, task_id, epoch, transcript) \
         JOIN tasks t ON t.task_id = s.task_id AND t.claim_epoch = s.epoch AND t.session_id = s.session_id \
         ON CONFLICT (session_id) DO UPDATE SET task_id = EXCLUDED.task_id, \
             claim_epoch = EXCLUDED.claim_epoch, transcript = EXCLUDED.transcript, updated_at = now() \
         WHERE sessions.tenant = EXCLUDED.tenant \
         RETURNING session_id"
    )
}

/// The upsert's parameters, column by column: sessions, tasks, epochs, transcripts.
pub(crate) type Columns<'a> = (Vec<uuid::Uuid>, Vec<uuid::Uuid>, Vec<i64>, Vec<&'a str>);

/// `writes` as the upsert's parameters ([`upsert_statement`]).
pub(crate) fn columns<'a>(writes: impl Iterator<Item = &'a SessionWrite> + Clone) -> Columns<'a> {
    (
        writes.clone().map(|w| w.0.as_uuid()).collect(),
        writes.clone().map(|w| w.1.as_uuid()).collect(),
        writes
            .clone()
            .map(|w| i64::try_from(w.2.0).unwrap_or(i64::MAX))
            .collect(),
        writes.map(|w| w.3.as_str()).collect(),
    )
}

/// Upserts transcripts in one statement, each only if `(task, epoch)` is the task's
/// current claim and the session is the task's tenant's; returns the sessions saved.
/// The JSON text goes to Postgres as is (it checks it): no parsing on the way.
pub(crate) async fn upsert(
    conn: &mut sqlx::PgConnection,
    writes: &[&SessionWrite],
) -> Result<std::collections::HashSet<uuid::Uuid>, StoreError> {
    if writes.is_empty() {
        return Ok(Default::default());
    }
    let (sessions, tasks, epochs, transcripts) = columns(writes.iter().copied());
    let saved: Vec<uuid::Uuid> = sqlx::query_scalar(crate::tasks::sql(upsert_statement(1)))
        .bind(&sessions)
        .bind(&tasks)
        .bind(&epochs)
        .bind(&transcripts)
        .fetch_all(conn)
        .await
        .map_err(|e| StoreError::from_sqlx("save sessions", e))?;
    Ok(saved.into_iter().collect())
}

impl Store {
    /// Saves transcripts in one statement, each fenced by its attempt's claim; returns,
    /// in order, whether each was saved. A session may appear once.
    pub async fn save_sessions(&self, writes: &[SessionWrite]) -> Result<Vec<bool>, StoreError> {
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(|e| StoreError::from_sqlx("save sessions", e))?;
        let refs: Vec<&SessionWrite> = writes.iter().collect();
        let saved = upsert(&mut conn, &refs).await?;
        Ok(writes
            .iter()
            .map(|w| saved.contains(&w.0.as_uuid()))
            .collect())
    }

    /// The transcript of a session, if one was saved; with its tenant and the task
    /// that saved it last.
    pub async fn load_session(
        &self,
        session: SessionId,
    ) -> Result<Option<StoredSession>, StoreError> {
        let row: Option<(String, uuid::Uuid, serde_json::Value)> = sqlx::query_as(
            "SELECT tenant, task_id, transcript FROM sessions WHERE session_id = $1",
        )
        .bind(session.as_uuid())
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("load a session", e))?;
        Ok(row.map(|(tenant, task, transcript)| StoredSession {
            tenant,
            saved_by: TaskId::from_uuid(task),
            transcript,
        }))
    }
}
