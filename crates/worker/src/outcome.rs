//! How a task message is settled. Every path through the handler ends in one
//! [`Disposition`], and this file alone turns it into a JetStream acknowledgement.

use std::time::Duration;

use async_nats::jetstream::{AckKind, Message};

/// What to tell JetStream about a task message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// The attempt's result is stored in the RESULTS stream, or there is nothing to do
    /// (the task is already finished): remove the message. Double-acked, so a lost ack
    /// cannot cause a redelivery.
    Done,
    /// Could not run now (coordinator unreachable, worker shutting down): redeliver,
    /// to any worker, after `delay`.
    Retry { delay: Option<Duration> },
    /// Can never run (malformed, unknown task); already recorded as a dead letter.
    Reject { reason: String },
}

/// Applies `disposition` to `msg`. Failures are logged: JetStream redelivers an
/// unacknowledged message after the ack wait, and the fenced result write makes that safe.
pub async fn settle(msg: &Message, disposition: &Disposition) {
    let res = match disposition {
        Disposition::Done => msg.double_ack().await,
        Disposition::Retry { delay } => msg.ack_with(AckKind::Nak(*delay)).await,
        Disposition::Reject { .. } => msg.ack_with(AckKind::Term).await,
    };
    if let Err(e) = res {
        tracing::warn!(error = %e, ?disposition, "failed to settle task message");
    }
}

/// Tells JetStream the task is still being worked on (resets its ack wait).
pub async fn in_progress(msg: &Message) {
    if let Err(e) = msg.ack_with(AckKind::Progress).await {
        tracing::warn!(error = %e, "failed to send in-progress ack");
    }
}
