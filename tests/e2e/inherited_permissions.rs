//! A child never has more power than its parent: a `plan` parent's rules bound the
//! `general` child it delegates to (across workers, through the envelope), whether the
//! child was started by the parent's model or by a slash command's subtask.

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use taskwire_e2e::{Cluster, PATIENCE, progress_events, start, start_with, wait_for};
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

fn first_user(req: &SeenRequest) -> &str {
    req.first_user_message().unwrap_or_default()
}

/// The parent delegates once to `general`; the child tries to write, lists the
/// workspace (read-only, plan allows it) and touches a file (plan asks).
fn delegate(req: &SeenRequest) -> ScriptedReply {
    if first_user(req).starts_with("child:") {
        return match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([
                (
                    "w",
                    "write",
                    json!({"filePath": "written.txt", "content": "x"}),
                ),
                (
                    "ls",
                    "bash",
                    json!({"command": "ls", "description": "list"}),
                ),
                (
                    "touch",
                    "bash",
                    json!({"command": "touch touched.txt", "description": "touch"}),
                ),
            ]),
            _ => ScriptedReply::text("child done"),
        };
    }
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([(
            "t1",
            "task",
            json!({"description": "try changes", "prompt": "child: try changes", "subagent_type": "general"}),
        )]),
        _ => ScriptedReply::text("parent done"),
    }
}

/// The only child of `parent`, once it exists.
async fn only_child(cluster: &Cluster, parent: &str) -> pb::Task {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let mut tasks = cluster.children(parent).await.expect("children");
        if let Some(child) = tasks.pop() {
            assert!(tasks.is_empty(), "one child");
            return child;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no child of {parent} appeared"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn approvals(events: &[pb::WatchEvent]) -> Vec<pb::ApprovalRequired> {
    progress_events(events)
        .into_iter()
        .filter_map(|p| match &p.event {
            Some(pb::task_progress::Event::ApprovalRequired(a)) => Some(a.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_general_child_of_plan_gets_no_edit_tools_and_asks_where_plan_asks() {
    let cluster = start(ScriptedModel::start(delegate).await, 1, 2)
        .await
        .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let parent = cluster
        .submit("plan", "plan the change")
        .await
        .expect("submit");
    let child = only_child(&cluster, &parent).await;
    assert_eq!(child.agent, "general");

    // The child asks about the command plan asks about, on its own task.
    let mut stream = client
        .watch(pb::WatchRequest {
            task_id: child.task_id.clone(),
        })
        .await
        .expect("watch")
        .into_inner();
    let asked = tokio::time::timeout(PATIENCE, async {
        while let Some(ev) = stream.next().await {
            if let Some(pb::watch_event::Event::Progress(p)) = ev.expect("event").event
                && let Some(pb::task_progress::Event::ApprovalRequired(a)) = p.event
            {
                return a;
            }
        }
        panic!("the child's watch ended without an approval request")
    })
    .await
    .expect("approval requested in time");
    assert_eq!(asked.permission, "bash");
    assert_eq!(asked.patterns, ["touch touched.txt"]);
    let workspace = cluster
        .task_workspace(&child.task_id)
        .expect("the child's workspace");
    assert!(!workspace.join("touched.txt").exists());
    client
        .approve(pb::ApproveRequest {
            task_id: child.task_id.clone(),
            request_id: asked.request_id,
            answer: pb::ApprovalAnswer::Once as i32,
            message: String::new(),
        })
        .await
        .expect("approve");

    let done = cluster.wait_finished(&parent).await.expect("parent ends");
    assert_eq!(done.status(), pb::TaskStatus::Completed, "{done:?}");
    let child_done = cluster
        .wait_finished(&child.task_id)
        .await
        .expect("child ends");
    let patch = &child_done.result.as_ref().expect("result").patch;
    assert!(
        taskwire_e2e::created_in_patch(patch, "touched.txt").is_some(),
        "the approved command ran: {patch}"
    );
    assert!(!patch.contains("written.txt"), "{patch}");
    let child_events = cluster.watch(&child.task_id).await.expect("child events");
    assert_eq!(
        approvals(&child_events).len(),
        1,
        "only the command plan asks about was asked"
    );
    // The parent asked nothing itself; it shows its child's ask, naming the child.
    let parent_events = cluster.watch(&parent).await.expect("parent events");
    let shown: Vec<String> = approvals(&parent_events)
        .into_iter()
        .map(|a| a.task_id)
        .collect();
    assert_eq!(shown, vec![child.task_id.clone()]);

    let requests = cluster.model.requests();
    let parent_first = requests
        .iter()
        .find(|r| first_user(r) == "plan the change")
        .expect("the parent asked the model");
    assert!(
        parent_first.tools.iter().any(|t| t == "task"),
        "plan delegates"
    );
    let child_calls: Vec<&SeenRequest> = requests
        .iter()
        .filter(|r| first_user(r).starts_with("child:"))
        .collect();
    assert_eq!(child_calls.len(), 2);
    let offered = &child_calls[0].tools;
    assert!(
        !offered.iter().any(|t| t == "edit" || t == "write"),
        "plan denies edit everywhere, so the child is not offered it: {offered:?}"
    );
    assert!(offered.iter().any(|t| t == "bash") && offered.iter().any(|t| t == "read"));
    assert_eq!(
        child_calls[1].tool_result("w"),
        "error: tool write is not available to agent general"
    );
    let listed = child_calls[1].tool_result("ls");
    assert!(
        listed.contains("(exit code 0)"),
        "a read-only command plan allows ran without asking: {listed}"
    );
    cluster.shutdown().await;
}

/// The `plan` task waits on an approval (so it is still running when a command is
/// started under it); every other call reports the tools it was offered.
fn report_tools(req: &SeenRequest) -> ScriptedReply {
    if first_user(req) == "plan it" && req.assistant_turns() == 0 {
        return ScriptedReply::tool_calls([(
            "hold",
            "bash",
            json!({"command": "touch held.txt", "description": "wait"}),
        )]);
    }
    ScriptedReply::text(format!("offered: {}", req.tools.join(",")))
}

#[tokio::test]
async fn a_slash_command_subtask_under_a_plan_task_is_bounded_by_plan() {
    let config = tempfile::tempdir().expect("config dir");
    let command = config.path().join("commands/probe.md");
    std::fs::create_dir_all(command.parent().expect("has a parent")).expect("mkdir");
    std::fs::write(&command, "---\nagent: general\n---\nProbe $ARGUMENTS\n").expect("write");
    let dir = config.path().to_owned();
    let cluster = start_with(ScriptedModel::start(report_tools).await, 1, 3, move |c| {
        c.config_dir = Some(dir);
        // The command's session is the plan task's child, its subtask a grandchild.
        c.max_depth = 2;
    })
    .await
    .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let plan = cluster.submit("plan", "plan it").await.expect("submit");
    wait_for(&cluster, &plan, "awaiting approval", |t| {
        t.status() == pb::TaskStatus::AwaitingApproval
    })
    .await
    .expect("plan waits");

    let mut offered_to_child = Vec::new();
    for (parent, arguments) in [("", "alone"), (plan.as_str(), "under plan")] {
        let task = client
            .run_command(pb::RunCommandRequest {
                command: "/probe".into(),
                arguments: arguments.into(),
                parent_task_id: parent.into(),
                ..Default::default()
            })
            .await
            .expect("run command")
            .into_inner();
        let done = cluster.wait_finished(&task.task_id).await.expect("ends");
        assert_eq!(done.status(), pb::TaskStatus::Completed, "{done:?}");
        let child = only_child(&cluster, &task.task_id).await;
        let child = cluster.wait_finished(&child.task_id).await.expect("ends");
        assert_eq!(child.agent, "general");
        let text = child.result.and_then(|r| r.output).expect("output").text;
        offered_to_child.push(text);
    }
    let [alone, under_plan] = &offered_to_child[..] else {
        panic!("two runs: {offered_to_child:?}");
    };
    assert!(
        alone.contains("edit") && alone.contains("write"),
        "without a parent the subtask's child may edit: {alone}"
    );
    assert!(
        !under_plan.contains("edit") && !under_plan.contains("write"),
        "under plan it may not: {under_plan}"
    );
    assert!(under_plan.contains("bash"), "{under_plan}");
    cluster.shutdown().await;
}
