//! Deadlines and cancellation: a task never runs past its deadline or after a cancel,
//! a running session stops within a second, and a cancel reaches the whole subtree.

use std::time::{Duration, Instant};

use taskwire_e2e::{Cluster, PATIENCE, start, wait_for};
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};
use tonic::transport::Channel;

fn in_secs(secs: f64) -> prost_types::Timestamp {
    let t = std::time::SystemTime::now() + Duration::from_secs_f64(secs);
    let d = t.duration_since(std::time::UNIX_EPOCH).expect("after 1970");
    prost_types::Timestamp {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

/// Answers "slow" prompts after a long time, everything else at once.
fn slow_or_echo(req: &SeenRequest) -> ScriptedReply {
    let user = req.last_user_message().unwrap_or_default().to_owned();
    if user.starts_with("slow") {
        ScriptedReply::text("too late").with_delay(Duration::from_secs(30))
    } else {
        ScriptedReply::text(format!("echo: {user}"))
    }
}

/// A deployment whose model answers with `script`.
async fn start_scripted(
    script: fn(&SeenRequest) -> ScriptedReply,
    workers: usize,
    concurrency: usize,
) -> Cluster {
    start(ScriptedModel::start(script).await, workers, concurrency)
        .await
        .expect("cluster")
}

async fn submit(
    cluster: &Cluster,
    agent: &str,
    prompt: &str,
    deadline: Option<prost_types::Timestamp>,
) -> String {
    let mut client = cluster.client().await.expect("client");
    client
        .submit(pb::SubmitRequest {
            agent: agent.into(),
            prompt: prompt.into(),
            deadline,
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner()
        .task_id
}

/// Cancels `task_id`; returns the status the coordinator answers with.
async fn cancel(
    client: &mut TaskServiceClient<Channel>,
    task_id: &str,
    reason: &str,
) -> pb::TaskStatus {
    client
        .cancel(pb::CancelRequest {
            task_id: task_id.into(),
            reason: reason.into(),
        })
        .await
        .expect("cancel")
        .into_inner()
        .status()
}

/// Whether the model has been asked `prompt`.
fn model_saw(cluster: &Cluster, prompt: &str) -> bool {
    cluster
        .model
        .requests()
        .iter()
        .any(|r| r.last_user_message() == Some(prompt))
}

async fn wait_model_saw(cluster: &Cluster, prompt: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !model_saw(cluster, prompt) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the model never saw {prompt:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the task's first attempt has ended: the worker reports that on the
/// attempt, not the task.
async fn wait_attempt_ended(cluster: &Cluster, task_id: &str) -> pb::Task {
    wait_for(cluster, task_id, "stopped", |t| {
        t.attempts.first().is_some_and(|a| a.finished_at.is_some())
    })
    .await
    .expect("the session stopped")
}

/// Runs one more task to completion: once it is done, the worker has also taken (and
/// dropped) every message queued before it.
async fn drain(cluster: &Cluster) {
    let id = submit(cluster, "general", "drain", None).await;
    assert_eq!(
        cluster
            .wait_finished(&id)
            .await
            .expect("drain finished")
            .status(),
        pb::TaskStatus::Completed
    );
}

#[tokio::test]
async fn the_worker_stops_a_session_at_its_deadline() {
    let cluster = start_scripted(slow_or_echo, 1, 2).await;
    let started = Instant::now();
    let id = submit(&cluster, "general", "slow work", Some(in_secs(1.0))).await;
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::DeadlineExceeded);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stopped long before the model answered"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_task_still_queued_past_its_deadline_never_starts() {
    let mut cluster = start_scripted(slow_or_echo, 0, 1).await;
    let id = submit(
        &cluster,
        "general",
        "expired before it ran",
        Some(in_secs(0.5)),
    )
    .await;
    let task = wait_for(&cluster, &id, "deadline_exceeded", |t| {
        t.status() == pb::TaskStatus::DeadlineExceeded
    })
    .await
    .expect("the sweeper expires it");
    assert_eq!(task.attempt, 0);
    cluster.add_worker("late", 2);
    drain(&cluster).await;
    assert!(
        !model_saw(&cluster, "expired before it ran"),
        "an expired task never reaches the model"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_queued_task_never_runs_and_cancelling_twice_is_harmless() {
    let mut cluster = start_scripted(slow_or_echo, 0, 1).await;
    let id = submit(&cluster, "general", "never run me", None).await;
    let mut client = cluster.client().await.expect("client");
    let first = cancel(&mut client, &id, "changed my mind").await;
    assert_eq!(first, pb::TaskStatus::Cancelled);
    let again = cancel(&mut client, &id, "").await;
    assert_eq!(again, pb::TaskStatus::Cancelled);
    cluster.add_worker("late", 2);
    drain(&cluster).await;
    assert!(!model_saw(&cluster, "never run me"));
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(
        (task.status(), task.attempt),
        (pb::TaskStatus::Cancelled, 0)
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn cancelling_a_running_task_stops_its_session_within_a_second() {
    let cluster = start_scripted(slow_or_echo, 1, 2).await;
    let id = submit(&cluster, "general", "slow and cancelled", None).await;
    wait_model_saw(&cluster, "slow and cancelled").await;
    let mut client = cluster.client().await.expect("client");
    let cancelled_at = Instant::now();
    cancel(&mut client, &id, "").await;
    let task = wait_attempt_ended(&cluster, &id).await;
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(1),
        "stopped in {:?}",
        cancelled_at.elapsed()
    );
    assert_eq!(task.status(), pb::TaskStatus::Cancelled);
    assert_eq!(task.attempts[0].status(), pb::TaskStatus::Cancelled);
    cluster.shutdown().await;
}

/// `build` runs a long command that records its pid; the test cancels the task.
fn long_bash(req: &SeenRequest) -> ScriptedReply {
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([(
            "b1",
            "bash",
            serde_json::json!({"command": "echo $$ > pid.txt; sleep 30", "description": "wait"}),
        )]),
        _ => ScriptedReply::text("done"),
    }
}

#[tokio::test]
async fn cancelling_a_task_kills_its_running_bash_command() {
    let cluster = start_scripted(long_bash, 1, 2).await;
    let id = submit(&cluster, "build", "run the long command", None).await;
    let pid_file = cluster
        .wait_for_task_file(&id, "pid.txt")
        .await
        .expect("the command started");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let pid = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        {
            break pid;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the command never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let alive = |pid: u32| std::path::Path::new(&format!("/proc/{pid}")).exists();
    assert!(alive(pid));
    let mut client = cluster.client().await.expect("client");
    let cancelled_at = Instant::now();
    cancel(&mut client, &id, "").await;
    while alive(pid) {
        assert!(
            cancelled_at.elapsed() < Duration::from_secs(1),
            "bash {pid} still running after a second"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cluster.shutdown().await;
}

/// A parent whose child never answers.
fn parent_with_stuck_child(req: &SeenRequest) -> ScriptedReply {
    let first = req
        .messages
        .iter()
        .find(|m| m.role == "user")
        .map(|m| m.content.as_str())
        .unwrap_or_default();
    if first == "stuck child" {
        return ScriptedReply::text("never").with_delay(Duration::from_secs(30));
    }
    ScriptedReply::tool_calls([(
        "t1",
        "task",
        serde_json::json!({"description": "get stuck", "prompt": "stuck child", "subagent_type": "explore"}),
    )])
}

#[tokio::test]
async fn cancelling_a_parent_cancels_its_running_child() {
    let cluster = start_scripted(parent_with_stuck_child, 2, 1).await;
    let parent = submit(&cluster, "general", "delegate", None).await;
    wait_model_saw(&cluster, "stuck child").await;
    let mut client = cluster.client().await.expect("client");
    cancel(&mut client, &parent, "").await;
    let children = client
        .list(pb::ListRequest {
            parent_task_id: parent.clone(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .tasks;
    assert_eq!(children.len(), 1);
    let child = wait_attempt_ended(&cluster, &children[0].task_id).await;
    assert_eq!(child.status(), pb::TaskStatus::Cancelled);
    assert_eq!(
        cluster
            .wait_finished(&parent)
            .await
            .expect("parent")
            .status(),
        pb::TaskStatus::Cancelled
    );
    cluster.shutdown().await;
}
