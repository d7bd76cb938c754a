//! Newtype identifiers. One macro makes them all, so they parse, print and serialise
//! the same way and can never be mixed up with each other or with a bare `String`.

use std::fmt;
use std::str::FromStr;

use crate::ProtocolError;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident, $field:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(uuid::Uuid);

        impl $name {
            /// A new, time-ordered (UUIDv7) identifier.
            pub fn generate() -> Self {
                Self(uuid::Uuid::now_v7())
            }
            pub fn from_uuid(id: uuid::Uuid) -> Self {
                Self(id)
            }
            pub fn as_uuid(&self) -> uuid::Uuid {
                self.0
            }
            /// Parses a wire field, naming the field in the error.
            pub fn parse_field(field: &'static str, s: &str) -> Result<Self, ProtocolError> {
                if s.is_empty() {
                    return Err(ProtocolError::Missing(field));
                }
                s.parse().map_err(|_| ProtocolError::invalid(field, format!("{s:?} is not a valid id")))
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                uuid::Uuid::parse_str(s).map(Self)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }
    };
}

uuid_id!(
    /// Identifies one task (one node of a task tree) across all its attempts.
    TaskId,
    "task_id"
);
uuid_id!(
    /// Identifies an agent session (its transcript); the `resume_token` of a task.
    SessionId,
    "session_id"
);

/// A W3C trace id: 32 lowercase hex digits, not all zero.
#[derive(Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TraceId(u128);

impl TraceId {
    /// A new random trace id (taken from a fresh UUIDv4's bits).
    pub fn generate() -> Self {
        Self(uuid::Uuid::new_v4().as_u128())
    }

    /// Parses a wire field, naming the field in the error.
    pub fn parse_field(field: &'static str, s: &str) -> Result<Self, ProtocolError> {
        if s.is_empty() {
            return Err(ProtocolError::Missing(field));
        }
        s.parse()
            .map_err(|reason: String| ProtocolError::invalid(field, reason))
    }

    /// The id as a number (its 32 hex digits, read big-endian).
    pub fn as_u128(&self) -> u128 {
        self.0
    }

    /// The id of a number; `None` for zero, which is not a valid trace id.
    pub fn from_u128(v: u128) -> Option<Self> {
        (v != 0).then_some(Self(v))
    }

    /// The `traceparent` header value for a root span of this trace.
    pub fn traceparent(&self, span_id: u64) -> String {
        format!("00-{self}-{span_id:016x}-01")
    }
}

impl FromStr for TraceId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() != 32
            || !s
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            return Err(format!("{s:?} is not 32 lowercase hex digits"));
        }
        let v = u128::from_str_radix(s, 16).map_err(|e| e.to_string())?;
        if v == 0 {
            return Err("an all-zero trace id is invalid".to_owned());
        }
        Ok(Self(v))
    }
}

impl TryFrom<String> for TraceId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<TraceId> for String {
    fn from(t: TraceId) -> String {
        t.to_string()
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceId({self})")
    }
}

/// Names one worker process (host name + random suffix by default).
#[derive(Clone, PartialEq, Eq, Hash, Debug, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct WorkerId(String);

impl WorkerId {
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }
    /// `worker-<short random>`, unique enough to tell workers apart in logs.
    pub fn generate() -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        Self(format!("worker-{}", &id[..12]))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The fencing token of one claim: every claim of a task increments it, and a result
/// is recorded only if it carries the task's current epoch.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct ClaimEpoch(pub u64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_id_round_trips_through_text() {
        let id = TaskId::generate();
        assert_eq!(id.to_string().parse::<TaskId>().expect("parses"), id);
    }

    #[test]
    fn task_id_parse_error_names_the_field() {
        let err = TaskId::parse_field("parent_task_id", "nope").expect_err("invalid");
        assert_eq!(err.field(), Some("parent_task_id"));
        assert_eq!(
            TaskId::parse_field("task_id", ""),
            Err(ProtocolError::Missing("task_id"))
        );
    }

    #[test]
    fn trace_id_is_32_lowercase_hex() {
        let t = TraceId::generate();
        let s = t.to_string();
        assert_eq!(s.len(), 32);
        assert_eq!(s.parse::<TraceId>().expect("parses"), t);
        assert!(
            "ABCDEF00000000000000000000000000"
                .parse::<TraceId>()
                .is_err()
        );
        assert!(
            "00000000000000000000000000000000"
                .parse::<TraceId>()
                .is_err()
        );
        assert!("abc".parse::<TraceId>().is_err());
    }

    #[test]
    fn traceparent_has_w3c_shape() {
        let t: TraceId = "4bf92f3577b34da6a3ce929d0e0e4736".parse().expect("valid");
        assert_eq!(
            t.traceparent(0x00f067aa0ba902b7),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
    }
}
