//! The coordinator's error type and its one mapping to gRPC status codes.

use taskwire_protocol::ProtocolError;
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

impl From<CoordinatorError> for tonic::Status {
    fn from(e: CoordinatorError) -> Self {
        use tonic::Code;
        let code = match &e {
            CoordinatorError::InvalidArgument { .. } => Code::InvalidArgument,
            CoordinatorError::NotFound(_) => Code::NotFound,
            CoordinatorError::AlreadyExists(_) => Code::AlreadyExists,
            CoordinatorError::ResourceExhausted(_) => Code::ResourceExhausted,
            CoordinatorError::FailedPrecondition(_) => Code::FailedPrecondition,
            CoordinatorError::PermissionDenied(_) => Code::PermissionDenied,
            CoordinatorError::Store(s) if s.is_unavailable() => Code::Unavailable,
            CoordinatorError::Bus(_) | CoordinatorError::Unavailable(_) => Code::Unavailable,
            CoordinatorError::Store(_)
            | CoordinatorError::Serve(_)
            | CoordinatorError::Config(_)
            | CoordinatorError::Internal(_) => Code::Internal,
        };
        tonic::Status::new(code, e.to_string())
    }
}
