//! Conversions between `prost_types::Timestamp` and `chrono::DateTime<Utc>`.

use chrono::{DateTime, Utc};

use crate::ProtocolError;

pub fn to_wire(t: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: t.timestamp_subsec_nanos() as i32,
    }
}

pub fn from_wire(
    field: &'static str,
    t: &prost_types::Timestamp,
) -> Result<DateTime<Utc>, ProtocolError> {
    let nanos =
        u32::try_from(t.nanos).map_err(|_| ProtocolError::invalid(field, "negative nanos"))?;
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
