//! Session transcripts, saved by workers through the coordinator.

use taskwire_protocol::{ClaimEpoch, SessionId, TaskId};

use crate::{Store, StoreError};

impl Store {
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
        let saved = sqlx::query(
            "INSERT INTO sessions (session_id, tenant, task_id, claim_epoch, transcript) \
             SELECT $1, t.tenant, t.task_id, t.claim_epoch, $4 FROM tasks t \
             WHERE t.task_id = $2 AND t.claim_epoch = $3 \
             ON CONFLICT (session_id) DO UPDATE SET task_id = EXCLUDED.task_id, \
                 claim_epoch = EXCLUDED.claim_epoch, transcript = EXCLUDED.transcript, updated_at = now() \
             WHERE sessions.tenant = EXCLUDED.tenant",
        )
        .bind(session.as_uuid())
        .bind(task.as_uuid())
        .bind(i64::try_from(epoch.0).unwrap_or(i64::MAX))
        .bind(transcript)
        .execute(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("save a session", e))?;
        Ok(saved.rows_affected() == 1)
    }
}
