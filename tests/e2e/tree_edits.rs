//! Edits travel with the task tree: a child starts from its parent's files as they are
//! (on whichever worker runs it), its changes come back into the parent's workspace
//! before the `task` tool returns, and the root's patch is the whole tree's change. A
//! child whose changes conflict with the parent's is a tool error that shows the
//! conflicting hunk and leaves the parent's files as they were.

use serde_json::json;
use taskwire_e2e::{Cluster, PATIENCE, created_in_patch, start, start_with};
use taskwire_protocol::pb;
use taskwire_test_support::files::git;
use taskwire_test_support::{Gate, ScriptedModel, ScriptedReply, SeenRequest};

/// Makes the cluster's base a repository with `a.txt` committed.
fn commit_base(cluster: &Cluster) {
    let base = cluster.workspace.path();
    git(base, &["init", "-q", "-b", "main"]);
    std::fs::write(base.join("a.txt"), "one\ntwo\nthree\n").expect("write");
    git(base, &["add", "a.txt"]);
    git(base, &["commit", "-q", "-m", "start"]);
}

fn last_tool_output(req: &SeenRequest) -> String {
    req.messages
        .iter()
        .rev()
        .find(|m| m.role == "tool")
        .map(|m| m.content.clone())
        .unwrap_or_default()
}

fn is_child(req: &SeenRequest) -> bool {
    req.first_user_message()
        .is_some_and(|p| p.starts_with("child:"))
}

/// The parent writes `notes.txt`, delegates appending to it, then reads it back; the
/// child reads the file it was handed, appends a line and says what it had read.
fn delegate_an_edit(req: &SeenRequest) -> ScriptedReply {
    if is_child(req) {
        return match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([("c1", "read", json!({ "filePath": "notes.txt" }))]),
            1 => ScriptedReply::tool_calls([(
                "c2",
                "edit",
                json!({ "filePath": "notes.txt", "oldString": "from parent", "newString": "from parent\nfrom child" }),
            )]),
            _ => {
                let first_read = req
                    .messages
                    .iter()
                    .find(|m| m.role == "tool")
                    .map(|m| m.content.clone())
                    .unwrap_or_default();
                ScriptedReply::text(format!("child read: {first_read}"))
            }
        };
    }
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([(
            "p1",
            "write",
            json!({ "filePath": "notes.txt", "content": "from parent\n" }),
        )]),
        1 => ScriptedReply::tool_calls([(
            "p2",
            "task",
            json!({ "description": "append", "prompt": "child: append to notes.txt", "subagent_type": "general" }),
        )]),
        2 => ScriptedReply::tool_calls([("p3", "read", json!({ "filePath": "notes.txt" }))]),
        _ => ScriptedReply::text(format!("parent read: {}", last_tool_output(req))),
    }
}

#[tokio::test]
async fn a_child_on_another_worker_edits_the_parents_files_and_the_parent_sees_the_edit() {
    let mut cluster = start(ScriptedModel::start(delegate_an_edit).await, 0, 1)
        .await
        .expect("cluster");
    commit_base(&cluster);
    // The second worker's base is a clone of the first's: the parent's new file can
    // only reach it through the child's request.
    let clone = tempfile::tempdir().expect("temp dir");
    let other_base = clone.path().join("base");
    git(
        clone.path(),
        &[
            "clone",
            "-q",
            &cluster.workspace.path().to_string_lossy(),
            &other_base.to_string_lossy(),
        ],
    );
    cluster.add_worker("w0", 1);
    cluster.add_worker_with("w1", 1, |c| c.workspace = other_base.clone());

    let parent = cluster
        .submit("build", "write notes and have them extended")
        .await
        .expect("submit");
    let done = cluster
        .wait_finished(&parent)
        .await
        .expect("parent finished");
    let result = done.result.as_ref().expect("result");
    assert_eq!(result.status(), pb::TaskStatus::Completed, "{result:?}");

    let child = cluster
        .only_child_finished(&parent)
        .await
        .expect("one child, finished");
    assert_ne!(
        done.attempts[0].worker_id, child.attempts[0].worker_id,
        "the child ran on the other worker"
    );
    let child_result = child.result.as_ref().expect("child result");
    let child_text = &child_result.output.as_ref().expect("output").text;
    assert!(
        child_text.contains("from parent"),
        "the child started from the parent's files: {child_text}"
    );
    assert!(
        child_result.patch.contains(" from parent\n+from child\n")
            && !child_result.patch.contains("new file mode"),
        "the child's patch is its own change on top of the parent's: {}",
        child_result.patch
    );

    // The parent's next request shows the child's line, read from its own workspace.
    let parent_read = cluster
        .model
        .requests()
        .into_iter()
        .find(|r| !is_child(r) && r.assistant_turns() == 3)
        .map(|r| last_tool_output(&r))
        .expect("the parent's request after its read");
    assert!(
        parent_read.contains("from parent") && parent_read.contains("from child"),
        "{parent_read}"
    );
    assert_eq!(
        created_in_patch(&result.patch, "notes.txt").as_deref(),
        Some("from parent\nfrom child"),
        "the root's patch is the whole tree's change: {}",
        result.patch
    );
    cluster.shutdown().await;
}

/// The parent delegates a change to line two of `a.txt` and, in the same turn, runs a
/// command (held for approval) that changes line two its own way; the child's edit is
/// held by `gate`. Then the parent reports what its tools said.
fn conflicting_edits(gate: Gate) -> impl Fn(&SeenRequest) -> ScriptedReply + Send + Sync {
    move |req| {
        if is_child(req) {
            return match req.assistant_turns() {
                0 => ScriptedReply::tool_calls([(
                    "c1",
                    "edit",
                    json!({ "filePath": "a.txt", "oldString": "two", "newString": "two by the child" }),
                )])
                .with_gate(&gate),
                _ => ScriptedReply::text("changed line two"),
            };
        }
        match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([
                (
                    "p1",
                    "task",
                    json!({ "description": "change two", "prompt": "child: change line two", "subagent_type": "general" }),
                ),
                (
                    "p2",
                    "bash",
                    json!({ "command": "sed -i 's/^two$/two by the parent/' a.txt", "description": "change two" }),
                ),
            ]),
            _ => {
                let outputs: Vec<String> = req
                    .messages
                    .iter()
                    .filter(|m| m.role == "tool")
                    .map(|m| m.content.clone())
                    .collect();
                ScriptedReply::text(outputs.join("\n---\n"))
            }
        }
    }
}

#[tokio::test]
async fn a_child_whose_edit_conflicts_with_the_parents_is_a_tool_error_showing_the_hunk() {
    let config = tempfile::tempdir().expect("config dir");
    let agents = config.path().join("agents");
    std::fs::create_dir_all(&agents).expect("mkdir");
    std::fs::write(
        agents.join("lead.md"),
        "---\ndescription: leads\nmode: primary\npermission:\n  bash: ask\n---\nYou lead.\n",
    )
    .expect("write");
    let gate = Gate::new();
    let dir = config.path().to_owned();
    let cluster = start_with(
        ScriptedModel::start(conflicting_edits(gate.clone())).await,
        2,
        1,
        move |c| c.config_dir = Some(dir),
    )
    .await
    .expect("cluster");
    commit_base(&cluster);

    let mut client = cluster.client().await.expect("client");
    let parent = cluster
        .submit("lead", "change line two, twice")
        .await
        .expect("submit");
    // The child is submitted (with the parent's files as they were before its command)
    // and the parent's command waits for approval.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let (child, request_id) = loop {
        let children = cluster.children(&parent).await.expect("children");
        let task = client
            .get(pb::GetRequest {
                task_id: parent.clone(),
            })
            .await
            .expect("get")
            .into_inner();
        if let (Some(child), pb::TaskStatus::AwaitingApproval) = (children.first(), task.status()) {
            let asked = cluster.approval_asked(&parent).await.expect("the ask");
            break (child.task_id.clone(), asked.request_id);
        }
        assert!(tokio::time::Instant::now() < deadline, "never asked");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    client
        .approve(pb::ApproveRequest {
            task_id: parent.clone(),
            request_id,
            answer: pb::ApprovalAnswer::Once as i32,
            message: String::new(),
        })
        .await
        .expect("approve");
    let parent_file = cluster
        .task_workspace(&parent)
        .expect("the parent's workspace")
        .join("a.txt");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while std::fs::read_to_string(&parent_file).expect("a.txt") != "one\ntwo by the parent\nthree\n"
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the command never ran"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    gate.open();

    let done = cluster
        .wait_finished(&parent)
        .await
        .expect("parent finished");
    let result = done.result.as_ref().expect("result");
    assert_eq!(result.status(), pb::TaskStatus::Completed, "{result:?}");
    let child_done = cluster.wait_finished(&child).await.expect("child finished");
    assert_eq!(child_done.status(), pb::TaskStatus::Completed);
    let seen = &result.output.as_ref().expect("output").text;
    for expected in [
        "error: subagent general finished, but its changes were not applied to your workspace",
        "conflict in a.txt",
        "<<<<<<< your workspace\ntwo by the parent\n=======\ntwo by the child\n>>>>>>> subagent",
        "@@ -1,3 +1,3 @@\n one\n-two\n+two by the child\n three",
        "changed line two",
    ] {
        assert!(
            seen.contains(expected),
            "{expected:?} in what the model saw: {seen}"
        );
    }
    assert!(
        result.patch.contains("+two by the parent") && !result.patch.contains("by the child"),
        "the parent's files kept its own change only: {}",
        result.patch
    );
    cluster.shutdown().await;
}
