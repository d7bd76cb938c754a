//! Approvals from anywhere in a task tree reach the person watching the root: a child's
//! or grandchild's `approval_required` appears in the root's `Watch` (and in
//! `taskwire watch ROOT`) naming the task that asks and how to answer it, the waiting
//! ancestors say they wait on it, and `taskwire approve` takes the descendant's id.

use futures::StreamExt;
use taskwire_e2e::process::Taskwire;
use taskwire_e2e::{Cluster, PATIENCE, start_with, wait_for};
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

/// `asker` asks before every command; `relay` may delegate further.
const ASKER: &str = "---\ndescription: Runs one command, asking first\nmode: subagent\n\
                     permission:\n  bash: { \"*\": ask }\n---\nYou run commands.\n";
const RELAY: &str = "---\ndescription: Passes work on\nmode: subagent\ntools: { task: true }\n---\n\
                     You delegate.\n";

fn first_user(req: &SeenRequest) -> String {
    req.first_user_message().unwrap_or_default().to_owned()
}

fn last_tool(req: &SeenRequest) -> String {
    req.messages
        .iter()
        .rev()
        .find(|m| m.role == "tool")
        .map(|m| m.content.clone())
        .unwrap_or_default()
}

fn delegate(agent: &str, prompt: &str) -> ScriptedReply {
    ScriptedReply::tool_calls([(
        "d1",
        "task",
        serde_json::json!({"description": "pass it on", "prompt": prompt, "subagent_type": agent}),
    )])
}

/// `root: via relay` goes root → relay → asker; `root: direct` goes root → asker; the
/// asker's `touch` needs an approval.
fn script(req: &SeenRequest) -> ScriptedReply {
    let user = first_user(req);
    let first = req.assistant_turns() == 0;
    match user.as_str() {
        "leaf: touch it" if first => ScriptedReply::tool_calls([(
            "b1",
            "bash",
            serde_json::json!({"command": "touch approved.txt", "description": "create a file"}),
        )]),
        "middle: pass it on" if first => delegate("asker", "leaf: touch it"),
        "root: via relay" if first => delegate("relay", "middle: pass it on"),
        "root: direct" if first => delegate("asker", "leaf: touch it"),
        _ => ScriptedReply::text(format!("done: {}", last_tool(req))),
    }
}

async fn cluster(config: &tempfile::TempDir) -> Cluster {
    for (name, text) in [("asker", ASKER), ("relay", RELAY)] {
        let dir = config.path().join("agents");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join(format!("{name}.md")), text).expect("write agent");
    }
    let dir = config.path().to_owned();
    let mut cluster = start_with(ScriptedModel::start(script).await, 0, 1, move |c| {
        c.config_dir = Some(dir);
        c.max_depth = 2;
    })
    .await
    .expect("cluster");
    // A session each for the root, the middle and the leaf, on different workers.
    for i in 0..3 {
        cluster.add_worker(&format!("w{i}"), 1);
    }
    cluster
}

/// Watches `root` until an `approval_required` for another task arrives; returns the
/// progress event carrying it.
async fn descendant_ask(cluster: &Cluster, root: &str) -> pb::TaskProgress {
    let mut client = cluster.client().await.expect("client");
    let mut stream = client
        .watch(pb::WatchRequest {
            task_id: root.into(),
        })
        .await
        .expect("watch")
        .into_inner();
    tokio::time::timeout(PATIENCE, async {
        while let Some(ev) = stream.next().await {
            if let Some(pb::watch_event::Event::Progress(p)) = ev.expect("event").event
                && let Some(pb::task_progress::Event::ApprovalRequired(a)) = &p.event
                && a.task_id != root
            {
                return p;
            }
        }
        panic!("the root's watch ended without a descendant's approval request")
    })
    .await
    .expect("the descendant's ask reached the root in time")
}

fn ask_of(p: &pb::TaskProgress) -> &pb::ApprovalRequired {
    match &p.event {
        Some(pb::task_progress::Event::ApprovalRequired(a)) => a,
        other => panic!("not an approval: {other:?}"),
    }
}

#[tokio::test]
async fn a_childs_ask_reaches_the_roots_watch_and_taskwire_approve_answers_it() {
    let config = tempfile::tempdir().expect("config");
    let cluster = cluster(&config).await;
    let root = cluster
        .submit("general", "root: direct")
        .await
        .expect("submit");

    let event = descendant_ask(&cluster, &root).await;
    let ask = ask_of(&event);
    let kids = cluster.children(&root).await.expect("children");
    assert_eq!(kids.len(), 1);
    assert_eq!(ask.task_id, kids[0].task_id, "names the child that asks");
    assert_eq!(ask.patterns, vec!["touch approved.txt".to_owned()]);
    assert_eq!(event.task_id, root, "shown in the root's own progress");
    assert_eq!(
        event.status(),
        pb::TaskStatus::AwaitingApproval,
        "the root says it waits on an approval"
    );
    wait_for(&cluster, &ask.task_id, "awaiting_approval", |t| {
        t.status() == pb::TaskStatus::AwaitingApproval
    })
    .await
    .expect("the child waits");

    // `taskwire watch ROOT` shows the command that answers it; running that command
    // (with the child's id) lets the tree finish.
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let addr = cluster.url();
    let mut watch = taskwire
        .spawn_with_env("watch", &["watch", &root, "--addr", &addr], &[])
        .expect("taskwire watch");
    let command = format!("taskwire approve {} {}", ask.task_id, ask.request_id);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !watch.stdout().contains(&command) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "taskwire watch never showed `{command}`:\n{}",
            watch.stdout()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        watch
            .stdout()
            .contains(&format!("approval required in task {}", ask.task_id)),
        "{}",
        watch.stdout()
    );
    let mut approve = taskwire
        .spawn_with_env(
            "approve",
            &[
                "approve",
                &ask.task_id,
                &ask.request_id,
                "--answer",
                "once",
                "--addr",
                &addr,
            ],
            &[],
        )
        .expect("taskwire approve");
    let status = approve.wait().await.expect("approve exits");
    assert!(status.success(), "{}", approve.stderr());

    let done = cluster.wait_finished(&root).await.expect("root finished");
    assert_eq!(done.status(), pb::TaskStatus::Completed);
    let asker = cluster
        .wait_finished(&ask.task_id)
        .await
        .expect("asker finished");
    let patch = &asker.result.as_ref().expect("result").patch;
    assert!(
        taskwire_e2e::created_in_patch(patch, "approved.txt").is_some(),
        "the approved command ran: {patch}"
    );
    assert!(watch.wait().await.expect("watch ends").success());
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_grandchilds_ask_reaches_the_root_through_every_ancestor() {
    let config = tempfile::tempdir().expect("config");
    let cluster = cluster(&config).await;
    let root = cluster
        .submit("general", "root: via relay")
        .await
        .expect("submit");

    let event = descendant_ask(&cluster, &root).await;
    let ask = ask_of(&event).clone();
    let middle = cluster.children(&root).await.expect("children");
    assert_eq!(middle.len(), 1);
    assert_eq!(middle[0].agent, "relay");
    let leaf = cluster
        .children(&middle[0].task_id)
        .await
        .expect("children");
    assert_eq!(leaf.len(), 1);
    assert_eq!(ask.task_id, leaf[0].task_id, "names the grandchild");
    assert_eq!(event.status(), pb::TaskStatus::AwaitingApproval);

    // The middle task shows the same ask in its own progress.
    let middle_events = {
        let mut client = cluster.client().await.expect("client");
        let mut stream = client
            .watch(pb::WatchRequest {
                task_id: middle[0].task_id.clone(),
            })
            .await
            .expect("watch")
            .into_inner();
        let mut found = None;
        tokio::time::timeout(PATIENCE, async {
            while let Some(ev) = stream.next().await {
                if let Some(pb::watch_event::Event::Progress(p)) = ev.expect("event").event
                    && let Some(pb::task_progress::Event::ApprovalRequired(a)) = &p.event
                {
                    found = Some((a.clone(), p.status()));
                    return;
                }
            }
        })
        .await
        .expect("the middle's ask in time");
        found
    };
    let (middle_ask, middle_status) = middle_events.expect("the middle shows the ask");
    assert_eq!(middle_ask.task_id, ask.task_id);
    assert_eq!(middle_status, pb::TaskStatus::AwaitingApproval);

    let mut client = cluster.client().await.expect("client");
    client
        .approve(pb::ApproveRequest {
            task_id: ask.task_id.clone(),
            request_id: ask.request_id.clone(),
            answer: pb::ApprovalAnswer::Once as i32,
            message: String::new(),
        })
        .await
        .expect("approve the grandchild by its id");
    let done = cluster.wait_finished(&root).await.expect("root finished");
    assert_eq!(done.status(), pb::TaskStatus::Completed);
    let asker = cluster
        .wait_finished(&ask.task_id)
        .await
        .expect("asker finished");
    let patch = &asker.result.as_ref().expect("result").patch;
    assert!(
        taskwire_e2e::created_in_patch(patch, "approved.txt").is_some(),
        "the approved command ran: {patch}"
    );
    cluster.shutdown().await;
}
