//! Specific cases: unknown enum numbers, timestamps outside a date, missing fields,
//! invalid UTF-8 and nesting built byte by byte.

use prost::Message;
use taskwire_definitions::agent::{AgentMode, AgentSpec};
use taskwire_definitions::permission::{PermissionAction, PermissionLayer, PermissionRule};
use taskwire_protocol::task::decode;
use taskwire_protocol::{ProtocolError, TaskId, TaskRequest, TaskResult, TraceId, pb};

fn valid_request() -> pb::TaskRequest {
    let spec = AgentSpec {
        name: "explore".parse().expect("valid name"),
        description: "searches code".into(),
        mode: AgentMode::Subagent,
        hidden: false,
        prompt: "you search".into(),
        tools: vec!["read".into()],
        permission: vec![PermissionRule {
            permission: "read".into(),
            pattern: "*".into(),
            action: PermissionAction::Allow,
        }],
        max_steps: 4,
        model: None,
        model_tier: taskwire_definitions::agent::ModelTier::Small,
        temperature: None,
        top_p: None,
        color: None,
        reasoning_effort: None,
        small_model: None,
        thinking_budget: None,
        hooks: Vec::new(),
    };
    pb::TaskRequest {
        task_id: TaskId::generate().to_string(),
        trace_id: TraceId::generate().to_string(),
        agent: "explore".into(),
        prompt: "find it".into(),
        agent_spec: Some(pb::AgentSpec::from(&spec)),
        created_at: Some(prost_types::Timestamp {
            seconds: 1_900_000_000,
            nanos: 0,
        }),
        ..Default::default()
    }
}

fn valid_result() -> pb::TaskResult {
    pb::TaskResult {
        task_id: TaskId::generate().to_string(),
        trace_id: TraceId::generate().to_string(),
        status: pb::TaskStatus::Completed as i32,
        ..Default::default()
    }
}

#[test]
fn the_valid_samples_convert() {
    TaskRequest::try_from(valid_request()).expect("valid request");
    TaskResult::try_from(valid_result()).expect("valid result");
    let spec = valid_request().agent_spec.expect("set");
    AgentSpec::try_from(&spec).expect("valid spec");
}

#[test]
fn an_unknown_result_status_is_an_error_naming_status() {
    for status in [0, 99, -1, i32::MAX] {
        let wire = pb::TaskResult {
            status,
            ..valid_result()
        };
        assert_eq!(
            TaskResult::try_from(wire),
            Err(ProtocolError::UnknownEnum("status")),
            "status {status}"
        );
    }
}

#[test]
fn an_unknown_agent_mode_is_an_error_naming_the_mode() {
    let mut spec = valid_request().agent_spec.expect("set");
    for mode in [0, 42, -3] {
        spec.mode = mode;
        let err = AgentSpec::try_from(&spec).expect_err("unknown mode");
        assert_eq!(
            err,
            ProtocolError::UnknownEnum("agent_spec.mode"),
            "mode {mode}"
        );
        assert!(err.to_string().contains("agent_spec.mode"), "{err}");
    }
}

#[test]
fn an_unknown_permission_action_is_an_error_naming_the_action() {
    let mut spec = valid_request().agent_spec.expect("set");
    for action in [0, 7, i32::MIN] {
        spec.permission[0].action = action;
        let err = AgentSpec::try_from(&spec).expect_err("unknown action");
        assert_eq!(
            err,
            ProtocolError::UnknownEnum("agent_spec.permission.action"),
            "action {action}"
        );
    }
}

#[test]
fn an_unknown_inherited_action_is_an_error_naming_the_field() {
    let layer = pb::PermissionLayer {
        agent: "plan".into(),
        rules: vec![pb::PermissionRule {
            permission: "edit".into(),
            pattern: "*".into(),
            action: pb::PermissionAction::Deny as i32,
        }],
    };
    let parsed = PermissionLayer::try_from(&layer).expect("a valid layer");
    assert_eq!(parsed.rules[0].action, PermissionAction::Deny);
    for action in [0, 7, i32::MIN] {
        let mut bad = layer.clone();
        bad.rules[0].action = action;
        let err = PermissionLayer::try_from(&bad).expect_err("unknown action");
        assert_eq!(
            err,
            ProtocolError::UnknownEnum("inherited_permission.rules.action"),
            "action {action}"
        );
        assert!(err.to_string().contains("inherited_permission"), "{err}");
    }
}

#[test]
fn timestamps_outside_a_date_are_errors_naming_the_field() {
    let cases = [
        ("negative nanos", 1_900_000_000, -1),
        ("seconds too large", i64::MAX, 0),
        ("seconds too small", i64::MIN, 0),
        ("nanos beyond a second", 1_900_000_000, 1_000_000_000),
    ];
    for (case, seconds, nanos) in cases {
        let created_at = prost_types::Timestamp { seconds, nanos };
        let wire = pb::TaskRequest {
            created_at: Some(created_at),
            ..valid_request()
        };
        let err = TaskRequest::try_from(wire).expect_err(case);
        assert_eq!(err.field(), Some("created_at"), "{case}: {err}");
        let wire = pb::TaskRequest {
            deadline: Some(created_at),
            ..valid_request()
        };
        let err = TaskRequest::try_from(wire).expect_err(case);
        assert_eq!(err.field(), Some("deadline"), "{case}: {err}");
    }
}

/// Protobuf's `Timestamp` allows nanos in `0..=999_999_999` only; chrono reads
/// `nanos >= 1e9` at second 59 of a minute as a leap second.
#[test]
fn leap_second_nanos_are_refused_like_any_nanos_beyond_a_second() {
    let wire = pb::TaskRequest {
        created_at: Some(prost_types::Timestamp {
            seconds: 59,
            nanos: 1_500_000_000,
        }),
        ..valid_request()
    };
    let err = TaskRequest::try_from(wire).expect_err("nanos beyond a second");
    assert_eq!(err.field(), Some("created_at"), "{err}");
}

#[test]
fn a_missing_required_field_is_named() {
    type Clear = fn(&mut pb::TaskRequest);
    let cases: [(&str, Clear); 6] = [
        ("agent", |r| r.agent.clear()),
        ("task_id", |r| r.task_id.clear()),
        ("trace_id", |r| r.trace_id.clear()),
        ("prompt", |r| r.prompt.clear()),
        ("agent_spec", |r| r.agent_spec = None),
        ("created_at", |r| r.created_at = None),
    ];
    for (field, clear) in cases {
        let mut wire = valid_request();
        clear(&mut wire);
        assert_eq!(
            TaskRequest::try_from(wire),
            Err(ProtocolError::Missing(field))
        );
    }
}

/// A protobuf field holding `payload` as length-delimited bytes.
fn length_delimited(field: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::encode_key(field, prost::encoding::WireType::LengthDelimited, &mut out);
    prost::encoding::encode_varint(payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

const NOT_UTF8: &[u8] = &[0xff, 0xfe];

#[test]
fn invalid_utf8_in_a_string_field_is_a_decode_error() {
    // Field 1 is `task_id` in all four messages; written by hand: tag 0x0a, length 2.
    let bytes = length_delimited(1, NOT_UTF8);
    assert_eq!(bytes, [0x0a, 0x02, 0xff, 0xfe]);
    let errors = [
        decode::<pb::TaskRequest>("task request", &bytes).map(drop),
        decode::<pb::TaskResult>("task result", &bytes).map(drop),
        decode::<pb::TaskProgress>("task progress", &bytes).map(drop),
        decode::<pb::ClaimRequest>("claim request", &bytes).map(drop),
    ];
    for err in errors {
        let err = err.expect_err("invalid utf-8");
        assert!(matches!(err, ProtocolError::Decode { .. }), "{err:?}");
        assert!(err.to_string().to_lowercase().contains("utf-8"), "{err}");
    }
}

#[test]
fn invalid_utf8_in_a_nested_or_repeated_string_is_a_decode_error() {
    let valid = valid_request().encode_to_vec();
    // `agent_spec` (21) whose `name` (1) is not UTF-8, appended to a valid request: the
    // later occurrence of a message field is merged into the earlier one.
    let mut nested = valid.clone();
    nested.extend(length_delimited(21, &length_delimited(1, NOT_UTF8)));
    // One more `auth_scope` (12) entry that is not UTF-8.
    let mut repeated = valid.clone();
    repeated.extend(length_delimited(12, NOT_UTF8));
    // A `google.protobuf.Struct` key (input = 9, fields = 1, map key = 1).
    let mut struct_key = valid;
    struct_key.extend(length_delimited(
        9,
        &length_delimited(1, &length_delimited(1, NOT_UTF8)),
    ));
    for (case, bytes) in [
        ("nested", nested),
        ("repeated", repeated),
        ("struct key", struct_key),
    ] {
        let err = decode::<pb::TaskRequest>("task request", &bytes).expect_err(case);
        assert!(
            matches!(err, ProtocolError::Decode { .. }),
            "{case}: {err:?}"
        );
    }
}

/// A `google.protobuf.Struct` nested `depth` times: `{"a": {"a": ...}}`.
fn nested_struct(depth: usize) -> Vec<u8> {
    let mut inner = Vec::new();
    for _ in 0..depth {
        // Value { struct_value (5): inner }
        let value = length_delimited(5, &inner);
        // map entry { key (1): "a", value (2): value }
        let mut entry = length_delimited(1, b"a");
        entry.extend(length_delimited(2, &value));
        // Struct { fields (1): entry }
        inner = length_delimited(1, &entry);
    }
    inner
}

#[test]
fn deeply_nested_input_is_a_decode_error_not_a_stack_overflow() {
    let mut bytes = valid_request().encode_to_vec();
    bytes.extend(length_delimited(9, &nested_struct(5_000)));
    let err = decode::<pb::TaskRequest>("task request", &bytes).expect_err("too deep");
    assert!(matches!(err, ProtocolError::Decode { .. }), "{err:?}");

    // Nesting within prost's limit decodes and converts.
    let mut bytes = valid_request().encode_to_vec();
    bytes.extend(length_delimited(9, &nested_struct(20)));
    let wire = decode::<pb::TaskRequest>("task request", &bytes).expect("shallow enough");
    let request = TaskRequest::try_from(wire).expect("valid");
    assert!(request.input.is_some());
}

#[test]
fn unknown_fields_are_skipped() {
    // A newer sender's field 99 (varint) must not break an older reader.
    let mut bytes = valid_request().encode_to_vec();
    prost::encoding::encode_key(99, prost::encoding::WireType::Varint, &mut bytes);
    prost::encoding::encode_varint(7, &mut bytes);
    let wire = decode::<pb::TaskRequest>("task request", &bytes).expect("unknown field skipped");
    TaskRequest::try_from(wire).expect("valid");
}
