//! Valid domain values, for round trips.

use chrono::{DateTime, Utc};
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use taskwire_definitions::agent::{AgentMode, AgentSpec};
use taskwire_definitions::permission::{PermissionAction, PermissionLayer, PermissionRule};
use taskwire_protocol::{
    Attachment, ClaimEpoch, ContextRef, MAX_PATCH_BYTES, PatchRef, Provenance, SessionId, Subtask,
    TaskError, TaskId, TaskRequest, TaskResult, TaskStatus, ToolCallSummary, TraceId, Usage,
    WorkerId, pb,
};

use crate::arbitrary::text;

pub fn domain_task_id() -> impl Strategy<Value = TaskId> {
    any::<u128>().prop_map(|n| TaskId::from_uuid(uuid::Uuid::from_u128(n)))
}

pub fn domain_session_id() -> impl Strategy<Value = SessionId> {
    any::<u128>().prop_map(|n| SessionId::from_uuid(uuid::Uuid::from_u128(n)))
}

pub fn domain_trace_id() -> impl Strategy<Value = TraceId> {
    (1..=u128::MAX).prop_map(|n| {
        format!("{n:032x}")
            .parse()
            .expect("32 lowercase hex digits")
    })
}

/// Any instant of years 1 to 9999, to the nanosecond.
pub fn domain_time() -> impl Strategy<Value = DateTime<Utc>> {
    (-62_135_596_800i64..253_402_300_800, 0u32..1_000_000_000)
        .prop_map(|(s, n)| DateTime::from_timestamp(s, n).expect("within chrono's range"))
}

pub fn non_empty() -> impl Strategy<Value = String> {
    ".{1,12}"
}

/// JSON as the wire carries it: numbers are doubles (finite), objects at the top.
pub fn domain_json_object() -> BoxedStrategy<serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-1e300f64..1e300).prop_map(|n| serde_json::Number::from_f64(n)
            .map(Value::Number)
            .expect("finite")),
        text().prop_map(Value::String),
    ];
    let value = leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(text(), inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    btree_map(text(), value, 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
        .boxed()
}

pub fn finite_f32() -> impl Strategy<Value = f32> {
    -1e6f32..1e6
}

pub fn domain_rule() -> BoxedStrategy<PermissionRule> {
    (
        text(),
        text(),
        prop::sample::select(vec![
            PermissionAction::Allow,
            PermissionAction::Ask,
            PermissionAction::Deny,
        ]),
    )
        .prop_map(|(permission, pattern, action)| PermissionRule {
            permission,
            pattern,
            action,
        })
        .boxed()
}

pub fn domain_permission_layer() -> BoxedStrategy<PermissionLayer> {
    (text(), vec(domain_rule(), 0..3))
        .prop_map(|(agent, rules)| PermissionLayer { agent, rules })
        .boxed()
}

pub fn domain_agent_spec() -> BoxedStrategy<AgentSpec> {
    (
        (
            "[a-z0-9_-]{1,64}",
            text(),
            prop::sample::select(vec![
                AgentMode::Primary,
                AgentMode::Subagent,
                AgentMode::All,
            ]),
            any::<bool>(),
            text(),
            vec(text(), 0..3),
        ),
        (
            vec(domain_rule(), 0..3),
            1u32..,
            option::of(text()),
            option::of(finite_f32()),
            option::of(finite_f32()),
            option::of(text()),
        ),
    )
        .prop_map(
            |(
                (name, description, mode, hidden, prompt, tools),
                (permission, max_steps, model, temperature, top_p, color),
            )| AgentSpec {
                name: name.parse().expect("matches the name alphabet"),
                description,
                mode,
                hidden,
                prompt,
                tools,
                permission,
                max_steps,
                model,
                model_tier: if hidden {
                    taskwire_definitions::agent::ModelTier::Small
                } else {
                    taskwire_definitions::agent::ModelTier::Default
                },
                temperature,
                top_p,
                color,
                reasoning_effort: None,
                small_model: None,
                thinking_budget: None,
                hooks: if hidden {
                    vec![taskwire_definitions::hooks::Hook {
                        event: taskwire_definitions::hooks::HookEvent::PostToolUse,
                        matcher: "edit|write".into(),
                        action: taskwire_definitions::hooks::HookAction::Http {
                            url: "https://hooks.example.com/lint".into(),
                            headers: vec![("X-Token".into(), "{env:TOKEN}".into())],
                        },
                        timeout_secs: Some(5),
                        source: "agent x".into(),
                    }]
                } else {
                    Vec::new()
                },
            },
        )
        .boxed()
}

pub fn domain_task_request() -> BoxedStrategy<TaskRequest> {
    let ids = (
        domain_task_id(),
        option::of(domain_task_id()),
        domain_trace_id(),
        option::of(domain_session_id()),
    );
    let texts = (text(), text(), text(), non_empty(), option::of(non_empty()));
    let payload = (
        option::of(domain_json_object()),
        vec(
            (text(), text(), text()).prop_map(|(kind, id, uri)| ContextRef { kind, id, uri }),
            0..3,
        ),
        vec(
            (text(), text(), text(), vec(any::<u8>(), 0..16)).prop_map(
                |(name, media_type, uri, data)| Attachment {
                    name,
                    media_type,
                    uri,
                    data,
                },
            ),
            0..3,
        ),
        vec(text(), 0..3),
        option::of(non_empty()),
    );
    let times = (option::of(domain_time()), domain_time());
    let numbers = (
        option::of(non_empty()),
        option::of(any::<u32>()),
        any::<u32>(),
        any::<u32>(),
        1u32..,
        any::<u32>(),
    );
    let rest = (
        domain_agent_spec(),
        option::of(non_empty()),
        option::of((text(), text(), text(), text())),
        vec((text(), text()), 0..3),
        any::<bool>(),
        vec(domain_permission_layer(), 0..3),
        domain_patch(),
        (option::of(non_empty()), any::<bool>()),
        text(),
    );
    (ids, texts, payload, times, numbers, rest)
        .prop_map(
            |(
                (task_id, parent_task_id, trace_id, resume_token),
                (tenant, sender, intent, prompt, command),
                (input, context_refs, attachments, auth_scope, idempotency_key),
                (deadline, created_at),
                (model, max_steps, depth, attempt, max_attempts, max_depth),
                (
                    spec,
                    parent_model,
                    subtask,
                    subagents,
                    new_session,
                    layers,
                    (workspace_patch, workspace_patch_ref),
                    (output_schema, expand_shell),
                    traceparent,
                ),
            )| TaskRequest {
                task_id,
                parent_task_id,
                trace_id,
                tenant,
                sender,
                agent: spec.name.as_str().to_owned(),
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
                agent_spec: std::sync::Arc::new(pb::AgentSpec::from(&spec)),
                created_at,
                max_attempts,
                parent_model,
                subtask: subtask.map(|(agent, description, prompt, command)| Subtask {
                    agent,
                    description,
                    prompt,
                    command,
                }),
                max_depth,
                subagents: subagents.into(),
                new_session,
                inherited_permission: layers.iter().map(pb::PermissionLayer::from).collect(),
                workspace_patch,
                output_schema,
                expand_shell,
                traceparent,
                workspace_patch_ref,
                budget: Default::default(),
                spent_elsewhere: Default::default(),
                priority: Default::default(),
                fork: None,
            },
        )
        .boxed()
}

/// A patch reference as the writer makes it.
pub fn domain_patch_ref() -> impl Strategy<Value = PatchRef> {
    ("[a-z0-9/._-]{1,40}", "[0-9a-f]{64}", 0..=MAX_PATCH_BYTES)
        .prop_map(|(name, sha256, size)| PatchRef { name, sha256, size })
}

/// A patch inline, or by reference, never both.
pub fn domain_patch() -> impl Strategy<Value = (String, Option<PatchRef>)> {
    prop_oneof![
        text().prop_map(|t| (t, None)),
        domain_patch_ref().prop_map(|r| (String::new(), Some(r))),
    ]
}

pub fn domain_task_result() -> BoxedStrategy<TaskResult> {
    let terminal: Vec<TaskStatus> = TaskStatus::ALL
        .into_iter()
        .filter(|s| s.is_terminal())
        .collect();
    let head = (
        domain_task_id(),
        domain_trace_id(),
        any::<u32>(),
        any::<u64>(),
        prop::sample::select(terminal),
        text(),
        option::of(domain_json_object()),
    );
    let tail = (
        vec(
            (text(), text(), text(), any::<bool>()).prop_map(|(call_id, tool, title, ok)| {
                ToolCallSummary {
                    call_id,
                    tool,
                    title,
                    ok,
                }
            }),
            0..3,
        ),
        vec(
            (text(), text(), any::<bool>()).prop_map(|(code, message, retryable)| TaskError {
                code,
                message,
                retryable,
            }),
            0..3,
        ),
        (any::<u64>(), any::<u64>()),
        any::<u64>(),
        any::<u32>(),
        option::of(domain_session_id()),
        option::of(non_empty().prop_map(WorkerId::new)),
        any::<bool>(),
        domain_patch(),
        option::of("[A-Za-z0-9 ]{1,80}"),
        vec(
            (text(), text(), text()).prop_map(|(source, uri, excerpt)| Provenance {
                source,
                uri,
                excerpt,
            }),
            0..3,
        ),
        text(),
    );
    (head, tail)
        .prop_map(
            |(
                (task_id, trace_id, attempt, epoch, status, text, structured),
                (
                    tool_calls,
                    errors,
                    (input_tokens, output_tokens),
                    latency_ms,
                    steps,
                    session_id,
                    worker_id,
                    retry_scheduled,
                    (patch, patch_ref),
                    title,
                    provenance,
                    traceparent,
                ),
            )| TaskResult {
                task_id,
                trace_id,
                attempt,
                claim_epoch: ClaimEpoch(epoch),
                status,
                text,
                structured,
                tool_calls,
                errors,
                usage: Usage {
                    input_tokens,
                    output_tokens,
                    ..Usage::default()
                },
                own_usage: Usage::default(),
                latency_ms,
                steps,
                session_id,
                worker_id,
                retry_scheduled,
                transcript_json: None,
                patch,
                title,
                provenance,
                traceparent,
                patch_ref,
            },
        )
        .boxed()
}
