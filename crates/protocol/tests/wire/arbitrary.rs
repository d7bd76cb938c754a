//! Arbitrary wire messages: random ids in several spellings, empty fields, unknown enum
//! numbers, timestamps outside any date, NaN numbers.

use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use prost_types::value::Kind;
use taskwire_protocol::pb;

pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), ".{0,12}"]
}

/// Text for a UUID field: valid in several spellings, empty, or junk.
pub fn wire_uuid() -> BoxedStrategy<String> {
    prop_oneof![
        Just(String::new()),
        any::<u128>().prop_map(|n| uuid::Uuid::from_u128(n).to_string()),
        any::<u128>().prop_map(|n| uuid::Uuid::from_u128(n).simple().to_string()),
        any::<u128>().prop_map(|n| uuid::Uuid::from_u128(n).urn().to_string()),
        "[0-9a-fA-F-]{0,40}",
        ".{0,40}",
    ]
    .boxed()
}

/// Text for a trace id: valid, all zeros, upper case, the wrong length, or junk.
pub fn wire_trace_id() -> BoxedStrategy<String> {
    prop_oneof![
        Just(String::new()),
        Just("0".repeat(32)),
        any::<u128>().prop_map(|n| format!("{n:032x}")),
        any::<u128>().prop_map(|n| format!("{n:032X}")),
        "[0-9a-f+-]{0,40}",
        ".{0,40}",
    ]
    .boxed()
}

/// Any timestamp, most of them outside what a date can hold, some with negative nanos.
pub fn wire_timestamp() -> BoxedStrategy<prost_types::Timestamp> {
    prop_oneof![
        (any::<i64>(), any::<i32>()),
        (-62_135_596_800i64..253_402_300_800, 0i32..1_000_000_000),
        (-62_135_596_800i64..253_402_300_800, i32::MIN..0),
        (Just(59i64), 1_000_000_000i32..2_000_000_000),
    ]
    .prop_map(|(seconds, nanos)| prost_types::Timestamp { seconds, nanos })
    .boxed()
}

/// An enum number: mostly known values, sometimes anything.
pub fn wire_enum() -> BoxedStrategy<i32> {
    prop_oneof![3 => -1i32..12, 1 => any::<i32>()].boxed()
}

pub fn wire_value() -> BoxedStrategy<prost_types::Value> {
    let leaf = prop_oneof![
        Just(None),
        any::<i32>().prop_map(|n| Some(Kind::NullValue(n))),
        any::<bool>().prop_map(|b| Some(Kind::BoolValue(b))),
        any::<f64>().prop_map(|n| Some(Kind::NumberValue(n))),
        text().prop_map(|s| Some(Kind::StringValue(s))),
    ]
    .prop_map(|kind| prost_types::Value { kind });
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(|values| prost_types::Value {
                kind: Some(Kind::ListValue(prost_types::ListValue { values })),
            }),
            btree_map(text(), inner, 0..4).prop_map(|fields| prost_types::Value {
                kind: Some(Kind::StructValue(prost_types::Struct { fields })),
            }),
        ]
    })
    .boxed()
}

pub fn wire_struct() -> BoxedStrategy<prost_types::Struct> {
    btree_map(text(), wire_value(), 0..4)
        .prop_map(|fields| prost_types::Struct { fields })
        .boxed()
}

pub fn wire_rule() -> BoxedStrategy<pb::PermissionRule> {
    (text(), text(), wire_enum())
        .prop_map(|(permission, pattern, action)| pb::PermissionRule {
            permission,
            pattern,
            action,
        })
        .boxed()
}

pub fn wire_permission_layer() -> BoxedStrategy<pb::PermissionLayer> {
    (text(), vec(wire_rule(), 0..3))
        .prop_map(|(agent, rules)| pb::PermissionLayer { agent, rules })
        .boxed()
}

pub fn wire_agent_spec() -> BoxedStrategy<pb::AgentSpec> {
    (
        (
            prop_oneof![Just("explore".to_owned()), "[a-z0-9_-]{1,70}", text()],
            text(),
            wire_enum(),
            any::<bool>(),
            text(),
            vec(text(), 0..3),
        ),
        (
            vec(wire_rule(), 0..3),
            prop_oneof![Just(0u32), any::<u32>()],
            option::of(text()),
            option::of(any::<f32>()),
            option::of(any::<f32>()),
            option::of(text()),
        ),
    )
        .prop_map(
            |(
                (name, description, mode, hidden, prompt, tools),
                (permission, max_steps, model, temperature, top_p, color),
            )| pb::AgentSpec {
                name,
                description,
                mode,
                hidden,
                prompt,
                tools,
                permission,
                max_steps,
                model,
                temperature,
                top_p,
                color,
                mcp: vec![pb::McpServer {
                    name: "everything".into(),
                    transport: Some(pb::mcp_server::Transport::Local(pb::McpLocal {
                        command: vec!["node".into(), "server.js".into()],
                    })),
                    environment: vec![pb::KeyValue {
                        key: "K".into(),
                        value: "{env:V}".into(),
                    }],
                    timeout_ms: 5000,
                    hosts: Vec::new(),
                }],
                reasoning_effort: None,
                small_model: None,
                thinking_budget: None,
                internal_agents: Vec::new(),
                disabled_internal_agents: Vec::new(),
                model_tier: if hidden {
                    "small".into()
                } else {
                    String::new()
                },
                skills: Vec::new(),
                hooks: vec![pb::Hook {
                    event: "PreToolUse".into(),
                    matcher: "bash".into(),
                    action: Some(pb::hook::Action::Command("./check.sh".into())),
                    timeout_secs: 0,
                    source: "hooks.json".into(),
                }],
            },
        )
        .boxed()
}

pub fn wire_task_request() -> BoxedStrategy<pb::TaskRequest> {
    let ids = (wire_uuid(), wire_uuid(), wire_trace_id(), wire_uuid());
    let texts = (
        text(),
        text(),
        prop_oneof![Just("explore".to_owned()), text()],
        text(),
        text(),
        text(),
    );
    let payload = (
        option::of(wire_struct()),
        vec(
            (text(), text(), text()).prop_map(|(r#type, id, uri)| pb::ContextRef {
                r#type,
                id,
                uri,
            }),
            0..3,
        ),
        vec(
            (text(), text(), text(), vec(any::<u8>(), 0..16)).prop_map(
                |(name, media_type, uri, data)| pb::Attachment {
                    name,
                    media_type,
                    uri,
                    data,
                },
            ),
            0..3,
        ),
        vec(text(), 0..3),
        text(),
    );
    let times = (option::of(wire_timestamp()), option::of(wire_timestamp()));
    let numbers = (
        option::of(text()),
        option::of(any::<u32>()),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
    );
    let spec = (
        option::of(wire_agent_spec()),
        // Most specs should carry the request's agent name, so that conversions get past
        // that check and reach the fields behind it.
        prop::bool::weighted(0.8),
        option::of((text(), text(), text(), text())),
        vec((text(), text()), 0..3),
        text(),
        any::<bool>(),
        vec(wire_permission_layer(), 0..3),
        (text(), option::of(wire_patch_ref())),
    );
    (ids, texts, payload, times, numbers, spec)
        .prop_map(
            |(
                (task_id, parent_task_id, trace_id, resume_token),
                (tenant, sender, agent, intent, prompt, command),
                (input, context_refs, attachments, auth_scope, idempotency_key),
                (deadline, created_at),
                (model, max_steps, depth, attempt, max_attempts, max_depth),
                (
                    agent_spec,
                    same_name,
                    subtask,
                    subagents,
                    parent_model,
                    new_session,
                    inherited_permission,
                    (workspace_patch, workspace_patch_ref),
                ),
            )| {
                let agent_spec = agent_spec.map(|mut s| {
                    if same_name {
                        s.name = agent.clone();
                    }
                    s
                });
                pb::TaskRequest {
                    task_id,
                    parent_task_id,
                    trace_id,
                    tenant,
                    sender,
                    agent,
                    intent,
                    prompt,
                    input,
                    context_refs,
                    attachments,
                    auth_scope,
                    idempotency_key,
                    deadline,
                    resume_token,
                    model,
                    max_steps,
                    command,
                    depth,
                    attempt,
                    agent_spec,
                    agent_spec_digest: Vec::new(),
                    created_at,
                    max_attempts,
                    parent_model,
                    subtask: subtask.map(|(agent, description, prompt, command)| pb::Subtask {
                        agent,
                        description,
                        prompt,
                        command,
                    }),
                    max_depth,
                    subagents: subagents
                        .into_iter()
                        .map(|(name, description)| pb::AgentRef { name, description })
                        .collect(),
                    new_session,
                    inherited_permission,
                    workspace_patch,
                    max_cost_usd: None,
                    max_tokens: None,
                    spent_elsewhere: None,
                    output_schema: String::new(),
                    expand_shell: false,
                    // Never validated: any text is carried as it is.
                    traceparent: String::new(),
                    workspace_patch_ref,
                    priority: Default::default(),
                    fork: None,
                }
            },
        )
        .boxed()
}

pub fn wire_task_result() -> BoxedStrategy<pb::TaskResult> {
    let head = (
        wire_uuid(),
        wire_trace_id(),
        any::<u32>(),
        any::<u64>(),
        wire_enum(),
        option::of((text(), option::of(wire_struct()))),
    );
    let tool_call =
        (text(), text(), text(), wire_enum()).prop_map(|(call_id, tool, title, state)| {
            pb::ToolCallSummary {
                call_id,
                tool,
                title,
                state,
            }
        });
    let error =
        (text(), text(), any::<bool>()).prop_map(|(code, message, retryable)| pb::TaskError {
            code,
            message,
            retryable,
        });
    let tail = (
        vec(tool_call, 0..3),
        vec(error, 0..3),
        option::of((any::<u64>(), any::<u64>())),
        option::of((any::<u64>(), any::<u32>())),
        wire_uuid(),
        text(),
        any::<bool>(),
        prop_oneof![text(), "[a-z ]{70,90}", Just("two\nlines".to_owned())],
        (text(), option::of(wire_patch_ref())),
    );
    (head, tail)
        .prop_map(
            |(
                (task_id, trace_id, attempt, claim_epoch, status, output),
                (
                    tool_calls,
                    errors,
                    usage,
                    metrics,
                    session_id,
                    worker_id,
                    retry,
                    title,
                    (patch, patch_ref),
                ),
            )| pb::TaskResult {
                task_id,
                trace_id,
                attempt,
                claim_epoch,
                status,
                output: output.map(|(text, structured)| pb::Output { text, structured }),
                tool_calls,
                attachments: Vec::new(),
                patch,
                errors,
                provenance: Vec::new(),
                usage: usage.map(|(input_tokens, output_tokens)| pb::Usage {
                    input_tokens,
                    output_tokens,
                    ..Default::default()
                }),
                own_usage: None,
                metrics: metrics.map(|(latency_ms, steps)| pb::Metrics { latency_ms, steps }),
                session_id,
                worker_id,
                retry_scheduled: retry,
                transcript_json: Vec::new(),
                title,
                traceparent: String::new(),
                patch_ref,
            },
        )
        .boxed()
}

/// Any patch reference: names, digests and sizes good and bad.
pub fn wire_patch_ref() -> impl Strategy<Value = pb::PatchRef> {
    (
        text(),
        prop_oneof![text(), "[0-9a-f]{64}"],
        prop_oneof![any::<u64>(), 0..1024u64],
    )
        .prop_map(|(name, sha256, size)| pb::PatchRef { name, sha256, size })
}
