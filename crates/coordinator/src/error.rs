//! The coordinator's error type and its one mapping to an [`ErrorCode`], which gRPC
//! callers (`tonic::Status`) and workers (the bus's `RpcStatus`) both receive.

use taskwire_bus::{CodecError, RpcError};
use taskwire_protocol::{ErrorCode, ProtocolError};
use taskwire_store::StoreError;

/// Why a coordinator operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    #[error("invalid {field}: {reason}")]
    InvalidArgument { field: String, reason: String },
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    AlreadyExists(String),
    #[error("{0}")]
    ResourceExhausted(String),
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("{0}")]
    PermissionDenied(String),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Bus(#[from] taskwire_bus::BusError),
    #[error("failed to serve grpc: {0}")]
    Serve(String),
    #[error("{0}")]
    Internal(String),
}

/// Why one run of a background loop (the result aggregator, the dead-letter recorder,
/// the advisories handler) stopped; its supervisor logs it and starts the loop again.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    #[error(transparent)]
    Bus(#[from] taskwire_bus::BusError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a tokens file was refused.
#[derive(Debug, thiserror::Error)]
pub enum TokensFileError {
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    /// Entry `entry` (counted from 1) gives both or neither of `token` and `sha256`.
    #[error("token #{entry}: give exactly one of `token` and `sha256`")]
    Secret { entry: usize },
    /// Entry `entry` (counted from 1) names no tenant.
    #[error("token #{entry}: `tenant` must not be empty")]
    NoTenant { entry: usize },
}

/// Why the coordinator is not ready (the `/readyz` answer).
#[derive(Debug, thiserror::Error)]
pub enum NotReady {
    #[error("shutting down")]
    ShuttingDown,
    #[error("starting: not connected to postgres and nats yet")]
    Starting,
    #[error("not connected to nats")]
    Nats,
    #[error("postgres does not answer: {0}")]
    Postgres(#[source] StoreError),
    #[error("postgres did not answer within {0:?}")]
    PostgresTimeout(std::time::Duration),
}

/// Why the stream of a task's events ended before its result.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Bus(#[from] taskwire_bus::BusError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("event stream ended")]
    EventsEnded,
    #[error("task {0} disappeared")]
    TaskGone(taskwire_protocol::TaskId),
}

/// Why an MCP tool call failed; its text is the tool's error result, led by the
/// gRPC code's name (`NOT_FOUND: ...`).
#[derive(Debug, thiserror::Error)]
pub enum McpToolError {
    /// The task service refused the call.
    #[error("{}: {}", crate::mcp::code_name(.0.code()), .0.message())]
    Status(Box<tonic::Status>),
    /// `answer_approval` got an answer that is not `once`, `always` or `reject`.
    #[error("INVALID_ARGUMENT: answer must be once, always or reject, not {0:?}")]
    InvalidAnswer(String),
    #[error("NOT_FOUND: no tool {0}")]
    UnknownTool(String),
}

impl CoordinatorError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl From<ProtocolError> for CoordinatorError {
    fn from(e: ProtocolError) -> Self {
        match e.field() {
            Some(field) => Self::InvalidArgument {
                field: field.to_owned(),
                reason: e.to_string(),
            },
            None => Self::InvalidArgument {
                field: "request".to_owned(),
                reason: e.to_string(),
            },
        }
    }
}

impl CoordinatorError {
    /// The one code of this error. Connection-class store errors are `UNAVAILABLE`
    /// (retrying later may succeed); other store errors are `INTERNAL`.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::InvalidArgument { .. } => ErrorCode::InvalidArgument,
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::AlreadyExists(_) => ErrorCode::AlreadyExists,
            Self::ResourceExhausted(_) => ErrorCode::ResourceExhausted,
            Self::FailedPrecondition(_) => ErrorCode::FailedPrecondition,
            Self::PermissionDenied(_) => ErrorCode::PermissionDenied,
            Self::Store(s) if s.is_unavailable() => ErrorCode::Unavailable,
            Self::Unavailable(_) => ErrorCode::Unavailable,
            Self::Bus(b) => b.code(),
            Self::Store(_) | Self::Serve(_) | Self::Config(_) | Self::Internal(_) => {
                ErrorCode::Internal
            }
        }
    }
}

impl From<CodecError> for CoordinatorError {
    fn from(e: CodecError) -> Self {
        Self::InvalidArgument {
            field: e.field.unwrap_or(e.envelope).to_owned(),
            reason: e.to_string(),
        }
    }
}

impl From<CoordinatorError> for tonic::Status {
    fn from(e: CoordinatorError) -> Self {
        tonic::Status::new(e.code().into(), e.to_string())
    }
}

/// What a worker's request is answered with.
impl From<CoordinatorError> for RpcError {
    fn from(e: CoordinatorError) -> Self {
        RpcError::new(e.code(), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corrupt_row() -> StoreError {
        StoreError::Corrupt {
            task_id: "t".into(),
            column: "result",
            reason: "bad json".into(),
        }
    }

    #[test]
    fn grpc_callers_and_workers_get_the_same_code() {
        let errors = || {
            [
                CoordinatorError::invalid("agent", "empty"),
                CoordinatorError::NotFound("task x".into()),
                CoordinatorError::FailedPrecondition("stale".into()),
                CoordinatorError::Unavailable("nats is down".into()),
                CoordinatorError::Internal("bug".into()),
                CoordinatorError::Store(corrupt_row()),
            ]
        };
        for (grpc, worker) in errors().into_iter().zip(errors()) {
            let status = tonic::Status::from(grpc);
            let rpc = RpcError::from(worker);
            assert_eq!(status.code(), tonic::Code::from(rpc.code()), "{rpc}");
            assert_eq!(status.message(), rpc.message);
        }
    }

    #[test]
    fn an_internal_error_stays_internal_for_workers() {
        for e in [
            CoordinatorError::Internal("bug".into()),
            CoordinatorError::Store(corrupt_row()),
        ] {
            let rpc = RpcError::from(e);
            assert_eq!(rpc.code(), ErrorCode::Internal, "{rpc}");
            assert!(!rpc.is_retryable());
        }
    }
}
