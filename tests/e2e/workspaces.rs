//! Every task attempt in a workspace of its own: concurrent tasks never see each
//! other's files, the base never changes, a task may name the repository it works in,
//! its result carries its patch, and its workspace goes away once the result is
//! recorded (unless the worker keeps workspaces).

use std::path::PathBuf;
use std::time::Duration;

use taskwire_e2e::{Cluster, PATIENCE, created_in_patch, start};
use taskwire_protocol::pb;
use taskwire_test_support::files::{git, snapshot};
use taskwire_test_support::{Gate, ScriptedModel, ScriptedReply, SeenRequest};

/// Makes the cluster's base a git repository: `a.txt` committed, then changed.
fn git_base(cluster: &Cluster) -> PathBuf {
    let base = cluster.workspace.path().to_owned();
    git(&base, &["init", "-q", "-b", "main"]);
    std::fs::write(base.join("a.txt"), "committed\n").expect("write");
    git(&base, &["add", "a.txt"]);
    git(&base, &["commit", "-q", "-m", "start"]);
    std::fs::write(base.join("a.txt"), "committed\nuncommitted\n").expect("write");
    base
}

/// The prompt `write <text>` writes `same.txt`, reads it back (held by `gate`), and
/// answers with what it read.
fn write_then_read(gate: Gate) -> impl Fn(&SeenRequest) -> ScriptedReply + Send + Sync {
    move |req| {
        let text = req
            .first_user_message()
            .and_then(|p| p.strip_prefix("write "))
            .unwrap_or_default()
            .to_owned();
        match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([(
                "w1",
                "write",
                serde_json::json!({ "filePath": "same.txt", "content": format!("{text}\n") }),
            )]),
            1 => ScriptedReply::tool_calls([(
                "r1",
                "read",
                serde_json::json!({ "filePath": "same.txt" }),
            )])
            .with_gate(&gate),
            _ => {
                let read = req
                    .messages
                    .iter()
                    .rev()
                    .find(|m| m.role == "tool")
                    .map(|m| m.content.clone())
                    .unwrap_or_default();
                ScriptedReply::text(format!("read back: {read}"))
            }
        }
    }
}

async fn submit(cluster: &Cluster, prompt: &str, context_refs: Vec<pb::ContextRef>) -> String {
    cluster
        .client()
        .await
        .expect("client")
        .submit(pb::SubmitRequest {
            agent: "build".into(),
            prompt: prompt.into(),
            context_refs,
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner()
        .task_id
}

fn result_of(task: &pb::Task) -> &pb::TaskResult {
    task.result.as_ref().expect("finished")
}

/// Waits until no workspace of `task_id` is left.
async fn wait_removed(cluster: &Cluster, task_id: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while let Some(ws) = cluster.task_workspace(task_id) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "workspace {} never removed",
            ws.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn concurrent_tasks_on_one_worker_see_only_their_own_files_and_the_base_never_changes() {
    let gate = Gate::new();
    let cluster = start(
        ScriptedModel::start(write_then_read(gate.clone())).await,
        1,
        2,
    )
    .await
    .expect("cluster");
    let base = git_base(&cluster);
    let before = snapshot(&base);

    let one = submit(&cluster, "write from one", vec![]).await;
    let two = submit(&cluster, "write from two", vec![]).await;
    // Both have written the same file name before either reads it back.
    let file_one = cluster
        .wait_for_task_file(&one, "same.txt")
        .await
        .expect("one wrote");
    let file_two = cluster
        .wait_for_task_file(&two, "same.txt")
        .await
        .expect("two wrote");
    assert_ne!(file_one, file_two);
    assert_eq!(
        std::fs::read_to_string(&file_one).expect("read"),
        "from one\n"
    );
    assert_eq!(
        std::fs::read_to_string(&file_two).expect("read"),
        "from two\n"
    );
    let workspace = file_one.parent().expect("a workspace");
    assert_eq!(
        std::fs::read_to_string(workspace.join("a.txt")).expect("read"),
        "committed\nuncommitted\n",
        "the base's HEAD plus its uncommitted change"
    );
    assert!(!base.join("same.txt").exists(), "nothing reaches the base");
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
            "the result's patch creates the task's own file: {}",
            result.patch
        );
        assert!(
            !result.patch.contains("uncommitted"),
            "the base's own changes are where the task started, not its change: {}",
            result.patch
        );
    }
    for id in [&one, &two] {
        wait_removed(&cluster, id).await;
    }
    assert_eq!(
        snapshot(&base),
        before,
        "the base is byte-for-byte unchanged"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_task_naming_a_git_context_ref_works_in_a_checkout_of_that_ref() {
    let model = ScriptedModel::start(|req: &SeenRequest| match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([
            ("r1", "read", serde_json::json!({ "filePath": "feature.txt" })),
            (
                "w1",
                "edit",
                serde_json::json!({ "filePath": "feature.txt", "oldString": "v1", "newString": "v1 edited" }),
            ),
        ]),
        _ => {
            let read: Vec<String> = req
                .messages
                .iter()
                .filter(|m| m.role == "tool")
                .map(|m| m.content.clone())
                .collect();
            ScriptedReply::text(format!("saw: {}", read.join(" | ")))
        }
    })
    .await;
    let cluster = start(model, 1, 1).await.expect("cluster");
    // A repository with a `feature` branch, served from a bare clone.
    let dir = tempfile::tempdir().expect("temp dir");
    let origin = dir.path().join("origin");
    std::fs::create_dir_all(&origin).expect("mkdir");
    git(&origin, &["init", "-q", "-b", "main"]);
    std::fs::write(origin.join("feature.txt"), "main\n").expect("write");
    git(&origin, &["add", "."]);
    git(&origin, &["commit", "-q", "-m", "main"]);
    git(&origin, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(origin.join("feature.txt"), "feature v1\n").expect("write");
    git(&origin, &["commit", "-q", "-am", "feature"]);
    let feature = git(&origin, &["rev-parse", "HEAD"]);
    let bare = dir.path().join("repo.git");
    git(
        dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            &origin.to_string_lossy(),
            &bare.to_string_lossy(),
        ],
    );

    let id = submit(
        &cluster,
        "edit the feature",
        vec![pb::ContextRef {
            r#type: "git".into(),
            uri: format!("file://{}", bare.display()),
            id: "feature".into(),
        }],
    )
    .await;
    let task = cluster.wait_finished(&id).await.expect("finished");
    let result = result_of(&task);
    assert_eq!(result.status(), pb::TaskStatus::Completed, "{result:?}");
    let text = &result.output.as_ref().expect("output").text;
    assert!(
        text.contains("feature v1"),
        "the model read the ref's file: {text}"
    );
    assert!(
        result.patch.contains("-feature v1\n+feature v1 edited"),
        "{}",
        result.patch
    );
    assert!(
        result.patch.contains(&format!(
            "index {}",
            git(&bare, &["rev-parse", &format!("{feature}:feature.txt")])
        )),
        "the patch is relative to the ref's commit: {}",
        result.patch
    );
    assert!(!cluster.workspace.path().join("feature.txt").exists());
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_bad_git_context_ref_is_refused_at_submit_naming_the_entry() {
    let cluster = start(ScriptedModel::echo().await, 0, 1)
        .await
        .expect("cluster");
    let err = cluster
        .client()
        .await
        .expect("client")
        .submit(pb::SubmitRequest {
            agent: "build".into(),
            prompt: "work".into(),
            context_refs: vec![pb::ContextRef {
                r#type: "git".into(),
                uri: "--upload-pack=touch /tmp/x".into(),
                id: String::new(),
            }],
            ..Default::default()
        })
        .await
        .expect_err("refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("context_refs") && err.message().contains("entry 0"),
        "{}",
        err.message()
    );
    cluster.shutdown().await;
}

/// Runs a task that writes `same.txt` on a worker of one session, then another task:
/// by the time the second has finished, the first's handling (result, then removal)
/// is over. The first task's workspace, if it is still there.
async fn workspace_after_the_next_task(keep: bool) -> Option<String> {
    let gate = Gate::new();
    let mut cluster = start(
        ScriptedModel::start(write_then_read(gate.clone())).await,
        0,
        1,
    )
    .await
    .expect("cluster");
    cluster.add_worker_with("only", 1, |config| config.keep_workspaces = keep);
    let first = submit(&cluster, "write first", vec![]).await;
    let file = cluster
        .wait_for_task_file(&first, "same.txt")
        .await
        .expect("the task's workspace exists while it runs");
    gate.open();
    let task = cluster.wait_finished(&first).await.expect("finished");
    assert_eq!(result_of(&task).status(), pb::TaskStatus::Completed);
    let second = submit(&cluster, "write second", vec![]).await;
    cluster.wait_finished(&second).await.expect("finished");
    let left = std::fs::read_to_string(&file).ok();
    assert_eq!(
        cluster.task_workspace(&first).is_some(),
        left.is_some(),
        "the workspace and its file go together"
    );
    cluster.shutdown().await;
    left
}

#[tokio::test]
async fn a_workspace_is_removed_once_its_result_is_recorded() {
    assert_eq!(workspace_after_the_next_task(false).await, None);
}

#[tokio::test]
async fn keep_workspaces_keeps_a_finished_tasks_workspace() {
    assert_eq!(
        workspace_after_the_next_task(true).await.as_deref(),
        Some("first\n")
    );
}

#[tokio::test]
async fn a_task_that_calls_no_tool_never_makes_its_workspace() {
    let mut cluster = start(ScriptedModel::echo().await, 0, 1)
        .await
        .expect("cluster");
    git_base(&cluster);
    cluster.add_worker_with("keeper", 1, |config| config.keep_workspaces = true);
    let id = submit(&cluster, "just answer", vec![]).await;
    let task = cluster.wait_finished(&id).await.expect("finished");
    let result = result_of(&task);
    assert_eq!(result.status(), pb::TaskStatus::Completed, "{result:?}");
    assert_eq!(result.patch, "");
    // Even with workspaces kept, there is nothing to keep: the directory the session
    // was given was never made, and no repository either.
    assert_eq!(cluster.task_workspace(&id), None, "no copy was made");
    let dirs = taskwire_e2e::task_entries(cluster.workspaces.path(), &id);
    assert_eq!(dirs, Vec::<String>::new(), "no repository either");
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_session_whose_workspace_is_not_made_yet_is_told_its_bases_files() {
    let mut cluster = start(ScriptedModel::echo().await, 0, 1)
        .await
        .expect("cluster");
    git_base(&cluster);
    cluster.add_worker("w", 1);
    let system_prompt = |cluster: &Cluster, prompt: &str| {
        cluster
            .model
            .requests()
            .into_iter()
            .find(|r| r.first_user_message() == Some(prompt))
            .and_then(|r| r.system_prompt().map(str::to_owned))
            .expect("the task's model request")
    };
    let id = submit(&cluster, "just answer", vec![]).await;
    cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(cluster.task_workspace(&id), None, "no workspace was made");
    let prompt = system_prompt(&cluster, "just answer");
    assert!(
        prompt.contains("is the workspace a git repository: yes"),
        "a workspace made from a git base is a clone: {prompt}"
    );
    assert!(!prompt.contains("<instructions"), "{prompt}");

    // A project file committed to the base reaches the sessions that start after it
    // (the base is looked at again once a second at most).
    let base = cluster.workspace.path();
    std::fs::write(base.join("AGENTS.md"), "Answer in haiku.\n").expect("write");
    git(base, &["add", "AGENTS.md"]);
    git(base, &["commit", "-q", "-m", "instructions"]);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let id = submit(&cluster, "answer again", vec![]).await;
    cluster.wait_finished(&id).await.expect("finished");
    let prompt = system_prompt(&cluster, "answer again");
    assert!(
        prompt.contains("<instructions file=\"AGENTS.md\">\nAnswer in haiku.\n</instructions>"),
        "{prompt}"
    );
    cluster.shutdown().await;
}
