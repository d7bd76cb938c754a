//! The relay against a real Postgres and nats-server: a coordinator publishes its own
//! submits from memory, and another's relay publishes, once each, what a coordinator
//! committed and never published.

use std::collections::BTreeSet;
use std::time::Duration;

use taskwire_bus::Subjects;
use taskwire_definitions::builtin::AgentRegistry;
use taskwire_store::NewTask;

use super::*;
use crate::CoordinatorConfig;
use crate::submit::{Origin, SubmitTrace, Submitter, build_task};
use taskwire_protocol::pb;

const WAIT: Duration = Duration::from_secs(20);

type Setup = crate::fixture::Fixture;

async fn setup() -> Setup {
    Setup::start("relaytest", 4).await
}

fn new_task(subjects: &Subjects, i: usize) -> NewTask {
    let req = pb::SubmitRequest {
        agent: "general".into(),
        prompt: format!("task {i}"),
        ..Default::default()
    };
    build_task(
        &CoordinatorConfig::default(),
        &crate::agents::Agents::from(AgentRegistry::builtin()),
        subjects,
        req,
        None,
        Origin::Request,
        SubmitTrace::default(),
    )
    .expect("a valid submit")
}

/// The task ids the tasks stream holds, once `n` are there.
async fn dispatched(s: &Setup, n: u64) -> Vec<String> {
    let stream = s.subjects.tasks_stream();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let depth = s.bus.stream_depth(&stream).await.expect("stream depth");
        if depth >= n {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{depth} of {n} dispatched after {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let js_stream = s.bus.js().get_stream(&stream).await.expect("stream");
    let mut ids = Vec::new();
    for seq in 1..=s.bus.stream_depth(&stream).await.expect("depth") {
        let m = js_stream
            .get_raw_message(seq)
            .await
            .expect("stored message");
        let r = pb::TaskRequest::decode(m.payload.as_ref()).expect("a task request");
        ids.push(r.task_id);
    }
    ids
}

#[tokio::test]
async fn a_coordinator_publishes_its_own_submits_from_memory_and_deletes_their_rows() {
    let s = setup().await;
    let shutdown = CancellationToken::new();
    // No other relay's scan may take the rows for a minute: whatever reaches the
    // stream sooner was published by the writer's own relay.
    let wake = Arc::new(Notify::new());
    let (handoff, own) = Handoff::new(false, wake.clone(), Duration::from_secs(60));
    let submitter = Submitter::start(s.store.clone(), handoff, shutdown.clone());
    let relay = tokio::spawn(run(
        s.store.clone(),
        s.bus.clone(),
        wake,
        own,
        None,
        shutdown.clone(),
    ));
    let tasks: Vec<NewTask> = (0..20).map(|i| new_task(&s.subjects, i)).collect();
    let submitted: BTreeSet<String> = tasks
        .iter()
        .map(|t| t.request.task_id.to_string())
        .collect();
    let outcomes = futures::future::join_all(tasks.into_iter().map(|t| submitter.submit(t))).await;
    assert!(outcomes.iter().all(|o| o.is_ok()), "{outcomes:?}");

    let ids = dispatched(&s, 20).await;
    assert_eq!(ids.len(), 20, "each dispatched once: {ids:?}");
    assert_eq!(ids.into_iter().collect::<BTreeSet<_>>(), submitted);
    let deadline = tokio::time::Instant::now() + WAIT;
    while s.store.outbox_count_up_to(100).await.expect("count") > 0 {
        assert!(tokio::time::Instant::now() < deadline, "rows left behind");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    relay.await.expect("relay stops");
}

#[tokio::test]
async fn what_a_dead_coordinator_committed_and_never_published_another_relay_publishes_once() {
    let s = setup().await;
    // The dead coordinator: its submits committed, relaying them itself, and then it
    // was gone before it published any.
    let tasks: Vec<NewTask> = (0..10).map(|i| new_task(&s.subjects, i)).collect();
    let submitted: BTreeSet<String> = tasks
        .iter()
        .map(|t| t.request.task_id.to_string())
        .collect();
    let (outcomes, rows) = s
        .store
        .insert_tasks_relaying(&tasks, Duration::from_millis(300))
        .await
        .expect("committed");
    assert_eq!((outcomes.len(), rows.len()), (10, 10));
    drop(rows);

    // Another coordinator's relay, with nothing of its own to publish.
    let shutdown = CancellationToken::new();
    let wake = Arc::new(Notify::new());
    let (_handoff, own) = Handoff::new(false, wake.clone(), Duration::from_secs(60));
    let relay = tokio::spawn(run(
        s.store.clone(),
        s.bus.clone(),
        wake,
        own,
        None,
        shutdown.clone(),
    ));
    let ids = dispatched(&s, 10).await;
    assert_eq!(ids.len(), 10, "each dispatched once: {ids:?}");
    assert_eq!(ids.into_iter().collect::<BTreeSet<_>>(), submitted);
    let deadline = tokio::time::Instant::now() + WAIT;
    while s.store.outbox_count_up_to(100).await.expect("count") > 0 {
        assert!(tokio::time::Instant::now() < deadline, "rows left behind");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A later scan finds nothing more to publish.
    tokio::time::sleep(POLL * 2).await;
    assert_eq!(dispatched(&s, 10).await.len(), 10);
    shutdown.cancel();
    relay.await.expect("relay stops");
}

#[test]
fn a_stored_requests_traceparent_is_read_without_the_rest_of_it() {
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let request = pb::TaskRequest {
        prompt: "p".repeat(10_000),
        agent: "general".into(),
        traceparent: parent.into(),
        ..Default::default()
    };
    let stored = request.encode_to_vec();
    let read = StoredTraceparent::decode(stored.as_slice()).expect("decodes");
    assert_eq!(read.traceparent, parent);
    let without = pb::TaskRequest {
        traceparent: String::new(),
        ..request
    };
    let read = StoredTraceparent::decode(without.encode_to_vec().as_slice()).expect("decodes");
    assert_eq!(read.traceparent, "");
}
