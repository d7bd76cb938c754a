//! Dead letters: messages that could not be run, kept with the reason.

use crate::{DeadLetterRecord, Store, StoreError};

impl Store {
    /// Records a message that could not be run.
    pub async fn record_dead_letter(
        &self,
        subject: &str,
        reason: &str,
        payload: &[u8],
        worker_id: Option<&str>,
        task_id: Option<uuid::Uuid>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO dead_letters (subject, reason, payload, worker_id, task_id) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(subject)
        .bind(reason)
        .bind(payload)
        .bind(worker_id)
        .bind(task_id)
        .execute(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("record a dead letter", e))?;
        Ok(())
    }

    /// The newest dead letters first.
    pub async fn dead_letters(&self, limit: i64) -> Result<Vec<DeadLetterRecord>, StoreError> {
        sqlx::query_as::<_, DeadLetterRecord>(
            "SELECT id, subject, reason, payload, worker_id, task_id, created_at \
             FROM dead_letters ORDER BY id DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("list dead letters", e))
    }
}
