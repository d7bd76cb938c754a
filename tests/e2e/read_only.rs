//! A task that cannot change files reads the worker's base directly: no copy is made
//! for it, nor for a parent that only delegated to it. One that starts from its
//! parent's changes, or runs a command template's !`cmd`, still works in a copy, and
//! the base never changes.

use serde_json::json;
use taskwire_e2e::{Cluster, start_with};
use taskwire_protocol::pb;
use taskwire_test_support::files::{git, snapshot};
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

fn write(dir: &std::path::Path, file: &str, text: &str) {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// The base: a git repository with `a.txt` committed, then changed.
fn git_base(cluster: &Cluster) -> std::path::PathBuf {
    let base = cluster.workspace.path().to_owned();
    git(&base, &["init", "-q", "-b", "main"]);
    write(&base, "a.txt", "committed\n");
    git(&base, &["add", "a.txt"]);
    git(&base, &["commit", "-q", "-m", "start"]);
    write(&base, "a.txt", "committed\nuncommitted\n");
    base
}

fn tool_outputs(req: &SeenRequest) -> Vec<&str> {
    req.messages
        .iter()
        .filter(|m| m.role == "tool")
        .map(|m| m.content.as_str())
        .collect()
}

/// `delegate`: the parent asks an `explore` child to read `a.txt`.
/// `write then delegate`: the parent first writes `new.txt`, then asks the child to
/// read it. The child reads (and greps) what it is told, then answers with it.
fn script(req: &SeenRequest) -> ScriptedReply {
    let user = req.first_user_message().unwrap_or_default();
    if let Some(file) = user.strip_prefix("child: read ") {
        return match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([
                ("r1", "read", json!({"filePath": file})),
                ("g1", "grep", json!({"pattern": "committed|parent"})),
            ]),
            _ => ScriptedReply::text(format!("child saw: {}", tool_outputs(req).join(" | "))),
        };
    }
    let delegate = |file: &str| {
        ScriptedReply::tool_calls([(
            "t1",
            "task",
            json!({"description": "read", "prompt": format!("child: read {file}"), "subagent_type": "explore"}),
        )])
    };
    match (user, req.assistant_turns()) {
        ("delegate", 0) => delegate("a.txt"),
        ("write then delegate", 0) => ScriptedReply::tool_calls([(
            "w1",
            "write",
            json!({"filePath": "new.txt", "content": "from the parent\n"}),
        )]),
        ("write then delegate", 1) => delegate("new.txt"),
        _ => ScriptedReply::text(format!("parent got: {}", tool_outputs(req).join(" | "))),
    }
}

/// A cluster with one worker that keeps every workspace it makes, so that a test can
/// tell which tasks had one.
async fn cluster(config: Option<std::path::PathBuf>) -> Cluster {
    let mut cluster = start_with(ScriptedModel::start(script).await, 0, 1, |c| {
        c.config_dir = config;
    })
    .await
    .expect("cluster");
    cluster.add_worker_with("keeper", 2, |config| config.keep_workspaces = true);
    cluster
}

/// What the worker made for `task`: its workspaces and their private repositories.
fn made_for(cluster: &Cluster, task: &str) -> Vec<String> {
    taskwire_e2e::task_entries(cluster.workspaces.path(), task)
}

/// Runs the root `prompt` on `build` to its end; the finished root and its only child.
async fn run_tree(cluster: &Cluster, prompt: &str) -> (pb::Task, pb::Task) {
    let parent = cluster.submit("build", prompt).await.expect("submit");
    let done = cluster.wait_finished(&parent).await.expect("finished");
    assert_eq!(done.status(), pb::TaskStatus::Completed, "{done:?}");
    let kids = cluster.children(&parent).await.expect("children");
    assert_eq!(kids.len(), 1);
    let child = cluster
        .wait_finished(&kids[0].task_id)
        .await
        .expect("child");
    (done, child)
}

fn text_of(task: &pb::Task) -> &str {
    task.result
        .as_ref()
        .and_then(|r| r.output.as_ref())
        .map_or("", |o| o.text.as_str())
}

#[tokio::test]
async fn an_explore_child_reads_the_base_directly_and_its_delegating_parent_makes_no_copy() {
    let cluster = cluster(None).await;
    let base = git_base(&cluster);
    let before = snapshot(&base);
    let (done, child) = run_tree(&cluster, "delegate").await;
    let parent = done.task_id.clone();
    let seen = text_of(&child);
    assert!(
        seen.contains("committed") && seen.contains("uncommitted") && seen.contains("a.txt"),
        "the child read and searched the base as it is: {seen}"
    );
    assert_eq!(child.result.as_ref().expect("result").patch, "");
    assert!(text_of(&done).contains("child saw:"), "{}", text_of(&done));
    assert_eq!(
        made_for(&cluster, &child.task_id),
        Vec::<String>::new(),
        "the read-only child had no copy, although the worker keeps every one"
    );
    assert_eq!(
        made_for(&cluster, &parent),
        Vec::<String>::new(),
        "a parent that only delegated made no copy either"
    );
    assert_eq!(snapshot(&base), before, "the base is unchanged");
    cluster.shutdown().await;
}

#[tokio::test]
async fn an_explore_child_of_a_parent_with_changes_reads_them_in_a_copy_of_its_own() {
    let cluster = cluster(None).await;
    let base = git_base(&cluster);
    let before = snapshot(&base);
    let (_, child) = run_tree(&cluster, "write then delegate").await;
    let seen = text_of(&child);
    assert!(
        seen.contains("from the parent"),
        "the parent's change: {seen}"
    );
    assert!(
        !made_for(&cluster, &child.task_id).is_empty(),
        "a child starting from its parent's changes works in a copy"
    );
    assert_eq!(snapshot(&base), before, "the base is unchanged");
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_read_only_agents_command_template_runs_its_commands_in_a_copy_never_in_the_base() {
    let config = tempfile::tempdir().expect("config dir");
    write(
        config.path(),
        "agents/reader.md",
        "---\ndescription: reads\nmode: primary\ntools:\n  edit: false\n  write: false\n  bash: false\n  task: false\n---\nYou read.\n",
    );
    write(
        config.path(),
        "commands/stamp.md",
        "---\nagent: reader\nsubtask: false\n---\nStamped: !`touch stamped.txt && echo done`\n",
    );
    let cluster = cluster(Some(config.path().to_owned())).await;
    let base = git_base(&cluster);
    let before = snapshot(&base);
    let submitted = cluster
        .client()
        .await
        .expect("client")
        .run_command(pb::RunCommandRequest {
            command: "/stamp".into(),
            ..Default::default()
        })
        .await
        .expect("run")
        .into_inner();
    let task = cluster
        .wait_finished(&submitted.task_id)
        .await
        .expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    let asked = cluster
        .model
        .requests()
        .into_iter()
        .find_map(|r| r.first_user_message().map(str::to_owned))
        .expect("the session asked the model");
    assert!(asked.contains("Stamped: done"), "the command ran: {asked}");
    assert!(
        !made_for(&cluster, &submitted.task_id).is_empty(),
        "its commands ran in a copy"
    );
    assert!(!base.join("stamped.txt").exists(), "never in the base");
    assert_eq!(snapshot(&base), before, "the base is unchanged");
    cluster.shutdown().await;
}
