//! The outbox: dispatch messages written with their task, published by the relay.

use crate::{Store, StoreError};

/// The SQL expression for a new outbox row's turn: the last turn its tenant holds at
/// its priority, else just before the earliest turn waiting at that priority (a tenant
/// with nothing waiting goes first), else 0; plus `offset`. `row` is the alias of the
/// row being dispatched (with `priority` and `tenant` columns) and `offset` numbers the
/// rows of one statement (`1`, or a `row_number()` over the tenant and priority). See
/// `migrations/0013_outbox_order.sql`.
pub(crate) fn turn_sql(row: &str, offset: &str) -> String {
    format!(
        "COALESCE((SELECT max(o.turn) FROM outbox o \
                   WHERE o.priority = {row}.priority AND o.tenant = {row}.tenant), \
                  (SELECT min(o.turn) - 1 FROM outbox o WHERE o.priority = {row}.priority), 0) \
         + {offset}"
    )
}

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
    /// Publishes one batch of unpublished messages through `publish` and deletes those
    /// it reports as stored; returns how many rows it read.
    ///
    /// The batch is taken in dispatch order: higher priority first; within a priority,
    /// by turn (the tenants take turns: see `migrations/0013_outbox_order.sql`), so
    /// that one tenant's thousands of waiting tasks do not hold back another's one;
    /// then oldest first.
    ///
    /// The rows are locked for the batch (`FOR UPDATE SKIP LOCKED`), so several relays
    /// (one per coordinator) each take rows the others are not publishing. A relay that
    /// dies mid-batch leaves its rows unlocked and undeleted: another publishes them
    /// again, with the same `Nats-Msg-Id`, which JetStream stores once. Rows their
    /// writer is publishing itself ([`Store::insert_tasks_relaying`]) are left alone
    /// until their `relay_after`.
    pub async fn relay_outbox<F, Fut>(&self, limit: i64, publish: F) -> Result<usize, StoreError>
    where
        F: FnOnce(Vec<OutboxMessage>) -> Fut,
        Fut: std::future::Future<Output = Vec<i64>>,
    {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(|e| StoreError::from_sqlx("begin an outbox batch", e))?;
        let rows = sqlx::query_as::<_, OutboxMessage>(
            "SELECT id, trace_id, subject, msg_id, payload FROM outbox \
             WHERE relay_after IS NULL OR relay_after <= now() \
             ORDER BY priority, turn, id LIMIT $1 FOR UPDATE SKIP LOCKED",
        )
        .bind(limit)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| StoreError::from_sqlx("read the outbox", e))?;
        let read = rows.len();
        if read == 0 {
            return Ok(0);
        }
        let done = publish(rows).await;
        if !done.is_empty() {
            sqlx::query("DELETE FROM outbox WHERE id = ANY($1)")
                .bind(&done)
                .execute(&mut *tx)
                .await
                .map_err(|e| StoreError::from_sqlx("delete published outbox rows", e))?;
        }
        tx.commit()
            .await
            .map_err(|e| StoreError::from_sqlx("commit an outbox batch", e))?;
        Ok(read)
    }

    /// The outbox's rows, counted up to `cap` (a bounded scan however large it grew).
    pub async fn outbox_count_up_to(&self, cap: i64) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM (SELECT 1 FROM outbox LIMIT $1) o")
            .bind(cap)
            .fetch_one(&self.pool)
            .await
            .map_err(|e| StoreError::from_sqlx("count the outbox", e))?;
        Ok(u64::try_from(n).unwrap_or_default())
    }

    /// The oldest `limit` unpublished messages (read without locking them).
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
        self.on_connection("delete published outbox rows", async |conn| {
            sqlx::query("DELETE FROM outbox WHERE id = ANY($1)")
                .bind(ids)
                .execute(conn)
                .await
                .map_err(|e| StoreError::from_sqlx("delete published outbox rows", e))
        })
        .await?;
        Ok(())
    }
}
