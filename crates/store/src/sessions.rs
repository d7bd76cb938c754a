//! Session transcripts, saved by workers through the coordinator.

use taskwire_protocol::{ClaimEpoch, SessionId, TaskId};

use crate::{Store, StoreError};

/// One transcript to save: `(session, task, claim epoch, transcript)`.
pub type SessionWrite = (SessionId, TaskId, ClaimEpoch, serde_json::Value);

impl Store {
    /// Saves transcripts in one statement, each fenced like [`Store::save_session`];
    /// returns, in order, whether each was saved. A session may appear once.
    pub async fn save_sessions(&self, writes: &[SessionWrite]) -> Result<Vec<bool>, StoreError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let sessions: Vec<uuid::Uuid> = writes.iter().map(|w| w.0.as_uuid()).collect();
        let tasks: Vec<uuid::Uuid> = writes.iter().map(|w| w.1.as_uuid()).collect();
        let epochs: Vec<i64> = writes
            .iter()
            .map(|w| i64::try_from(w.2.0).unwrap_or(i64::MAX))
            .collect();
        let transcripts: Vec<&serde_json::Value> = writes.iter().map(|w| &w.3).collect();
        let saved: Vec<uuid::Uuid> = sqlx::query_scalar(
            "INSERT INTO sessions (session_id, tenant, task_id, claim_epoch, transcript) \
             SELECT s.session_id, t.tenant, t.task_id, t.claim_epoch, s.transcript \
             FROM UNNEST($1::uuid[], $2::uuid[], $3::bigint[], $4::jsonb[]) AS s(session_id, task_id, epoch, transcript) \
             JOIN tasks t ON t.task_id = s.task_id AND t.claim_epoch = s.epoch \
             ON CONFLICT (session_id) DO UPDATE SET task_id = EXCLUDED.task_id, \
                 claim_epoch = EXCLUDED.claim_epoch, transcript = EXCLUDED.transcript, updated_at = now() \
             WHERE sessions.tenant = EXCLUDED.tenant \
             RETURNING session_id",
        )
        .bind(&sessions)
        .bind(&tasks)
        .bind(&epochs)
        .bind(&transcripts)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("save sessions", e))?;
        let saved: std::collections::HashSet<uuid::Uuid> = saved.into_iter().collect();
        Ok(sessions.iter().map(|s| saved.contains(s)).collect())
    }

    /// The transcript of a session, if one was saved; with its tenant.
    pub async fn load_session(
        &self,
        session: SessionId,
    ) -> Result<Option<(String, serde_json::Value)>, StoreError> {
        sqlx::query_as("SELECT tenant, transcript FROM sessions WHERE session_id = $1")
            .bind(session.as_uuid())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| StoreError::from_sqlx("load a session", e))
    }

    /// Saves a session's transcript for the attempt `(task, epoch)`; returns `false`
    /// (and writes nothing) when that attempt is no longer the task's current claim, so
    /// a stale worker cannot overwrite a newer transcript.
    pub async fn save_session(
        &self,
        session: SessionId,
        task: TaskId,
        epoch: ClaimEpoch,
        transcript: &serde_json::Value,
    ) -> Result<bool, StoreError> {
        let saved = self
            .save_sessions(&[(session, task, epoch, transcript.clone())])
            .await?;
        Ok(saved.first().copied().unwrap_or(false))
    }
}
