//! The happy path: tool calls, results fed back, resume.

use serde_json::json;
use taskwire_agent::{SessionEvent, SessionStatus, ToolCallState};
use taskwire_definitions::builtin;
use taskwire_llm::{Message, Role};

use crate::support::*;

#[tokio::test]
async fn grep_then_read_produces_events_in_order_and_completes() {
    let fx = Fixture::new();
    let model = ScriptedModel::new([
        call("c1", "grep", json!({"pattern": "TODO"})),
        call("c2", "read", json!({"filePath": "src/lib.rs", "offset": 2})),
        text("the TODO is at src/lib.rs:2"),
    ]);
    let outcome = fx.run(fx.params(builtin::general(), 10), &model).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    assert_eq!(outcome.text, "the TODO is at src/lib.rs:2");
    assert_eq!(outcome.steps, 3);
    assert_eq!(outcome.usage, usage(30, 15));
    assert_eq!(outcome.error, None);
    let titles: Vec<_> = outcome
        .tool_calls
        .iter()
        .map(|c| (c.tool.as_str(), c.title.as_str(), c.ok))
        .collect();
    assert_eq!(
        titles,
        [
            ("grep", "grep TODO", true),
            ("read", "read src/lib.rs", true)
        ]
    );

    use ToolCallState::*;
    let events = fx.events();
    // A tool's metadata reaches the observer with its completion.
    let grep_done = events.iter().find_map(|e| match e {
        SessionEvent::ToolCall {
            call_id,
            state: Completed,
            metadata,
            ..
        } if call_id == "c1" => metadata.clone(),
        _ => None,
    });
    assert_eq!(grep_done.expect("grep metadata")["matches"], 1);
    assert_eq!(
        without_metadata(events),
        [
            SessionEvent::StepStarted { step: 1 },
            SessionEvent::StepFinished {
                step: 1,
                usage: usage(10, 5)
            },
            tool_event("c1", "grep", Pending, "grep TODO"),
            tool_event("c1", "grep", Running, "grep TODO"),
            tool_event("c1", "grep", Completed, "grep TODO"),
            SessionEvent::StepStarted { step: 2 },
            SessionEvent::StepFinished {
                step: 2,
                usage: usage(10, 5)
            },
            tool_event("c2", "read", Pending, "read src/lib.rs"),
            tool_event("c2", "read", Running, "read src/lib.rs"),
            tool_event("c2", "read", Completed, "read src/lib.rs"),
            SessionEvent::StepStarted { step: 3 },
            SessionEvent::TextDelta {
                text: "the TODO is at src/lib.rs:2".into()
            },
            SessionEvent::StepFinished {
                step: 3,
                usage: usage(10, 5)
            },
        ]
    );

    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let first = &requests[0];
    assert_eq!(first.model, "test-model");
    // No host subagents, so no `task`; general never gets the todo tools.
    assert_eq!(
        tool_names(first),
        [
            "read", "list", "glob", "grep", "edit", "write", "bash", "webfetch"
        ]
    );
    assert_eq!(first.messages[0].role, Role::System);
    assert!(
        first.messages[0]
            .content
            .contains(&fx.workspace.root().display().to_string())
    );
    assert_eq!(first.messages[1], Message::user("find the TODO"));
    // The model saw real tool output.
    assert!(
        tool_result(&requests[1].messages, "c1").contains("src/lib.rs:2: // TODO: handle errors")
    );
    assert_eq!(
        tool_result(&requests[2].messages, "c2"),
        "     2\t// TODO: handle errors\n"
    );

    // The transcript resumes without the system prompt: user, then 2 × (call, result),
    // then the answer.
    let roles: Vec<_> = outcome.messages.iter().map(|m| m.role).collect();
    use Role::*;
    assert_eq!(roles, [User, Assistant, Tool, Assistant, Tool, Assistant]);
}

#[tokio::test]
async fn resumed_session_continues_from_history() {
    let fx = Fixture::new();
    let first = ScriptedModel::new([text("first answer")]);
    let outcome = fx.run(fx.params(builtin::explore(), 5), &first).await;

    let second = ScriptedModel::new([text("second answer")]);
    let mut params = fx.params(builtin::explore(), 5);
    params.history = outcome.transcript.clone();
    params.prompt = "and now?".into();
    let resumed = fx.run(params, &second).await;

    assert_eq!(resumed.status, SessionStatus::Completed);
    let sent = &second.requests()[0].messages;
    let roles: Vec<_> = sent.iter().map(|m| m.role).collect();
    use Role::*;
    assert_eq!(roles, [System, User, Assistant, User]);
    assert_eq!(sent[2].content, "first answer");
    assert_eq!(resumed.messages.len(), 4);
    assert_eq!(resumed.transcript.messages.len(), 4);
    assert_eq!(resumed.transcript.session_id, "ses-test");
}

#[tokio::test]
async fn concurrent_calls_keep_results_in_call_order() {
    let fx = Fixture::new();
    let model = ScriptedModel::new([
        calls(&[
            ("a", "grep", json!({"pattern": "fn"})),
            ("b", "read", json!({"filePath": "src/main.rs"})),
            ("c", "list", json!({"path": "src"})),
        ]),
        text("done"),
    ]);
    let outcome = fx.run(fx.params(builtin::general(), 5), &model).await;

    let results: Vec<_> = model.requests()[1]
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| {
            m.tool_call_id
                .clone()
                .expect("tool results name their call")
        })
        .collect();
    assert_eq!(results, ["a", "b", "c"]);
    assert_eq!(outcome.tool_calls.len(), 3);
    assert!(outcome.tool_calls.iter().all(|c| c.ok));
}
