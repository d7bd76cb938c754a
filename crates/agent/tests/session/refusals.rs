//! Calls the agent may not make: denied by a rule, not offered, unknown, malformed.

use serde_json::json;
use taskwire_agent::{SessionStatus, ToolCallState};
use taskwire_definitions::builtin;
use taskwire_definitions::permission::{PermissionAction, PermissionRule};
use taskwire_llm::{ChatResponse, FinishReason, ToolCall};

use crate::support::*;

#[tokio::test]
async fn denied_tool_call_never_executes() {
    let fx = Fixture::new();
    let mut agent = builtin::general();
    agent.permission = vec![
        PermissionRule::new("read", "*", PermissionAction::Allow),
        PermissionRule::new("read", "notes*", PermissionAction::Deny),
        PermissionRule::new("grep", "*", PermissionAction::Ask),
    ];
    let model = ScriptedModel::new([
        calls(&[
            ("c1", "read", json!({"filePath": "./notes.txt"})),
            ("c2", "grep", json!({"pattern": "secret"})),
            ("c3", "read", json!({"filePath": "src/main.rs"})),
        ]),
        text("done"),
    ]);
    let outcome = fx.run(fx.params(agent, 5), &model).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let sent = &model.requests()[1].messages;
    assert_eq!(
        tool_result(sent, "c1"),
        "error: permission denied: read on notes.txt is denied by rule \"read notes* deny\""
    );
    // No host to ask: `ask` is a rejection the model can read.
    assert_eq!(
        tool_result(sent, "c2"),
        "error: permission rejected: grep on secret needed approval (rule \"grep * ask\") \
         and was rejected: approval is not available in this session"
    );
    assert!(
        !sent.iter().any(|m| m.content.contains("secret plans")),
        "denied calls leaked file contents"
    );
    assert!(
        tool_result(sent, "c3").contains("fn main()"),
        "allowed calls in the same turn run"
    );

    use ToolCallState::*;
    assert_eq!(fx.states_of("c1"), [Pending, Error]);
    assert_eq!(fx.states_of("c2"), [Pending, Error], "never running");
    assert_eq!(fx.states_of("c3"), [Pending, Running, Completed]);
    let oks: Vec<_> = outcome.tool_calls.iter().map(|c| c.ok).collect();
    assert_eq!(oks, [false, false, true]);
}

#[tokio::test]
async fn tools_outside_the_allow_list_or_blanket_denied_are_neither_offered_nor_run() {
    let fx = Fixture::new();
    let mut agent = builtin::general();
    agent.tools = vec!["read".into(), "g*".into()];
    agent.permission = vec![PermissionRule::new("glob", "*", PermissionAction::Deny)];
    let model = ScriptedModel::new([
        calls(&[
            ("c1", "list", json!({})),
            ("c2", "glob", json!({"pattern": "*"})),
        ]),
        text("done"),
    ]);
    let outcome = fx.run(fx.params(agent, 5), &model).await;

    let requests = model.requests();
    assert_eq!(tool_names(&requests[0]), ["read", "grep"]);
    assert_eq!(
        tool_result(&requests[1].messages, "c1"),
        "error: tool list is not available to agent general"
    );
    assert_eq!(
        tool_result(&requests[1].messages, "c2"),
        "error: tool glob is not available to agent general"
    );
    assert!(
        fx.tool_events()
            .iter()
            .all(|(_, state, ..)| *state != ToolCallState::Running)
    );
    assert_eq!(outcome.status, SessionStatus::Completed);
}

#[tokio::test]
async fn unknown_tool_and_bad_arguments_become_tool_errors_and_the_loop_continues() {
    let fx = Fixture::new();
    let model = ScriptedModel::new([
        call("c1", "frobnicate", json!({"level": 11})),
        Answer::Reply(ChatResponse {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: "c2".into(),
                name: "read".into(),
                arguments: "{not json".into(),
            }],
            usage: usage(1, 1),
            finish_reason: FinishReason::ToolCalls,
            reasoning: Vec::new(),
        }),
        call("c3", "read", json!({"filePath": "../../etc/passwd"})),
        text("recovered"),
    ]);
    let outcome = fx.run(fx.params(builtin::general(), 10), &model).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    assert_eq!(outcome.text, "recovered");
    let sent = &model.requests()[3].messages;
    assert_eq!(tool_result(sent, "c1"), "error: unknown tool frobnicate");
    assert!(
        tool_result(sent, "c2")
            .starts_with("error: invalid arguments for read: arguments are not valid json"),
        "{}",
        tool_result(sent, "c2")
    );
    assert_eq!(
        tool_result(sent, "c3"),
        "error: path ../../etc/passwd is outside the workspace"
    );
    let errors: Vec<_> = fx
        .tool_events()
        .into_iter()
        .filter_map(|(id, _, _, error)| error.map(|e| (id, e)))
        .collect();
    assert_eq!(
        errors.len(),
        3,
        "each failure is reported with its text: {errors:?}"
    );
}
