//! Workspaces as overlays of a shared checkout, in `taskwire worker` processes (which
//! enter a mount namespace of their own at start; workers run inside the tests make
//! copies): concurrent tasks see only their own files, the base never changes, a
//! command's changes (a new file, a removal) and the tools' are in the patch, a
//! child's changes come back to its parent across workers, and a shared checkout the
//! base has moved on from goes once no workspace is mounted on it.

use serde_json::json;
use taskwire_e2e::process::{Process, Taskwire, WorkerOptions};
use taskwire_e2e::{Cluster, PATIENCE, created_in_patch, start_with};
use taskwire_protocol::pb;
use taskwire_test_support::files::{git, snapshot};
use taskwire_test_support::{Gate, ScriptedModel, ScriptedReply, SeenRequest};

fn tool_outputs(req: &SeenRequest) -> Vec<String> {
    req.messages
        .iter()
        .filter(|m| m.role == "tool")
        .map(|m| m.content.clone())
        .collect()
}

/// `write X`: writes `same.txt` with X, reads it back once `gate` opens, answers.
/// `lead`: edits `a.txt`, runs a command that makes a file and removes `lib/b.txt`,
/// then has a `general` child write `child.txt`, then reads `child.txt`.
/// `child: write`: writes `child.txt`.
fn script(gate: Gate) -> impl Fn(&SeenRequest) -> ScriptedReply + Send + Sync + 'static {
    move |req| {
        let user = req.first_user_message().unwrap_or_default().to_owned();
        let turn = req.assistant_turns();
        if let Some(text) = user.strip_prefix("write ") {
            return match turn {
                0 => ScriptedReply::tool_calls([(
                    "w1",
                    "write",
                    json!({"filePath": "same.txt", "content": format!("{text}\n")}),
                )]),
                1 => ScriptedReply::tool_calls([("r1", "read", json!({"filePath": "same.txt"}))])
                    .with_gate(&gate),
                _ => ScriptedReply::text(format!("read back: {}", tool_outputs(req).join(" | "))),
            };
        }
        match (user.as_str(), turn) {
            ("child: write", 0) => ScriptedReply::tool_calls([(
                "c1",
                "write",
                json!({"filePath": "child.txt", "content": "from the child\n"}),
            )]),
            ("lead", 0) => ScriptedReply::tool_calls([(
                "e1",
                "edit",
                json!({"filePath": "a.txt", "oldString": "one", "newString": "ONE"}),
            )]),
            ("lead", 1) => ScriptedReply::tool_calls([(
                "b1",
                "bash",
                json!({"command": "echo made > by-command.txt && rm lib/b.txt", "description": "change"}),
            )]),
            ("lead", 2) => ScriptedReply::tool_calls([(
                "t1",
                "task",
                json!({"description": "write", "prompt": "child: write", "subagent_type": "general"}),
            )]),
            ("lead", 3) => {
                ScriptedReply::tool_calls([("r1", "read", json!({"filePath": "child.txt"}))])
            }
            _ => ScriptedReply::text(format!("done: {}", tool_outputs(req).join(" | "))),
        }
    }
}

/// The base: `a.txt` and `lib/b.txt` committed, `a.txt` then changed.
fn git_base(cluster: &Cluster) -> std::path::PathBuf {
    let base = cluster.workspace.path().to_owned();
    std::fs::create_dir_all(base.join("lib")).expect("mkdir");
    git(&base, &["init", "-q", "-b", "main"]);
    std::fs::write(base.join("a.txt"), "one\ntwo\n").expect("write");
    std::fs::write(base.join("lib/b.txt"), "bee\n").expect("write");
    git(&base, &["add", "."]);
    git(&base, &["commit", "-q", "-m", "start"]);
    std::fs::write(base.join("a.txt"), "one\ntwo\nuncommitted\n").expect("write");
    base
}

async fn worker(taskwire: &Taskwire, cluster: &Cluster, name: &str, concurrency: usize) -> Process {
    let (nats, model) = (cluster.nats.url(), cluster.model.base_url());
    let options = WorkerOptions {
        concurrency,
        ..WorkerOptions::new(&nats, &model, cluster.workspace.path())
    };
    let mut worker = taskwire.worker(name, &options).expect("start worker");
    worker.pulling().await.expect("worker ready");
    worker
}

fn result_of(task: &pb::Task) -> &pb::TaskResult {
    task.result.as_ref().expect("finished")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlay_workspaces_keep_tasks_apart_carry_commands_changes_and_leave_the_base_alone() {
    let gate = Gate::new();
    let cluster = start_with(
        ScriptedModel::start(script(gate.clone())).await,
        0,
        1,
        |_| {},
    )
    .await
    .expect("cluster");
    let base = git_base(&cluster);
    let before = snapshot(&base);
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let a = worker(&taskwire, &cluster, "worker-a", 3).await;
    let b = worker(&taskwire, &cluster, "worker-b", 3).await;
    assert!(
        a.stderr().contains("overlays of a shared checkout"),
        "the worker process can mount overlays here: {}",
        a.tail(20)
    );

    // Two tasks write the same file name at once, each in its own overlay.
    let one = cluster
        .submit("build", "write from one")
        .await
        .expect("submit");
    let two = cluster
        .submit("build", "write from two")
        .await
        .expect("submit");
    let lead = cluster.submit("build", "lead").await.expect("submit");
    let deadline = std::time::Instant::now() + PATIENCE;
    while cluster
        .model
        .requests()
        .iter()
        .filter(|r| {
            r.assistant_turns() == 1
                && r.first_user_message()
                    .is_some_and(|u| u.starts_with("write "))
        })
        .count()
        < 2
    {
        assert!(std::time::Instant::now() < deadline, "both wrote");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    gate.open();
    for (id, own, other) in [
        (&one, "from one", "from two"),
        (&two, "from two", "from one"),
    ] {
        let task = cluster.wait_finished(id).await.expect("finished");
        let result = result_of(&task);
        assert_eq!(result.status(), pb::TaskStatus::Completed, "{result:?}");
        let text = &result.output.as_ref().expect("output").text;
        assert!(text.contains(own) && !text.contains(other), "{text}");
        assert_eq!(
            created_in_patch(&result.patch, "same.txt").as_deref(),
            Some(own),
            "{}",
            result.patch
        );
        assert!(!result.patch.contains("+uncommitted"), "{}", result.patch);
    }

    let task = cluster.wait_finished(&lead).await.expect("finished");
    let result = result_of(&task);
    assert_eq!(result.status(), pb::TaskStatus::Completed, "{result:?}");
    let text = &result.output.as_ref().expect("output").text;
    assert!(
        text.contains("from the child"),
        "the child's file came back: {text}"
    );
    let patch = &result.patch;
    assert!(
        patch.contains("-one\n+ONE"),
        "the edit tool's change: {patch}"
    );
    assert_eq!(
        created_in_patch(patch, "by-command.txt").as_deref(),
        Some("made"),
        "the command's new file: {patch}"
    );
    assert!(
        patch.contains("diff --git a/lib/b.txt b/lib/b.txt\ndeleted file mode"),
        "the command's removal: {patch}"
    );
    assert_eq!(
        created_in_patch(patch, "child.txt").as_deref(),
        Some("from the child"),
        "the child's change is in the root's patch: {patch}"
    );
    assert!(
        !patch.contains("+uncommitted"),
        "the base's own change is where the task started: {patch}"
    );
    assert_eq!(
        snapshot(&base),
        before,
        "the base is byte-for-byte unchanged"
    );
    // Each workspace is unmounted and removed with its layers once its result is in.
    let leftovers = || -> Vec<String> {
        [&one, &two, &lead]
            .iter()
            .flat_map(|id| taskwire_e2e::task_entries(taskwire.workspaces(), id))
            .collect()
    };
    let deadline = std::time::Instant::now() + PATIENCE;
    while !leftovers().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "left: {:?}",
            leftovers()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    // The base moves on: the next task gets a shared checkout of the new state, and
    // the old one, mounted by no one now, goes.
    let trees = || -> Vec<String> {
        std::fs::read_dir(taskwire.workspaces().join("cache/trees"))
            .expect("shared checkouts")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tree"))
            .collect()
    };
    let old = trees();
    assert_eq!(old.len(), 1, "one state of the base so far: {old:?}");
    std::fs::write(base.join("lib/b.txt"), "bee\nmoved on\n").expect("write");
    git(&base, &["commit", "-q", "-am", "moved on"]);
    // Workers take the base's state as looked at for up to this long.
    tokio::time::sleep(taskwire_workspaces::BASE_STATE_FOR + std::time::Duration::from_millis(100))
        .await;
    let next = cluster
        .submit("build", "write again")
        .await
        .expect("submit");
    let task = cluster.wait_finished(&next).await.expect("finished");
    assert_eq!(result_of(&task).status(), pb::TaskStatus::Completed);
    let now = trees();
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now, old, "a new shared checkout replaced the old one");
    drop((a, b));
    cluster.shutdown().await;
}
