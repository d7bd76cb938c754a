//! taskwire's NATS layout, shared by the coordinator and the workers.
//!
//! - [`subjects`]: every subject and stream name, derived from one prefix so that
//!   several deployments (or tests) can share a server.
//! - [`streams`]: creates the JetStream streams and the workers' durable consumer.
//! - [`headers`]: header names (`Nats-Msg-Id`, `traceparent`, ...).
//! - [`error`]: [`BusError`].
//!
//! Streams:
//! - `<P>_TASKS` (WorkQueue, bounded): `TaskRequest`s, one durable pull consumer per queue
//!   shared by all workers of that queue.
//! - `<P>_EVENTS` (Limits, max age): `TaskProgress` per task subject, kept for `Watch` replay.
//! - `<P>_RESULTS` (WorkQueue): `TaskResult`s for the coordinator's aggregator.
//! - `<P>_DLQ` (WorkQueue): `DeadLetter`s reported by workers, recorded by the coordinator.
//!
//! Request/reply (core NATS): claims. Fire-and-forget (core NATS): cancel notices and
//! "task finished" notices that wake watchers.

pub mod error;
pub mod headers;
pub mod streams;
pub mod subjects;

pub use error::BusError;
pub use streams::{BusConfig, coordinator_consumer, ensure_streams, tasks_consumer};
pub use subjects::Subjects;

/// Connects to NATS with taskwire's client options (named connection, retry on
/// initial connect off so a wrong URL fails fast, reconnect forever afterwards).
pub async fn connect(url: &str, name: &str) -> Result<async_nats::Client, BusError> {
    async_nats::ConnectOptions::new()
        .name(name)
        .retry_on_initial_connect()
        .max_reconnects(None)
        .connection_timeout(std::time::Duration::from_secs(5))
        .connect(url)
        .await
        .map_err(|e| BusError::Connect { url: url.to_owned(), reason: e.to_string() })
}
