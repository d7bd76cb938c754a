//! Delayed starts (`not_before`): a task waits `scheduled`, stored and not dispatched,
//! until its time; it may be cancelled before it; a start that cannot come is refused.

use std::time::{Duration, Instant};

use taskwire_e2e::start;
use taskwire_protocol::pb;
use taskwire_test_support::ScriptedModel;

fn in_secs(secs: u64) -> prost_types::Timestamp {
    prost_types::Timestamp::from(std::time::SystemTime::now() + Duration::from_secs(secs))
}

fn delayed(prompt: &str, not_before: prost_types::Timestamp) -> pb::SubmitRequest {
    pb::SubmitRequest {
        agent: "general".into(),
        prompt: prompt.into(),
        not_before: Some(not_before),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_delayed_task_waits_scheduled_and_runs_at_its_time() {
    let cluster = start(ScriptedModel::echo().await, 1, 1)
        .await
        .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let not_before = in_secs(3);
    let id = client
        .submit(delayed("later", not_before))
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    let task = client
        .get(pb::GetRequest {
            task_id: id.clone(),
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(task.status(), pb::TaskStatus::Scheduled);
    // Stored to the microsecond.
    let micros = |t: prost_types::Timestamp| (t.seconds, t.nanos / 1000);
    assert_eq!(task.not_before.map(micros), Some(micros(not_before)));
    let listed = client
        .list(pb::ListRequest {
            status: pb::TaskStatus::Scheduled as i32,
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .tasks;
    assert_eq!(listed.len(), 1, "listed as scheduled");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        cluster.model.request_count(),
        0,
        "nothing runs before its time"
    );

    let done = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(done.status(), pb::TaskStatus::Completed);
    let started = done
        .attempts
        .first()
        .and_then(|a| a.started_at)
        .expect("an attempt");
    assert!(
        started.seconds >= not_before.seconds,
        "started at {started:?}, not before {not_before:?}"
    );
    assert_eq!(done.attempts.len(), 1);
}

#[tokio::test]
async fn a_scheduled_task_cancelled_before_its_time_never_runs() {
    let cluster = start(ScriptedModel::echo().await, 1, 1)
        .await
        .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let id = client
        .submit(delayed("never", in_secs(2)))
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    let cancelled = client
        .cancel(pb::CancelRequest {
            task_id: id.clone(),
            reason: "changed my mind".into(),
        })
        .await
        .expect("cancel")
        .into_inner();
    assert_eq!(cancelled.status(), pb::TaskStatus::Cancelled);
    // Past its time, and a few sweeps later: still cancelled, never dispatched.
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let task = client
        .get(pb::GetRequest { task_id: id })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(task.status(), pb::TaskStatus::Cancelled);
    assert!(task.attempts.is_empty(), "{:?}", task.attempts);
    assert_eq!(cluster.model.request_count(), 0);
}

#[tokio::test]
async fn a_delayed_start_after_the_deadline_or_for_a_child_is_refused() {
    let cluster = start(ScriptedModel::echo().await, 0, 1)
        .await
        .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let mut late = delayed("late", in_secs(120));
    late.deadline = Some(in_secs(60));
    let err = client.submit(late).await.expect_err("after the deadline");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("not_before"), "{}", err.message());

    let parent = cluster.submit("general", "parent").await.expect("parent");
    let mut child = delayed("child", in_secs(30));
    child.parent_task_id = parent;
    let err = client.submit(child).await.expect_err("a child");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("not_before"), "{}", err.message());
}
