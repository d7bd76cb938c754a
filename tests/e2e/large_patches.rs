//! Changes larger than a NATS message (1 MB here) travel by reference, through the
//! patch bucket: a parent's changes reach its child on another worker, a child's patch
//! reaches its parent's workspace, the root's whole patch is recorded; a reference
//! whose object is gone fails only the task that names it, with an error naming it.

use futures::StreamExt;
use serde_json::json;
use taskwire_bus::{Patches, Subjects};
use taskwire_e2e::{Cluster, created_in_patch, start};
use taskwire_protocol::pb;
use taskwire_test_support::files::git;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

/// `seq 1 200000` is 1,288,895 bytes; its patch about 1.5 MB.
const BIG: &str = "seq 1 200000";
const BIG_BYTES: &str = "1288895";

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

fn bash(id: &str, command: &str) -> ScriptedReply {
    ScriptedReply::tool_calls([(
        id,
        "bash",
        json!({ "command": command, "description": "run it" }),
    )])
}

fn delegate(id: &str) -> ScriptedReply {
    ScriptedReply::tool_calls([(
        id,
        "task",
        json!({ "description": "work", "prompt": "child: work on the files", "subagent_type": "general" }),
    )])
}

/// A cluster whose two workers have different clones of one committed base, one
/// session each: a parent on one worker has its child on the other.
async fn two_workers(model: ScriptedModel) -> (Cluster, tempfile::TempDir) {
    let mut cluster = start(model, 0, 1).await.expect("cluster");
    let base = cluster.workspace.path();
    git(base, &["init", "-q", "-b", "main"]);
    std::fs::write(base.join("a.txt"), "one\n").expect("write");
    git(base, &["add", "a.txt"]);
    git(base, &["commit", "-q", "-m", "start"]);
    let clone = tempfile::tempdir().expect("temp dir");
    let other_base = clone.path().join("base");
    git(
        clone.path(),
        &[
            "clone",
            "-q",
            &base.to_string_lossy(),
            &other_base.to_string_lossy(),
        ],
    );
    cluster.add_worker("w0", 1);
    cluster.add_worker_with("w1", 1, |c| c.workspace = other_base.clone());
    (cluster, clone)
}

/// The objects in the cluster's patch bucket whose names start with `prefix`, with
/// their sizes.
async fn objects(cluster: &Cluster, prefix: &str) -> Vec<(String, usize)> {
    let client = async_nats::connect(cluster.nats.url())
        .await
        .expect("connect");
    let js = async_nats::jetstream::new(client);
    let bucket = js
        .get_object_store(Subjects::default().patches_bucket())
        .await
        .expect("the coordinator made the bucket");
    let mut list = bucket.list().await.expect("list");
    let mut found = Vec::new();
    while let Some(info) = list.next().await {
        let info = info.expect("object info");
        if info.name.starts_with(prefix) {
            found.push((info.name, info.size));
        }
    }
    found
}

/// The parent makes a 1.3 MB file with a command (so it is not in its transcript),
/// delegates, and reports what its child said; the child looks at the file.
fn parent_with_large_changes(req: &SeenRequest) -> ScriptedReply {
    if is_child(req) {
        return match req.assistant_turns() {
            0 => bash("c1", "wc -c < big.txt; tail -n 1 big.txt"),
            _ => ScriptedReply::text(format!("child saw: {}", last_tool_output(req))),
        };
    }
    match req.assistant_turns() {
        0 => bash("p1", &format!("{BIG} > big.txt")),
        1 => delegate("p2"),
        _ => ScriptedReply::text(format!("parent heard: {}", last_tool_output(req))),
    }
}

#[tokio::test]
async fn a_parents_changes_larger_than_a_message_reach_its_child_on_another_worker() {
    let (cluster, _clone) =
        two_workers(ScriptedModel::start(parent_with_large_changes).await).await;
    let parent = cluster
        .submit("build", "make a big file and have it looked at")
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
    let child_text = &child
        .result
        .as_ref()
        .expect("child result")
        .output
        .as_ref()
        .expect("output")
        .text;
    assert!(
        child_text.contains(BIG_BYTES) && child_text.contains("200000"),
        "the child saw the parent's file whole: {child_text}"
    );
    let started = objects(&cluster, &format!("start/{parent}/")).await;
    assert!(
        started.len() == 1 && started[0].1 > 1024 * 1024,
        "the child's starting changes went through the bucket: {started:?}"
    );
    let saved = objects(&cluster, &format!("checkpoint/{parent}/")).await;
    assert!(
        !saved.is_empty(),
        "the parent's checkpoint saved its changes by reference"
    );
    assert_eq!(
        created_in_patch(&result.patch, "big.txt")
            .expect("the root's patch creates big.txt")
            .len(),
        1_288_895 - 1,
        "the root's patch is recorded whole"
    );
    cluster.shutdown().await;
}

/// The child makes a 1.3 MB file with a command; the parent then looks at it.
fn child_with_large_patch(req: &SeenRequest) -> ScriptedReply {
    if is_child(req) {
        return match req.assistant_turns() {
            0 => bash("c1", &format!("{BIG} > child.txt")),
            _ => ScriptedReply::text("made child.txt"),
        };
    }
    match req.assistant_turns() {
        0 => delegate("p1"),
        1 => bash("p2", "wc -c < child.txt; tail -n 1 child.txt"),
        _ => ScriptedReply::text(format!("parent saw: {}", last_tool_output(req))),
    }
}

#[tokio::test]
async fn a_childs_patch_larger_than_a_message_reaches_the_parent_and_the_roots_patch() {
    let (cluster, _clone) = two_workers(ScriptedModel::start(child_with_large_patch).await).await;
    let parent = cluster
        .submit("build", "have a big file made")
        .await
        .expect("submit");
    let done = cluster
        .wait_finished(&parent)
        .await
        .expect("parent finished");
    let result = done.result.as_ref().expect("result");
    assert_eq!(result.status(), pb::TaskStatus::Completed, "{result:?}");
    let text = &result.output.as_ref().expect("output").text;
    assert!(
        text.contains(BIG_BYTES) && text.contains("200000"),
        "the parent read the child's file from its own workspace: {text}"
    );
    assert!(
        result.patch_ref.is_none(),
        "the API returns the patch itself"
    );
    assert_eq!(
        created_in_patch(&result.patch, "child.txt")
            .expect("the root's patch creates child.txt")
            .len(),
        1_288_895 - 1,
        "the root's patch holds the child's change whole"
    );

    let children = cluster.children(&parent).await.expect("children");
    let child = cluster
        .wait_finished(&children[0].task_id)
        .await
        .expect("child finished");
    let child_result = child.result.as_ref().expect("child result");
    assert!(
        child_result.patch.len() > 1024 * 1024 && child_result.errors.is_empty(),
        "the child's patch was recorded whole: {} bytes, {:?}",
        child_result.patch.len(),
        child_result.errors
    );
    let handed = objects(&cluster, &format!("result/{}/", children[0].task_id)).await;
    assert!(
        !handed.is_empty() && handed.iter().all(|(_, size)| *size > 1024 * 1024),
        "the child's patch went through the bucket: {handed:?}"
    );
    cluster.shutdown().await;
}

/// Reads `hello.txt` and says what it holds.
fn read_hello(req: &SeenRequest) -> ScriptedReply {
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([("r1", "read", json!({ "filePath": "hello.txt" }))]),
        _ => ScriptedReply::text(format!("hello says: {}", last_tool_output(req))),
    }
}

#[tokio::test]
async fn a_reference_to_a_deleted_patch_fails_its_task_naming_it_and_nothing_else() {
    let cluster = start(ScriptedModel::start(read_hello).await, 1, 1)
        .await
        .expect("cluster");
    let client = async_nats::connect(cluster.nats.url())
        .await
        .expect("connect");
    let patches = Patches::new(async_nats::jetstream::new(client), &Subjects::default());
    let patch = "diff --git a/hello.txt b/hello.txt\nnew file mode 100644\n--- /dev/null\n+++ b/hello.txt\n@@ -0,0 +1 @@\n+hello from the bucket\n";
    let gone = patches.put("start", "client", patch).await.expect("put");
    patches.delete(&gone).await.expect("delete");
    let kept = patches.put("start", "client", patch).await.expect("put");

    let mut api = cluster.client().await.expect("client");
    let submit = |reference: &taskwire_protocol::PatchRef| pb::SubmitRequest {
        agent: "build".into(),
        prompt: "read hello.txt".into(),
        workspace_patch_ref: Some(pb::PatchRef::from(reference)),
        ..Default::default()
    };
    let failed = api
        .submit(submit(&gone))
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    let done = cluster.wait_finished(&failed).await.expect("finished");
    assert_eq!(done.status(), pb::TaskStatus::Error);
    let error = &done.result.as_ref().expect("result").errors[0];
    assert_eq!(error.code, "session_not_started");
    assert!(
        error.message.contains(&gone.name)
            && error.message.contains("TASKWIRE_PATCHES")
            && error.message.contains("deleted or has expired"),
        "{}",
        error.message
    );
    assert_eq!(cluster.model.requests().len(), 0, "no session ran");

    // The worker goes on, and a reference whose object is there works.
    let ok = api
        .submit(submit(&kept))
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    let done = cluster.wait_finished(&ok).await.expect("finished");
    let result = done.result.as_ref().expect("result");
    assert_eq!(result.status(), pb::TaskStatus::Completed, "{result:?}");
    assert!(
        result
            .output
            .as_ref()
            .expect("output")
            .text
            .contains("hello from the bucket"),
        "{result:?}"
    );
    cluster.shutdown().await;
}
