//! The outbox: dispatch messages written with their task, published by the relay.

use crate::{Store, StoreError};

/// One message waiting to be published.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OutboxMessage {
    pub id: i64,
    pub trace_id: String,
    pub subject: String,
    pub msg_id: String,
    pub payload: Vec<u8>,
}

impl Store {
    /// The oldest `limit` unpublished messages.
    ///
    /// Several relays may run (one per coordinator): a message may then be published
    /// twice, which JetStream deduplicates by `Nats-Msg-Id`.
    pub async fn outbox_pending(&self, limit: i64) -> Result<Vec<OutboxMessage>, StoreError> {
        sqlx::query_as::<_, OutboxMessage>(
            "SELECT id, trace_id, subject, msg_id, payload FROM outbox ORDER BY id LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("read the outbox", e))
    }

    /// Deletes published messages.
    pub async fn outbox_delete(&self, ids: &[i64]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        sqlx::query("DELETE FROM outbox WHERE id = ANY($1)")
            .bind(ids)
            .execute(&self.pool)
            .await
            .map_err(|e| StoreError::from_sqlx("delete published outbox rows", e))?;
        Ok(())
    }
}
