//! The bus's errors. Each carries one [`ErrorCode`], which is what a caller acts on.
//!
//! - [`BusError`]: setting up or using NATS failed (connect, streams, a publish, a
//!   pull).
//! - [`RpcError`]: a worker request failed: refused by the coordinator with a code, or
//!   unanswered (`UNAVAILABLE`). The same type is what a coordinator answers with, so a
//!   code chosen there is the code the worker sees.
//! - [`CodecError`]: bytes from the bus are not the envelope they should be; it names
//!   the envelope and, when it is one field, the field.

use taskwire_protocol::{ErrorCode, ProtocolError};

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
    #[error("failed to subscribe to {subject}: {reason}")]
    Subscribe { subject: String, reason: String },
    #[error("failed to pull from consumer {consumer}: {reason}")]
    Pull { consumer: String, reason: String },
    /// Any other request to the server: reading a stream's state, a message, a
    /// key-value bucket, flushing the connection.
    #[error("failed to {action}: {reason}")]
    Request { action: String, reason: String },
}

impl BusError {
    /// The code of this failure: NATS being unreachable is `UNAVAILABLE`, a full
    /// stream `RESOURCE_EXHAUSTED`, a stream or consumer that cannot be set up (a
    /// configuration that conflicts with the server's) `INTERNAL`.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Connect { .. }
            | Self::Publish { .. }
            | Self::Subscribe { .. }
            | Self::Pull { .. }
            | Self::Request { .. } => ErrorCode::Unavailable,
            Self::StreamFull { .. } => ErrorCode::ResourceExhausted,
            Self::Stream { .. } | Self::Consumer { .. } => ErrorCode::Internal,
        }
    }
}

/// A worker request that failed, with the code the caller acts on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct RpcError {
    pub code: ErrorCode,
    pub message: String,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// Whether asking again later may succeed.
    pub fn is_retryable(&self) -> bool {
        self.code.is_retryable()
    }
}

impl From<CodecError> for RpcError {
    fn from(e: CodecError) -> Self {
        Self::new(ErrorCode::InvalidArgument, e.to_string())
    }
}

impl From<BusError> for RpcError {
    fn from(e: BusError) -> Self {
        Self::new(e.code(), e.to_string())
    }
}

/// Bytes from the bus that are not the envelope expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {envelope}: {reason}")]
pub struct CodecError {
    /// What was being read: `task request`, `claim reply`, ...
    pub envelope: &'static str,
    /// The field at fault, when it is one field.
    pub field: Option<&'static str>,
    pub reason: String,
}

impl CodecError {
    pub(crate) fn new(envelope: &'static str, e: ProtocolError) -> Self {
        let reason = match &e {
            // Already says what it decoded: keep only why it failed.
            ProtocolError::Decode { reason, .. } => reason.clone(),
            other => other.to_string(),
        };
        Self {
            envelope,
            field: e.field(),
            reason,
        }
    }
}
