//! `ask` rules through the host: once, always, reject, time out; bash prefix rules.

use serde_json::json;
use taskwire_agent::{ApprovalAnswer, SessionEvent, SessionStatus, ToolCallState};
use taskwire_definitions::permission::{PermissionAction, PermissionRule};
use taskwire_definitions::{AgentSpec, builtin};

use crate::support::*;

fn asking(rules: &[(&str, &str, PermissionAction)]) -> AgentSpec {
    let mut agent = builtin::build();
    agent.permission = rules
        .iter()
        .map(|(permission, pattern, action)| PermissionRule::new(*permission, *pattern, *action))
        .collect();
    agent
}

use PermissionAction::{Allow, Ask, Deny};

#[tokio::test]
async fn ask_answered_once_runs_the_call() {
    let fx = Fixture::new();
    let host = TestHost::new([ApprovalAnswer::Once]);
    let model = ScriptedModel::new([
        call(
            "c1",
            "bash",
            json!({"command": "echo hi > out.txt", "description": "Write out.txt"}),
        ),
        text("done"),
    ]);
    let agent = asking(&[("bash", "*", Ask)]);
    let outcome = fx.run_hosted(fx.params(agent, 5), &model, &host).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let asked = host.approvals();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].permission, "bash");
    assert_eq!(asked[0].patterns, ["echo hi > out.txt"]);
    assert_eq!(asked[0].title, "Write out.txt");
    assert_eq!(
        std::fs::read_to_string(fx.workspace.root().join("out.txt")).expect("the call ran"),
        "hi\n"
    );
    use ToolCallState::*;
    assert_eq!(fx.states_of("c1"), [Pending, Running, Completed]);
    // The question is announced as progress, while the call is still pending.
    let events = fx.events();
    let asked_at = events
        .iter()
        .position(|e| matches!(e, SessionEvent::ApprovalRequired { .. }))
        .expect("approval_required emitted");
    assert_eq!(
        events[asked_at],
        SessionEvent::ApprovalRequired {
            request_id: asked[0].request_id.clone(),
            permission: "bash".into(),
            patterns: vec!["echo hi > out.txt".into()],
        }
    );
    let running_at = events
        .iter()
        .position(|e| matches!(e, SessionEvent::ToolCall { state: Running, .. }))
        .expect("running");
    assert!(asked_at < running_at, "asked before running");
}

#[tokio::test]
async fn rejection_with_a_message_reaches_the_model_and_nothing_runs() {
    let fx = Fixture::new();
    let host = TestHost::new([ApprovalAnswer::Reject {
        message: Some("write under docs/ instead".into()),
    }]);
    let model = ScriptedModel::new([
        call(
            "c1",
            "write",
            json!({"filePath": "plan.md", "content": "x"}),
        ),
        text("ok, docs/ then"),
    ]);
    let outcome = fx
        .run_hosted(fx.params(asking(&[("edit", "*", Ask)]), 5), &model, &host)
        .await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    assert_eq!(
        tool_result(&model.requests()[1].messages, "c1"),
        "error: permission rejected: edit on plan.md needed approval (rule \"edit * ask\") \
         and was rejected: write under docs/ instead"
    );
    assert!(!fx.workspace.root().join("plan.md").exists());
    assert_eq!(
        fx.states_of("c1"),
        [ToolCallState::Pending, ToolCallState::Error]
    );
    assert!(!outcome.tool_calls[0].ok);
}

#[tokio::test]
async fn an_unanswered_approval_is_a_deny_the_model_sees() {
    let fx = Fixture::new();
    let host = TestHost::new([ApprovalAnswer::TimedOut]);
    let model = ScriptedModel::new([
        call("c1", "bash", json!({"command": "touch made.txt"})),
        text("gave up"),
    ]);
    let outcome = fx
        .run_hosted(fx.params(asking(&[("bash", "*", Ask)]), 5), &model, &host)
        .await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    assert_eq!(
        tool_result(&model.requests()[1].messages, "c1"),
        "error: permission denied: bash on touch made.txt needed approval (rule \"bash * ask\") \
         and approval timed out"
    );
    assert!(!fx.workspace.root().join("made.txt").exists());
}

#[tokio::test]
async fn always_is_not_asked_again_for_the_same_subject() {
    let fx = Fixture::new();
    let host = TestHost::new([ApprovalAnswer::Always, ApprovalAnswer::Once]);
    let model = ScriptedModel::new([
        call("c1", "bash", json!({"command": "echo one"})),
        call("c2", "bash", json!({"command": "echo one"})),
        call("c3", "bash", json!({"command": "echo two"})),
        text("done"),
    ]);
    let outcome = fx
        .run_hosted(fx.params(asking(&[("bash", "*", Ask)]), 10), &model, &host)
        .await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let asked: Vec<_> = host.approvals().into_iter().map(|a| a.patterns).collect();
    assert_eq!(
        asked,
        [vec!["echo one".to_owned()], vec!["echo two".to_owned()]]
    );
    assert!(outcome.tool_calls.iter().all(|c| c.ok), "all three ran");
}

#[tokio::test]
async fn always_covers_calls_waiting_in_the_same_turn() {
    let fx = Fixture::new();
    let host = TestHost::new([ApprovalAnswer::Always]);
    let model = ScriptedModel::new([
        calls(&[
            ("a", "bash", json!({"command": "echo same"})),
            (
                "b",
                "bash",
                json!({"command": "echo same", "description": "again"}),
            ),
        ]),
        text("done"),
    ]);
    let outcome = fx
        .run_hosted(fx.params(asking(&[("bash", "*", Ask)]), 5), &model, &host)
        .await;
    assert_eq!(host.approvals().len(), 1, "one question for both");
    assert!(outcome.tool_calls.iter().all(|c| c.ok));
}

#[tokio::test]
async fn bash_rules_match_each_command_by_prefix() {
    let fx = Fixture::new();
    let host = TestHost::new([ApprovalAnswer::Reject { message: None }]);
    let agent = asking(&[
        ("bash", "*", Ask),
        ("bash", "git status*", Allow),
        ("bash", "rm*", Deny),
    ]);
    let model = ScriptedModel::new([
        calls(&[
            ("allowed", "bash", json!({"command": "git status --short"})),
            (
                "mixed",
                "bash",
                json!({"command": "git status && touch made.txt"}),
            ),
            (
                "denied",
                "bash",
                json!({"command": "echo hi && rm -f notes.txt"}),
            ),
        ]),
        text("done"),
    ]);
    let outcome = fx.run_hosted(fx.params(agent, 5), &model, &host).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let sent = &model.requests()[1].messages;
    assert!(
        tool_result(sent, "allowed").contains("(exit code"),
        "ran without asking: {}",
        tool_result(sent, "allowed")
    );
    let asked = host.approvals();
    assert_eq!(asked.len(), 1, "only the mixed command asks");
    assert_eq!(
        asked[0].patterns,
        ["touch made.txt"],
        "only the part no rule allows"
    );
    assert_eq!(
        tool_result(sent, "mixed"),
        "error: permission rejected: bash on touch made.txt needed approval \
         (rule \"bash * ask\") and was rejected"
    );
    assert_eq!(
        tool_result(sent, "denied"),
        "error: permission denied: bash on rm -f notes.txt is denied by rule \"bash rm* deny\""
    );
    assert!(!fx.workspace.root().join("made.txt").exists());
    assert!(fx.workspace.root().join("notes.txt").exists());
}
