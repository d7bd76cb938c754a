//! The bus's error type.

/// A NATS operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    #[error("failed to connect to nats at {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("failed to set up stream {stream}: {reason}")]
    Stream { stream: String, reason: String },
    #[error("failed to set up consumer {consumer}: {reason}")]
    Consumer { consumer: String, reason: String },
    #[error("failed to publish to {subject}: {reason}")]
    Publish { subject: String, reason: String },
    #[error("stream {stream} is full")]
    StreamFull { stream: String },
    #[error("request to {subject} failed: {reason}")]
    Request { subject: String, reason: String },
}
