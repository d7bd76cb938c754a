//! The wire contract under hostile input: decoding bytes and converting wire messages
//! never panic, every refusal names the field at fault, and valid domain values survive
//! the trip through bytes unchanged.
//!
//! - [`arbitrary`]: `wire_*` strategies, arbitrary prost messages (random ids, empty
//!   fields, unknown enum numbers, out-of-range timestamps, NaN numbers).
//! - [`valid`]: `domain_*` strategies, valid domain values.
//! - [`cases`]: specific cases, some built byte by byte (invalid UTF-8, deep nesting).

mod arbitrary;
mod cases;
mod valid;

use proptest::collection::vec;
use proptest::prelude::*;
use prost::Message;
use taskwire_definitions::agent::AgentSpec;
use taskwire_definitions::permission::PermissionLayer;
use taskwire_protocol::task::decode;
use taskwire_protocol::{ProtocolError, TaskRequest, TaskResult, pb};

use crate::arbitrary::{
    wire_agent_spec, wire_permission_layer, wire_task_request, wire_task_result,
};
use crate::valid::{
    domain_agent_spec, domain_permission_layer, domain_task_request, domain_task_result,
};

/// Fields a `TaskRequest` conversion may refuse.
const REQUEST_FIELDS: &[&str] = &[
    "task_id",
    "parent_task_id",
    "trace_id",
    "agent",
    "prompt",
    "agent_spec",
    "deadline",
    "resume_token",
    "created_at",
    "workspace_patch_ref",
    "priority",
];
/// Fields a `TaskResult` conversion may refuse.
const RESULT_FIELDS: &[&str] = &[
    "task_id",
    "trace_id",
    "status",
    "session_id",
    "title",
    "patch_ref",
];
/// Fields an `AgentSpec` conversion may refuse.
const AGENT_SPEC_FIELDS: &[&str] = &[
    "agent_spec.name",
    "agent_spec.mode",
    "agent_spec.permission.action",
    "agent_spec.max_steps",
];
/// Fields an inherited `PermissionLayer` conversion may refuse.
const LAYER_FIELDS: &[&str] = &["inherited_permission.rules.action"];

/// Checks that a refusal names one of `fields`, and says so in its message.
fn assert_names_a_field(err: &ProtocolError, fields: &[&str]) -> Result<(), TestCaseError> {
    let field = err.field();
    prop_assert!(
        field.is_some_and(|f| fields.contains(&f)),
        "error names no known field: {err:?}"
    );
    let field = field.unwrap_or_default();
    prop_assert!(err.to_string().contains(field), "{err}");
    Ok(())
}

/// Decodes `bytes` as every envelope the bus carries; none may panic, and a failure is
/// a `Decode` error naming the message.
fn decode_all(bytes: &[u8]) -> Result<(), TestCaseError> {
    fn check<M: Message + Default>(
        what: &'static str,
        bytes: &[u8],
    ) -> Result<Option<M>, TestCaseError> {
        match decode::<M>(what, bytes) {
            Ok(m) => Ok(Some(m)),
            Err(ProtocolError::Decode { what: w, .. }) => {
                prop_assert_eq!(w, what);
                Ok(None)
            }
            Err(other) => Err(TestCaseError::fail(format!(
                "not a decode error: {other:?}"
            ))),
        }
    }
    if let Some(request) = check::<pb::TaskRequest>("task request", bytes)?
        && let Err(e) = TaskRequest::try_from(request)
    {
        assert_names_a_field(&e, REQUEST_FIELDS)?;
    }
    if let Some(result) = check::<pb::TaskResult>("task result", bytes)?
        && let Err(e) = TaskResult::try_from(result)
    {
        assert_names_a_field(&e, RESULT_FIELDS)?;
    }
    check::<pb::TaskProgress>("task progress", bytes)?;
    check::<pb::ClaimRequest>("claim request", bytes)?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in vec(any::<u8>(), 0..512)) {
        decode_all(&bytes)?;
    }

    #[test]
    fn decoding_corrupted_envelopes_never_panics(
        request in domain_task_request(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = pb::TaskRequest::from(&request).encode_to_vec();
        for (at, byte) in edits {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        decode_all(&bytes)?;
        bytes.truncate(cut.index(bytes.len() + 1));
        decode_all(&bytes)?;
    }

    #[test]
    fn arbitrary_wire_requests_convert_or_name_the_bad_field(wire in wire_task_request()) {
        match TaskRequest::try_from(wire) {
            // What converted once converts again to the same value.
            Ok(request) => {
                let again = TaskRequest::try_from(pb::TaskRequest::from(&request));
                prop_assert_eq!(again.as_ref(), Ok(&request));
            }
            Err(e) => assert_names_a_field(&e, REQUEST_FIELDS)?,
        }
    }

    #[test]
    fn arbitrary_wire_results_convert_or_name_the_bad_field(wire in wire_task_result()) {
        match TaskResult::try_from(wire) {
            Ok(result) => {
                prop_assert!(result.status.is_terminal());
                let again = TaskResult::try_from(pb::TaskResult::from(&result));
                prop_assert_eq!(again.as_ref(), Ok(&result));
            }
            Err(e) => assert_names_a_field(&e, RESULT_FIELDS)?,
        }
    }

    #[test]
    fn arbitrary_wire_agent_specs_convert_or_name_the_bad_field(wire in wire_agent_spec()) {
        match AgentSpec::try_from(&wire) {
            Ok(spec) => {
                let again = AgentSpec::try_from(&pb::AgentSpec::from(&spec));
                prop_assert_eq!(again.as_ref(), Ok(&spec));
            }
            Err(e) => assert_names_a_field(&e, AGENT_SPEC_FIELDS)?,
        }
    }

    #[test]
    fn arbitrary_wire_permission_layers_convert_or_name_the_bad_field(
        wire in wire_permission_layer(),
    ) {
        match PermissionLayer::try_from(&wire) {
            Ok(layer) => {
                prop_assert_eq!(layer.rules.len(), wire.rules.len(), "no rule is dropped");
                let again = PermissionLayer::try_from(&pb::PermissionLayer::from(&layer));
                prop_assert_eq!(again.as_ref(), Ok(&layer));
            }
            Err(e) => assert_names_a_field(&e, LAYER_FIELDS)?,
        }
    }

    #[test]
    fn valid_permission_layers_round_trip_through_bytes(layer in domain_permission_layer()) {
        let bytes = pb::PermissionLayer::from(&layer).encode_to_vec();
        let wire = decode::<pb::PermissionLayer>("permission layer", &bytes)
            .expect("own bytes decode");
        prop_assert_eq!(PermissionLayer::try_from(&wire), Ok(layer));
    }

    #[test]
    fn inherited_layers_survive_the_request_round_trip(request in domain_task_request()) {
        let bytes = pb::TaskRequest::from(&request).encode_to_vec();
        let wire = decode::<pb::TaskRequest>("task request", &bytes).expect("own bytes decode");
        let back = TaskRequest::try_from(wire).expect("own request converts");
        prop_assert_eq!(back.inherited_permission.len(), request.inherited_permission.len());
        for (got, sent) in back.inherited_permission.iter().zip(&request.inherited_permission) {
            prop_assert_eq!(PermissionLayer::try_from(got), PermissionLayer::try_from(sent));
        }
    }

    #[test]
    fn valid_requests_round_trip_through_bytes(request in domain_task_request()) {
        let bytes = pb::TaskRequest::from(&request).encode_to_vec();
        let wire = decode::<pb::TaskRequest>("task request", &bytes).expect("own bytes decode");
        prop_assert_eq!(TaskRequest::try_from(wire), Ok(request));
    }

    #[test]
    fn valid_requests_round_trip_through_their_dispatched_form(request in domain_task_request()) {
        let taskwire_protocol::task::Dispatch { wire, digest, .. } = request.to_dispatch();
        let bytes = wire.encode_to_vec();
        let wire = decode::<pb::TaskRequest>("task request", &bytes).expect("own bytes decode");
        prop_assert!(wire.agent_spec.is_none());
        prop_assert!(wire.subagents.is_empty());
        prop_assert_eq!(request.spec_bundle().digest(), digest);
        let back = TaskRequest::from_dispatched(wire, &request.spec_bundle());
        prop_assert_eq!(back, Ok(request));
    }

    #[test]
    fn valid_results_round_trip_through_bytes(result in domain_task_result()) {
        let bytes = pb::TaskResult::from(&result).encode_to_vec();
        let wire = decode::<pb::TaskResult>("task result", &bytes).expect("own bytes decode");
        prop_assert_eq!(TaskResult::try_from(wire), Ok(result));
    }

    #[test]
    fn valid_agent_specs_round_trip_through_bytes(spec in domain_agent_spec()) {
        let bytes = pb::AgentSpec::from(&spec).encode_to_vec();
        let wire = decode::<pb::AgentSpec>("agent spec", &bytes).expect("own bytes decode");
        prop_assert_eq!(AgentSpec::try_from(&wire), Ok(spec));
    }

    #[test]
    fn wire_timestamps_stay_within_the_protobuf_range(request in domain_task_request()) {
        let wire = pb::TaskRequest::from(&request);
        for t in wire.created_at.iter().chain(wire.deadline.iter()) {
            prop_assert!((0..1_000_000_000).contains(&t.nanos), "{t:?}");
            prop_assert!((-62_135_596_800..=253_402_300_799).contains(&t.seconds), "{t:?}");
        }
    }
}
