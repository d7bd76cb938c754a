//! The one codec for everything on the bus: protobuf envelopes (`taskwire.v1`) to and
//! from domain values.
//!
//! An [`Envelope`] names itself and says how it converts; [`encode`] and [`decode`]
//! are the only places bytes meet prost. A decode error is a [`CodecError`] naming the
//! envelope and, when one field is at fault, the field:
//! `malformed claim request: field `task_id` is invalid: ...`.

use bytes::Bytes;
use prost::Message as _;
use taskwire_protocol::{ProtocolError, TaskRequest, TaskResult, pb};

use crate::error::CodecError;

/// A domain value that travels on the bus as a protobuf message.
pub trait Envelope: Sized {
    /// What it is called in errors and logs (`task request`).
    const NAME: &'static str;
    /// Its wire form.
    type Wire: prost::Message + Default;

    fn to_wire(&self) -> Self::Wire;
    fn from_wire(wire: Self::Wire) -> Result<Self, ProtocolError>;
}

/// The bytes of `value`.
pub fn encode<E: Envelope>(value: &E) -> Bytes {
    value.to_wire().encode_to_vec().into()
}

/// The value in `bytes`, or why they are not one.
pub fn decode<E: Envelope>(bytes: &[u8]) -> Result<E, CodecError> {
    let wire = decode_wire::<E::Wire>(E::NAME, bytes)?;
    E::from_wire(wire).map_err(|e| CodecError::new(E::NAME, e))
}

/// The protobuf message in `bytes`, for envelopes read as they are on the wire.
pub fn decode_wire<M: prost::Message + Default>(
    envelope: &'static str,
    bytes: &[u8],
) -> Result<M, CodecError> {
    M::decode(bytes).map_err(|e| {
        CodecError::new(
            envelope,
            ProtocolError::Decode {
                what: envelope,
                reason: e.to_string(),
            },
        )
    })
}

impl Envelope for TaskRequest {
    const NAME: &'static str = "task request";
    type Wire = pb::TaskRequest;

    fn to_wire(&self) -> pb::TaskRequest {
        pb::TaskRequest::from(self)
    }
    fn from_wire(wire: pb::TaskRequest) -> Result<Self, ProtocolError> {
        TaskRequest::try_from(wire)
    }
}

impl Envelope for TaskResult {
    const NAME: &'static str = "task result";
    type Wire = pb::TaskResult;

    fn to_wire(&self) -> pb::TaskResult {
        pb::TaskResult::from(self)
    }
    fn from_wire(wire: pb::TaskResult) -> Result<Self, ProtocolError> {
        TaskResult::try_from(wire)
    }
}

/// Progress events are built from session events by the worker and read by watchers
/// as they are (they are relayed, not interpreted), so their domain form is the wire.
impl Envelope for pb::TaskProgress {
    const NAME: &'static str = "task progress";
    type Wire = pb::TaskProgress;

    fn to_wire(&self) -> pb::TaskProgress {
        self.clone()
    }
    fn from_wire(wire: pb::TaskProgress) -> Result<Self, ProtocolError> {
        Ok(wire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::ClaimRequest;
    use taskwire_protocol::{TaskId, WorkerId};

    #[test]
    fn a_claim_request_round_trips() {
        let claim = ClaimRequest {
            task: TaskId::generate(),
            worker: WorkerId::new("w1"),
            delivery: 3,
        };
        assert_eq!(decode::<ClaimRequest>(&encode(&claim)), Ok(claim));
    }

    #[test]
    fn a_decode_error_names_the_envelope_and_the_field() {
        let bad = pb::ClaimRequest {
            task_id: "not-a-uuid".into(),
            worker_id: "w1".into(),
            delivery: 1,
        }
        .encode_to_vec();
        let e = decode::<ClaimRequest>(&bad).expect_err("a bad task id");
        assert_eq!(e.envelope, "claim request");
        assert_eq!(e.field, Some("task_id"));
        assert!(
            e.to_string()
                .starts_with("malformed claim request: field `task_id`"),
            "{e}"
        );

        let e = decode::<ClaimRequest>(b"\xff\xff\xff").expect_err("not protobuf");
        assert_eq!((e.envelope, e.field), ("claim request", None));
    }
}
