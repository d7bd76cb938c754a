//! [`ErrorCode`]: the one error code of a failed request, whoever carries it.
//!
//! A coordinator error, a bus error and a worker request's reply all carry one of
//! these. It maps once to gRPC (`tonic::Code`, feature `grpc`) and once to the wire
//! (`RpcStatus.code`, the gRPC code's canonical name, e.g. `NOT_FOUND`), so the API and
//! the workers always see the same code for the same failure.

use std::fmt;

/// Why a request failed, as a code a caller can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The request is malformed or names a bad value; asking again will not help.
    InvalidArgument,
    /// The caller did not prove who it is.
    Unauthenticated,
    /// The caller may not do this.
    PermissionDenied,
    /// The named object does not exist (or is another tenant's).
    NotFound,
    /// The object exists already (a conflicting idempotency key).
    AlreadyExists,
    /// The object is not in a state that allows this (a stale claim, a finished task).
    FailedPrecondition,
    /// A limit is reached (a full queue): try again later.
    ResourceExhausted,
    /// Nobody serves this request.
    Unimplemented,
    /// A dependency is down or did not answer (Postgres, NATS, the coordinator): retrying
    /// later may succeed.
    Unavailable,
    /// A bug or an unexpected failure; retrying is not known to help.
    Internal,
}

impl ErrorCode {
    /// Every code, for tables and tests.
    pub const ALL: [ErrorCode; 10] = [
        Self::InvalidArgument,
        Self::Unauthenticated,
        Self::PermissionDenied,
        Self::NotFound,
        Self::AlreadyExists,
        Self::FailedPrecondition,
        Self::ResourceExhausted,
        Self::Unimplemented,
        Self::Unavailable,
        Self::Internal,
    ];

    /// The code on the wire (`RpcStatus.code`): the gRPC canonical name.
    pub fn as_wire(self) -> &'static str {
        match self {
            Self::InvalidArgument => "INVALID_ARGUMENT",
            Self::Unauthenticated => "UNAUTHENTICATED",
            Self::PermissionDenied => "PERMISSION_DENIED",
            Self::NotFound => "NOT_FOUND",
            Self::AlreadyExists => "ALREADY_EXISTS",
            Self::FailedPrecondition => "FAILED_PRECONDITION",
            Self::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Self::Unimplemented => "UNIMPLEMENTED",
            Self::Unavailable => "UNAVAILABLE",
            Self::Internal => "INTERNAL",
        }
    }

    /// The code of a wire name. Also reads the names earlier coordinators sent
    /// (`NotFound`, the gRPC code's Rust name), so a mixed fleet agrees during an upgrade.
    pub fn from_wire(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| {
            c.as_wire() == name || c.as_wire().replace('_', "").eq_ignore_ascii_case(name)
        })
    }

    /// The HTTP status of the code on the coordinator's HTTP API: Google's mapping of
    /// the canonical codes, as gRPC gateways use it, except `FAILED_PRECONDITION`,
    /// which is 409 (the request is valid; the object's state refuses it).
    pub fn http_status(self) -> u16 {
        match self {
            Self::InvalidArgument => 400,
            Self::Unauthenticated => 401,
            Self::PermissionDenied => 403,
            Self::NotFound => 404,
            // The object's state refuses the request (a replay of a completed task).
            Self::AlreadyExists | Self::FailedPrecondition => 409,
            Self::ResourceExhausted => 429,
            Self::Unimplemented => 501,
            Self::Unavailable => 503,
            Self::Internal => 500,
        }
    }

    /// Whether the same request may succeed later (a dependency was down or did not
    /// answer). Workers try such a request again later; any other code is final.
    pub fn is_retryable(self) -> bool {
        self == Self::Unavailable
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_wire())
    }
}

#[cfg(feature = "grpc")]
impl From<ErrorCode> for tonic::Code {
    fn from(code: ErrorCode) -> Self {
        match code {
            ErrorCode::InvalidArgument => tonic::Code::InvalidArgument,
            ErrorCode::Unauthenticated => tonic::Code::Unauthenticated,
            ErrorCode::PermissionDenied => tonic::Code::PermissionDenied,
            ErrorCode::NotFound => tonic::Code::NotFound,
            ErrorCode::AlreadyExists => tonic::Code::AlreadyExists,
            ErrorCode::FailedPrecondition => tonic::Code::FailedPrecondition,
            ErrorCode::ResourceExhausted => tonic::Code::ResourceExhausted,
            ErrorCode::Unimplemented => tonic::Code::Unimplemented,
            ErrorCode::Unavailable => tonic::Code::Unavailable,
            ErrorCode::Internal => tonic::Code::Internal,
        }
    }
}

#[cfg(feature = "grpc")]
impl From<tonic::Code> for ErrorCode {
    /// The code of a gRPC status. The canonical codes taskwire never sends map to the
    /// nearest one: a client's cancel and a deadline to `UNAVAILABLE` (asking again may
    /// succeed), the rest to `INTERNAL`.
    fn from(code: tonic::Code) -> Self {
        use tonic::Code as C;
        match code {
            C::InvalidArgument | C::OutOfRange => Self::InvalidArgument,
            C::Unauthenticated => Self::Unauthenticated,
            C::PermissionDenied => Self::PermissionDenied,
            C::NotFound => Self::NotFound,
            C::AlreadyExists | C::Aborted => Self::AlreadyExists,
            C::FailedPrecondition => Self::FailedPrecondition,
            C::ResourceExhausted => Self::ResourceExhausted,
            C::Unimplemented => Self::Unimplemented,
            C::Unavailable | C::Cancelled | C::DeadlineExceeded => Self::Unavailable,
            C::Ok | C::Unknown | C::Internal | C::DataLoss => Self::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_wire_name() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_wire(code.as_wire()), Some(code), "{code}");
        }
        assert_eq!(ErrorCode::from_wire(""), None);
        assert_eq!(ErrorCode::from_wire("NO_SUCH_CODE"), None);
    }

    #[test]
    fn the_names_earlier_coordinators_sent_are_read() {
        assert_eq!(ErrorCode::from_wire("NotFound"), Some(ErrorCode::NotFound));
        assert_eq!(
            ErrorCode::from_wire("Unavailable"),
            Some(ErrorCode::Unavailable)
        );
        assert_eq!(
            ErrorCode::from_wire("FailedPrecondition"),
            Some(ErrorCode::FailedPrecondition)
        );
    }

    #[test]
    #[cfg(feature = "grpc")]
    fn every_code_maps_back_from_its_grpc_code_and_to_a_distinct_http_status_class() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from(tonic::Code::from(code)), code, "{code}");
            let http = code.http_status();
            assert!((400..600).contains(&http), "{code}: {http}");
            assert_eq!(
                http >= 500,
                matches!(
                    code,
                    ErrorCode::Unimplemented | ErrorCode::Unavailable | ErrorCode::Internal
                ),
                "{code}"
            );
        }
    }

    #[test]
    fn only_unavailable_is_retryable() {
        let retryable: Vec<_> = ErrorCode::ALL
            .into_iter()
            .filter(|c| c.is_retryable())
            .collect();
        assert_eq!(retryable, [ErrorCode::Unavailable]);
    }

    #[cfg(feature = "grpc")]
    #[test]
    fn the_grpc_code_and_the_wire_name_agree_for_every_code() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let grpc = tonic::Code::from(code);
            assert!(seen.insert(grpc), "{code} shares its grpc code");
            // `InvalidArgument` → `INVALID_ARGUMENT`: the wire name is the grpc name.
            let grpc_name = format!("{grpc:?}");
            let mut upper = String::new();
            for (i, ch) in grpc_name.chars().enumerate() {
                if ch.is_ascii_uppercase() && i > 0 {
                    upper.push('_');
                }
                upper.push(ch.to_ascii_uppercase());
            }
            assert_eq!(upper, code.as_wire());
        }
    }
}
