//! Result webhooks: the row a submit with a callback URL writes ([`crate::Store::insert_tasks`]),
//! the deliverer's lease on due rows ([`Store::take_due_webhooks`]), each delivery's
//! record, and the state `Get` shows ([`Store::webhook`]).
//!
//! A row is due once its task is terminal and its `next_attempt_at` passed, and no live
//! lease holds it. Taking it increments its attempts, starts a lease and writes the
//! delivery's row in one statement; the answer is recorded by attempt number, so a
//! deliverer whose lease ran out cannot overwrite a later attempt's record.

use std::time::Duration;

use chrono::{DateTime, Utc};
use taskwire_protocol::{TaskId, TaskStatus};

use crate::{Store, StoreError};

/// Where a task's webhook stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookState {
    /// The task has not ended.
    Waiting,
    /// The task ended; a delivery is due, in flight, or waits for its retry.
    Pending,
    /// The receiver answered 2xx.
    Delivered,
    /// Every attempt failed.
    Failed,
}

impl WebhookState {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "waiting" => Self::Waiting,
            "pending" => Self::Pending,
            "delivered" => Self::Delivered,
            "failed" => Self::Failed,
            _ => return None,
        })
    }
}

/// One POST of a webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookDelivery {
    pub attempt: u32,
    pub started_at: DateTime<Utc>,
    /// 0 when no answer came back.
    pub status_code: u16,
    pub error: String,
    pub duration_ms: u32,
}

/// A task's webhook and its deliveries, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    pub url: String,
    pub state: WebhookState,
    pub attempts: u32,
    pub next_attempt_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub deliveries: Vec<WebhookDelivery>,
}

/// A webhook taken for delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueWebhook {
    pub task_id: TaskId,
    pub tenant: String,
    pub url: String,
    /// This delivery's attempt number, from 1.
    pub attempt: u32,
}

/// How a delivery ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// The receiver answered 2xx.
    Delivered { status_code: u16 },
    /// It did not; `retry_in` when another attempt follows.
    Failed {
        status_code: u16,
        error: String,
        retry_in: Option<Duration>,
    },
}

/// No answer was recorded: what the delivery's row says until one is.
pub const NO_ANSWER: &str = "no answer recorded: the coordinator stopped during the delivery";

fn terminal_statuses() -> Vec<&'static str> {
    TaskStatus::ALL
        .into_iter()
        .filter(|s| s.is_terminal())
        .map(TaskStatus::as_str)
        .collect()
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Store {
    /// Takes up to `limit` due webhooks for `lease` on behalf of `holder`: their attempt
    /// counted, their delivery row written.
    pub async fn take_due_webhooks(
        &self,
        limit: u32,
        lease: Duration,
        holder: &str,
    ) -> Result<Vec<DueWebhook>, StoreError> {
        let rows: Vec<(uuid::Uuid, String, String, i32)> = sqlx::query_as(
            "WITH due AS ( \
                 SELECT w.task_id FROM webhooks w JOIN tasks t USING (task_id) \
                 WHERE w.state IN ('waiting', 'pending') AND t.status = ANY($1::text[]) \
                   AND w.next_attempt_at <= now() \
                   AND (w.lease_until IS NULL OR w.lease_until < now()) \
                 ORDER BY w.next_attempt_at LIMIT $2 \
                 FOR UPDATE OF w SKIP LOCKED), \
             taken AS ( \
                 UPDATE webhooks w SET state = 'pending', attempts = w.attempts + 1, \
                        lease_until = now() + make_interval(secs => $3::float8 / 1000), leased_by = $4 \
                 FROM due WHERE w.task_id = due.task_id \
                 RETURNING w.task_id, w.tenant, w.url, w.attempts), \
             started AS ( \
                 INSERT INTO webhook_deliveries (task_id, attempt, error) \
                 SELECT task_id, attempts, $5 FROM taken) \
             SELECT task_id, tenant, url, attempts FROM taken",
        )
        .bind(terminal_statuses())
        .bind(i64::from(limit))
        .bind(millis(lease))
        .bind(holder)
        .bind(NO_ANSWER)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("take due webhooks", e))?;
        Ok(rows
            .into_iter()
            .map(|(task_id, tenant, url, attempt)| DueWebhook {
                task_id: TaskId::from_uuid(task_id),
                tenant,
                url,
                attempt: u32::try_from(attempt).unwrap_or(0),
            })
            .collect())
    }

    /// Records how attempt `attempt` of `task_id`'s webhook ended. `false` when the row
    /// had moved on (a later attempt took it, or it was recorded already): nothing
    /// changed.
    pub async fn record_webhook_delivery(
        &self,
        task_id: TaskId,
        attempt: u32,
        duration: Duration,
        outcome: &DeliveryOutcome,
    ) -> Result<bool, StoreError> {
        let (state, status_code, error, retry_in) = match outcome {
            DeliveryOutcome::Delivered { status_code } => ("delivered", *status_code, "", None),
            DeliveryOutcome::Failed {
                status_code,
                error,
                retry_in,
            } => (
                if retry_in.is_some() {
                    "pending"
                } else {
                    "failed"
                },
                *status_code,
                error.as_str(),
                *retry_in,
            ),
        };
        let changed: Option<uuid::Uuid> = sqlx::query_scalar(
            "WITH hook AS ( \
                 UPDATE webhooks SET state = $3, lease_until = NULL, leased_by = NULL, \
                        delivered_at = CASE WHEN $3 = 'delivered' THEN now() END, \
                        next_attempt_at = now() + make_interval(secs => COALESCE($7::float8, 0) / 1000) \
                 WHERE task_id = $1 AND attempts = $2 AND state = 'pending' \
                 RETURNING task_id), \
             delivery AS ( \
                 UPDATE webhook_deliveries d SET status_code = $4, error = $5, duration_ms = $6 \
                 FROM hook WHERE d.task_id = hook.task_id AND d.attempt = $2) \
             SELECT task_id FROM hook",
        )
        .bind(task_id.as_uuid())
        .bind(i32::try_from(attempt).unwrap_or(i32::MAX))
        .bind(state)
        .bind(i32::from(status_code))
        .bind(error)
        .bind(i32::try_from(duration.as_millis()).unwrap_or(i32::MAX))
        .bind(retry_in.map(millis))
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("record a webhook delivery", e))?;
        Ok(changed.is_some())
    }

    /// `task_id`'s webhook and its deliveries; `None` when it has none.
    pub async fn webhook(&self, task_id: TaskId) -> Result<Option<Webhook>, StoreError> {
        type Row = (String, String, i32, DateTime<Utc>, Option<DateTime<Utc>>);
        let row: Option<Row> = sqlx::query_as(
            "SELECT url, state, attempts, next_attempt_at, delivered_at FROM webhooks WHERE task_id = $1",
        )
        .bind(task_id.as_uuid())
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("read a webhook", e))?;
        let Some((url, state, attempts, next_attempt_at, delivered_at)) = row else {
            return Ok(None);
        };
        let deliveries: Vec<(i32, DateTime<Utc>, i32, String, i32)> = sqlx::query_as(
            "SELECT attempt, started_at, status_code, error, duration_ms FROM webhook_deliveries \
             WHERE task_id = $1 ORDER BY attempt",
        )
        .bind(task_id.as_uuid())
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("read webhook deliveries", e))?;
        let state = WebhookState::parse(&state).ok_or_else(|| StoreError::Corrupt {
            task_id: task_id.to_string(),
            column: "webhooks.state",
            reason: format!("unknown state `{state}`"),
        })?;
        Ok(Some(Webhook {
            url,
            state,
            attempts: u32::try_from(attempts).unwrap_or(0),
            next_attempt_at,
            delivered_at,
            deliveries: deliveries
                .into_iter()
                .map(
                    |(attempt, started_at, status_code, error, duration_ms)| WebhookDelivery {
                        attempt: u32::try_from(attempt).unwrap_or(0),
                        started_at,
                        status_code: u16::try_from(status_code).unwrap_or(0),
                        error,
                        duration_ms: u32::try_from(duration_ms).unwrap_or(0),
                    },
                )
                .collect(),
        }))
    }
}
