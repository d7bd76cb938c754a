//! Conversions between `prost_types::Timestamp` and `chrono::DateTime<Utc>`.

use chrono::{DateTime, Utc};

use crate::ProtocolError;

pub fn to_wire(t: DateTime<Utc>) -> prost_types::Timestamp {
    // chrono reports a leap second as nanos >= 1e9; the wire format has no room for it.
    let nanos = t.timestamp_subsec_nanos().min(999_999_999);
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(nanos).unwrap_or(999_999_999),
    }
}

pub fn from_wire(
    field: &'static str,
    t: &prost_types::Timestamp,
) -> Result<DateTime<Utc>, ProtocolError> {
    let nanos = u32::try_from(t.nanos)
        .ok()
        .filter(|n| *n < 1_000_000_000)
        .ok_or_else(|| ProtocolError::invalid(field, "nanos outside 0..=999999999"))?;
    DateTime::from_timestamp(t.seconds, nanos)
        .ok_or_else(|| ProtocolError::invalid(field, "timestamp out of range"))
}

/// Reads an optional timestamp field.
pub fn opt_from_wire(
    field: &'static str,
    t: Option<&prost_types::Timestamp>,
) -> Result<Option<DateTime<Utc>>, ProtocolError> {
    t.map(|t| from_wire(field, t)).transpose()
}
