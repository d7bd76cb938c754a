//! The `task` tool: children started through the host, in parallel, with their
//! results, failures, progress and usage coming back to the parent.

use serde_json::json;
use taskwire_agent::{SessionEvent, SessionStatus, ToolCallState};
use taskwire_definitions::builtin;
use taskwire_definitions::permission::{PermissionAction, PermissionRule};

use crate::support::*;

fn task(description: &str, agent: &str, prompt: &str) -> serde_json::Value {
    json!({"description": description, "prompt": prompt, "subagent_type": agent})
}

#[tokio::test]
async fn two_task_calls_run_concurrently_and_both_reports_reach_the_model() {
    let fx = Fixture::new();
    // Each child waits until both are running: sequential calls would never finish.
    let host = TestHost::new([]).with_barrier(2);
    let model = ScriptedModel::new([
        calls(&[
            ("t1", "task", task("A", "explore", "find the parser")),
            ("t2", "task", task("B", "general", "find the printer")),
        ]),
        text("both found"),
    ]);
    let outcome = fx
        .run_hosted(fx.params(builtin::build(), 5), &model, &host)
        .await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let requests = model.requests();
    let offered = requests[0]
        .tools
        .iter()
        .find(|tool| &*tool.name == "task")
        .expect("task is offered when the host has subagents");
    assert!(
        offered
            .description
            .contains("- explore: Fast read-only search")
    );
    assert!(offered.description.contains("- general: General-purpose"));

    let sent = &requests[1].messages;
    assert_eq!(
        tool_result(sent, "t1"),
        "report on find the parser\n\n<task_metadata>\nsession_id: ses-A\n</task_metadata>"
    );
    assert_eq!(
        tool_result(sent, "t2"),
        "report on find the printer\n\n<task_metadata>\nsession_id: ses-B\n</task_metadata>"
    );
    let titles: Vec<_> = outcome
        .tool_calls
        .iter()
        .map(|c| c.title.as_str())
        .collect();
    assert_eq!(titles, ["A", "B"]);
    // Two model steps of (10, 5) plus two children of (3, 2).
    assert_eq!(outcome.usage, usage(26, 14));

    let events = fx.events();
    for (task_id, agent, description) in [("task-A", "explore", "A"), ("task-B", "general", "B")] {
        let announced = events
            .iter()
            .filter(|e| {
                **e == SessionEvent::ChildTask {
                    task_id: task_id.into(),
                    agent: agent.into(),
                    description: description.into(),
                    session_id: format!("ses-{description}"),
                    call_id: format!("t{}", if description == "A" { 1 } else { 2 }),
                }
            })
            .count();
        assert_eq!(announced, 1, "{task_id} announced once");
        let child_calls: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                SessionEvent::ChildToolCall {
                    task_id: id,
                    call_id,
                    state,
                    ..
                } if id == task_id => Some((call_id.as_str(), *state)),
                _ => None,
            })
            .collect();
        use ToolCallState::*;
        // The child's call keeps its own id in the parent's progress.
        assert_eq!(
            child_calls,
            [
                ("child-c1", Pending),
                ("child-c1", Running),
                ("child-c1", Completed)
            ],
            "{task_id}"
        );
        // The child is announced before its first call; the parent's `task` call
        // then carries the child's summary as metadata, live and at completion.
        let announced_at = events
            .iter()
            .position(|e| matches!(e, SessionEvent::ChildTask { task_id: id, .. } if id == task_id))
            .expect("announced");
        let first_call = events
            .iter()
            .position(
                |e| matches!(e, SessionEvent::ChildToolCall { task_id: id, .. } if id == task_id),
            )
            .expect("a child call");
        assert!(
            announced_at < first_call,
            "{task_id} announced when submitted"
        );
        let summaries: Vec<&serde_json::Value> = events
            .iter()
            .filter_map(|e| match e {
                SessionEvent::ToolCall {
                    tool,
                    metadata: Some(metadata),
                    ..
                } if tool == "task" && metadata["task_id"] == task_id => Some(metadata),
                _ => None,
            })
            .collect();
        let last = summaries
            .last()
            .expect("the child's summary reached the observer");
        assert_eq!(last["session_id"], format!("ses-{description}"));
        assert_eq!(last["summary"][0]["id"], "child-c1");
        assert_eq!(last["summary"][0]["status"], "completed");
    }
    let children = host.children.lock().expect("not poisoned").clone();
    assert_eq!(children.len(), 2);
    assert!(
        children
            .iter()
            .all(|c| c.session_id.is_none() && c.command.is_none())
    );
}

#[tokio::test]
async fn a_failed_child_is_a_tool_error_and_the_parent_goes_on() {
    let fx = Fixture::new();
    let host = TestHost::new([]);
    let model = ScriptedModel::new([
        calls(&[
            ("t1", "task", task("lost", "explore", "unreachable work")),
            ("t2", "task", task("broken", "general", "crash please")),
            ("t3", "task", task("nobody", "reviewer", "review")),
        ]),
        text("recovered"),
    ]);
    let outcome = fx
        .run_hosted(fx.params(builtin::build(), 5), &model, &host)
        .await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    assert_eq!(outcome.text, "recovered");
    let sent = &model.requests()[1].messages;
    assert_eq!(
        tool_result(sent, "t1"),
        "error: subagent explore failed: no worker serves agent explore"
    );
    assert_eq!(
        tool_result(sent, "t2"),
        "error: subagent general failed: the task ended with status error: report on crash \
         please\n\n<task_metadata>\nsession_id: ses-broken\n</task_metadata>"
    );
    assert_eq!(
        tool_result(sent, "t3"),
        "error: subagent reviewer failed: the child task was refused: NotFound: agent \
         `reviewer` not found; the listed subagents are: explore, general"
    );
    let oks: Vec<_> = outcome.tool_calls.iter().map(|c| c.ok).collect();
    assert_eq!(oks, [false, false, false]);
    // The crashed child still used tokens.
    assert_eq!(outcome.usage, usage(23, 12));
}

#[tokio::test]
async fn a_hidden_subagent_is_not_listed_but_runs_when_named() {
    let fx = Fixture::new();
    let host = TestHost::new([]);
    let model = ScriptedModel::new([
        call("t1", "task", task("scouting", "scout", "look around")),
        text("done"),
    ]);
    let outcome = fx
        .run_hosted(fx.params(builtin::build(), 5), &model, &host)
        .await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let requests = model.requests();
    let offered = requests[0]
        .tools
        .iter()
        .find(|tool| &*tool.name == "task")
        .expect("task is offered");
    assert!(!offered.description.contains("scout"), "hidden: not listed");
    assert_eq!(
        tool_result(&requests[1].messages, "t1"),
        "report on look around\n\n<task_metadata>\nsession_id: ses-scouting\n</task_metadata>"
    );
    let children = host.children.lock().expect("not poisoned").clone();
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].subagent_type, "scout");
}

#[tokio::test]
async fn a_hidden_subagent_the_rules_deny_is_refused_without_starting_it() {
    let fx = Fixture::new();
    let host = TestHost::new([]);
    let mut agent = builtin::build();
    agent.permission = vec![PermissionRule::new("task", "scout", PermissionAction::Deny)];
    let model = ScriptedModel::new([
        call("t1", "task", task("scouting", "scout", "look around")),
        text("done"),
    ]);
    let outcome = fx.run_hosted(fx.params(agent, 5), &model, &host).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    assert_eq!(
        tool_result(&model.requests()[1].messages, "t1"),
        "error: permission denied: task on scout is denied by rule \"task scout deny\""
    );
    assert!(host.children.lock().expect("not poisoned").is_empty());
}

#[tokio::test]
async fn continuing_a_child_passes_its_session_id() {
    let fx = Fixture::new();
    let host = TestHost::new([]);
    let mut args = task("again", "explore", "and the tests?");
    args["session_id"] = json!("ses-A");
    let model = ScriptedModel::new([call("t1", "task", args), text("done")]);
    fx.run_hosted(fx.params(builtin::build(), 5), &model, &host)
        .await;
    let children = host.children.lock().expect("not poisoned").clone();
    assert_eq!(children[0].session_id.as_deref(), Some("ses-A"));
}

#[tokio::test]
async fn without_subagents_the_task_tool_is_not_offered() {
    let fx = Fixture::new();
    let model = ScriptedModel::new([call("t1", "task", task("x", "explore", "y")), text("ok")]);
    fx.run(fx.params(builtin::build(), 5), &model).await;
    let requests = model.requests();
    assert!(!tool_names(&requests[0]).contains(&"task"));
    assert_eq!(
        tool_result(&requests[1].messages, "t1"),
        "error: tool task is not available to agent build"
    );
}
