//! No orphans: when a parent ends (an error, its deadline, a dead letter) while its
//! child runs, the child is cancelled with a reason naming the parent and its worker
//! stops the session; the sweeper ends what a parent left behind even when the
//! coordinator never got to it.

use std::time::Duration;

use prost::Message as _;
use serde_json::json;
use taskwire_e2e::process::{Taskwire, WorkerOptions};
use taskwire_e2e::{Cluster, PATIENCE, start_with, wait_for};
use taskwire_protocol::{ClaimEpoch, TaskError, TaskId, TaskResult, TaskStatus, TraceId, pb};
use taskwire_test_support::{Gate, ScriptedModel, ScriptedReply, SeenRequest};

const PARENT: &str = "delegate and wait";
const CHILD: &str = "child: take your time";

fn first_user(req: &SeenRequest) -> &str {
    req.first_user_message().unwrap_or_default()
}

/// The parent starts one child and, once it has its result, answers; the child
/// answers when `gate` opens (in these tests: never).
fn script(gate: Gate) -> impl Fn(&SeenRequest) -> ScriptedReply + Send + Sync + 'static {
    move |req| {
        if first_user(req) == CHILD {
            return ScriptedReply::text("child done").with_gate(&gate);
        }
        match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([(
                "call_child",
                "task",
                json!({"description": "wait", "prompt": CHILD, "subagent_type": "explore"}),
            )]),
            _ => ScriptedReply::text("parent done"),
        }
    }
}

async fn cluster(
    workers: usize,
    configure: impl FnOnce(&mut taskwire_coordinator::CoordinatorConfig),
) -> Cluster {
    let model = ScriptedModel::start(script(Gate::new())).await;
    // One session per worker: the parent holds one, the child needs another.
    start_with(model, workers, 1, configure)
        .await
        .expect("cluster")
}

async fn submit(cluster: &Cluster, deadline: Option<prost_types::Timestamp>) -> String {
    cluster
        .client()
        .await
        .expect("client")
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: PARENT.into(),
            deadline,
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner()
        .task_id
}

/// Waits until the parent's only child runs and its model was asked; returns its id.
async fn running_child(cluster: &Cluster, parent: &str) -> String {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let children = cluster.children(parent).await.expect("children");
        let asked = cluster
            .model
            .requests()
            .iter()
            .any(|r| first_user(r) == CHILD);
        if let [child] = children.as_slice()
            && child.status() == pb::TaskStatus::Running
            && asked
        {
            return child.task_id.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the child never ran: {children:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the child is cancelled and its worker has stopped the session (the
/// attempt ended); checks the reason names the parent and how it ended.
async fn assert_cancelled_for(cluster: &Cluster, child: &str, parent: &str, ended: &str) {
    let task = wait_for(cluster, child, "cancelled and stopped", |t| {
        t.status() == pb::TaskStatus::Cancelled
            && t.attempts.first().is_some_and(|a| a.finished_at.is_some())
    })
    .await
    .expect("the child was cancelled and its session stopped");
    let result = task.result.expect("a finished task has a result");
    assert_eq!(result.status(), pb::TaskStatus::Cancelled);
    let error = result.errors.first().expect("the reason");
    assert_eq!(error.code, "parent_ended");
    assert_eq!(
        error.message,
        format!("parent task {parent} ended ({ended})")
    );
    assert_eq!(task.attempts.len(), 1, "the child never ran again");
}

/// The parent's current claim, read from the store.
async fn claim_of(cluster: &Cluster, task: TaskId) -> (ClaimEpoch, u32) {
    let store = taskwire_store::Store::connect(cluster.db.url(), 2)
        .await
        .expect("store");
    let record = store.get_task(task).await.expect("get").expect("exists");
    (record.claim_epoch, record.attempt)
}

#[tokio::test]
async fn a_parent_that_fails_while_its_child_runs_cancels_the_child() {
    // The sweeper stays out of it: recording the parent's result ends the subtree.
    let cluster = cluster(2, |c| c.sweep_interval = Duration::from_secs(3600)).await;
    let parent = submit(&cluster, None).await;
    let child = running_child(&cluster, &parent).await;

    // The parent's attempt fails, reported exactly as its worker reports a session
    // whose model failed for good.
    let parent_id = TaskId::parse_field("task_id", &parent).expect("task id");
    let (epoch, attempt) = claim_of(&cluster, parent_id).await;
    let failed = TaskResult {
        task_id: parent_id,
        trace_id: TraceId::generate(),
        attempt,
        claim_epoch: epoch,
        status: TaskStatus::Error,
        text: String::new(),
        structured: None,
        tool_calls: vec![],
        errors: vec![TaskError {
            code: "session_error".into(),
            message: "model request failed: 400 bad request".into(),
            retryable: false,
        }],
        usage: Default::default(),
        own_usage: Default::default(),
        latency_ms: 1,
        steps: 1,
        session_id: None,
        worker_id: None,
        retry_scheduled: false,
        transcript_json: None,
        patch: String::new(),
        title: None,
        provenance: Vec::new(),
        traceparent: String::new(),
        patch_ref: None,
    };
    let subjects =
        taskwire_bus::Subjects::new(&taskwire_coordinator::CoordinatorConfig::default().prefix);
    let nats = async_nats::connect(cluster.nats.url()).await.expect("nats");
    let js = async_nats::jetstream::new(nats);
    js.publish(
        subjects.result(parent_id),
        pb::TaskResult::from(&failed).encode_to_vec().into(),
    )
    .await
    .expect("publish")
    .await
    .expect("stored");

    assert_cancelled_for(&cluster, &child, &parent, "error").await;
    let parent_task = cluster.wait_finished(&parent).await.expect("parent");
    assert_eq!(parent_task.status(), pb::TaskStatus::Error);
    cluster.shutdown().await;
}

#[tokio::test]
async fn the_sweeper_cancels_a_running_child_whose_parent_ended_without_it() {
    let cluster = cluster(2, |c| c.sweep_interval = Duration::from_millis(200)).await;
    let parent = submit(&cluster, None).await;
    let child = running_child(&cluster, &parent).await;

    // The parent ends in the store alone, as if the coordinator that wrote it had died
    // before cancelling the child.
    let store = taskwire_store::Store::connect(cluster.db.url(), 2)
        .await
        .expect("store");
    let parent_id = TaskId::parse_field("task_id", &parent).expect("task id");
    assert!(
        store
            .dead_letter_task(parent_id, "lost")
            .await
            .expect("dead-letter")
            .is_some()
    );

    assert_cancelled_for(&cluster, &child, &parent, "dead_lettered").await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_past_its_deadline_cancels_its_running_child() {
    let taskwire = Taskwire::locate().expect("taskwire binary");
    // The sweeper stays out of it: the parent's worker enforces the deadline.
    let cluster = cluster(1, |c| c.sweep_interval = Duration::from_secs(3600)).await;
    let parent = submit(&cluster, Some(in_secs(8.0))).await;
    wait_for(&cluster, &parent, "running", |t| {
        t.status() == pb::TaskStatus::Running
    })
    .await
    .expect("the parent runs on the in-process worker");
    let (nats, model) = (cluster.nats.url(), cluster.model.base_url());
    let options = WorkerOptions::new(&nats, &model, cluster.workspace.path());
    let mut child_worker = taskwire.worker("child-worker", &options).expect("start");
    let child = running_child(&cluster, &parent).await;
    // The child shares its parent's deadline: its worker would stop it at the same
    // moment. Frozen, it cannot, so only the parent's end can cancel it.
    child_worker.check_running().expect("running");
    child_worker.pause().expect("pause");

    let parent_task = cluster.wait_finished(&parent).await.expect("parent");
    assert_eq!(parent_task.status(), pb::TaskStatus::DeadlineExceeded);
    let frozen = wait_for(&cluster, &child, "cancelled", |t| {
        t.status() == pb::TaskStatus::Cancelled
    })
    .await
    .expect("cancelled while its worker is frozen");
    assert!(frozen.attempts[0].finished_at.is_none(), "{frozen:?}");
    child_worker.resume().expect("resume");
    assert_cancelled_for(&cluster, &child, &parent, "deadline_exceeded").await;
    cluster.shutdown().await;
}

fn in_secs(secs: f64) -> prost_types::Timestamp {
    let t = std::time::SystemTime::now() + Duration::from_secs_f64(secs);
    let d = t.duration_since(std::time::UNIX_EPOCH).expect("after 1970");
    prost_types::Timestamp {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}
