//! A child session is bounded by its ancestors' rules: what they deny it cannot do,
//! what they ask about it must ask about, and its own `Always` answers do not lift an
//! inherited ask.

use serde_json::json;
use taskwire_agent::{ApprovalAnswer, SessionStatus};
use taskwire_definitions::builtin;
use taskwire_definitions::permission::{PermissionAction, PermissionLayer, PermissionRule};

use crate::support::*;

fn plan_layer() -> PermissionLayer {
    PermissionLayer {
        agent: "plan".into(),
        rules: builtin::plan().permission,
    }
}

#[tokio::test]
async fn a_general_child_of_plan_gets_no_edit_tools_and_asks_where_plan_asks() {
    let fx = Fixture::new();
    let host = TestHost::new([ApprovalAnswer::Always, ApprovalAnswer::Once]);
    let model = ScriptedModel::new([
        calls(&[
            ("w", "write", json!({"filePath": "new.txt", "content": "x"})),
            ("ls", "bash", json!({"command": "ls"})),
            ("t1", "bash", json!({"command": "touch made.txt"})),
        ]),
        call("t2", "bash", json!({"command": "touch made.txt"})),
        text("done"),
    ]);
    let mut params = fx.params(builtin::general(), 5);
    params.inherited_permission = vec![plan_layer()];
    let outcome = fx.run_hosted(params, &model, &host).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let requests = model.requests();
    let offered = tool_names(&requests[0]);
    assert!(
        !offered.contains(&"edit") && !offered.contains(&"write"),
        "plan denies edit for every path: {offered:?}"
    );
    assert!(offered.contains(&"bash") && offered.contains(&"read"));
    let sent = &requests[1].messages;
    assert_eq!(
        tool_result(sent, "w"),
        "error: tool write is not available to agent general"
    );
    assert!(!fx.workspace.root().join("new.txt").exists());
    assert!(
        tool_result(sent, "ls").contains("(exit code 0)"),
        "a read-only command plan allows runs: {}",
        tool_result(sent, "ls")
    );
    // Asked twice: the `Always` of the first answer does not lift plan's ask.
    let asked: Vec<_> = host.approvals().into_iter().map(|a| a.patterns).collect();
    assert_eq!(
        asked,
        [
            vec!["touch made.txt".to_owned()],
            vec!["touch made.txt".to_owned()]
        ]
    );
    assert!(
        fx.workspace.root().join("made.txt").exists(),
        "approved, it ran"
    );
}

#[tokio::test]
async fn an_inherited_rule_that_refuses_a_call_is_named_with_its_agent() {
    let fx = Fixture::new();
    let host = TestHost::new([]);
    let reviewer = PermissionLayer {
        agent: "reviewer".into(),
        rules: vec![PermissionRule::new(
            "edit",
            "notes.txt",
            PermissionAction::Deny,
        )],
    };
    let model = ScriptedModel::new([
        calls(&[
            (
                "secret",
                "write",
                json!({"filePath": "notes.txt", "content": "gone"}),
            ),
            (
                "fine",
                "write",
                json!({"filePath": "other.txt", "content": "ok"}),
            ),
        ]),
        text("done"),
    ]);
    let mut params = fx.params(builtin::build(), 5);
    params.inherited_permission = vec![reviewer];
    let outcome = fx.run_hosted(params, &model, &host).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let sent = &model.requests()[1].messages;
    assert_eq!(
        tool_result(sent, "secret"),
        "error: permission denied: edit on notes.txt is denied by rule \
         \"edit notes.txt deny (inherited from reviewer)\""
    );
    assert_eq!(
        std::fs::read_to_string(fx.workspace.root().join("notes.txt")).expect("kept"),
        "secret plans\n"
    );
    assert!(
        fx.workspace.root().join("other.txt").exists(),
        "other paths stay open"
    );
    assert!(host.approvals().is_empty());
}
