//! Typed consumers against a real nats-server: deliveries of domain values settled
//! through one [`Settlement`], malformed messages named for the dead-letter record,
//! typed subscriptions, and the reads the coordinator and the worker make of streams
//! and the limits bucket.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use taskwire_bus::messages::{Backlog, CancelNotice, DeadLetter};
use taskwire_bus::{Bus, BusConfig, MaxDeliveries, NatsOptions, Received, Settlement, Subjects};
use taskwire_protocol::{ClaimEpoch, TaskId, TaskResult, TaskStatus, TraceId, Usage};
use taskwire_test_support::NatsServer;

const WAIT: Duration = Duration::from_secs(10);

async fn bus(nats: &NatsServer) -> (Bus, BusConfig) {
    let cfg = BusConfig {
        subjects: Subjects::new("consumertest"),
        ack_wait: Duration::from_secs(1),
        ..BusConfig::default()
    };
    let bus = Bus::connect(
        &nats.url(),
        "consumer-test",
        &NatsOptions::default(),
        cfg.subjects.clone(),
    )
    .await
    .expect("connects");
    bus.ensure_streams(&cfg).await.expect("streams");
    (bus, cfg)
}

fn result(task: TaskId) -> TaskResult {
    TaskResult {
        task_id: task,
        trace_id: TraceId::generate(),
        attempt: 1,
        claim_epoch: ClaimEpoch(1),
        status: TaskStatus::Completed,
        text: "done".into(),
        structured: None,
        tool_calls: Vec::new(),
        errors: Vec::new(),
        usage: Usage::default(),
        own_usage: Usage::default(),
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
    }
}

/// Publishes `payload` to `subject` of a stream and waits until it is stored.
async fn publish_raw(bus: &Bus, subject: String, payload: &'static [u8]) {
    bus.js()
        .publish(subject, Bytes::from_static(payload))
        .await
        .expect("published")
        .await
        .expect("stored");
}

async fn next<S: futures::Stream + Unpin>(stream: &mut S) -> S::Item {
    tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("an item in time")
        .expect("the stream goes on")
}

async fn until_empty(bus: &Bus, stream: &str) {
    let deadline = Instant::now() + WAIT;
    while bus.stream_depth(stream).await.expect("depth") > 0 {
        assert!(Instant::now() < deadline, "{stream} still holds messages");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_delivery_holds_its_value_and_a_malformed_message_its_subject_payload_and_error() {
    let nats = NatsServer::start().expect("nats-server starts (apt-get install nats-server)");
    let (bus, cfg) = bus(&nats).await;
    let task = TaskId::generate();
    bus.publish_result(&result(task)).await.expect("published");
    let subject = cfg.subjects.result(TaskId::generate());
    publish_raw(&bus, subject.clone(), b"\xff\xff\xff").await;

    let results = cfg.subjects.results_stream();
    let consumer = bus
        .consume::<TaskResult>(&results, "test", Duration::from_secs(5))
        .await
        .expect("consumer");
    let mut deliveries = consumer.messages().await.expect("pulls");
    let Received::Value(first) = next(&mut deliveries).await.expect("pulled") else {
        panic!("the result decodes");
    };
    assert_eq!(first.value.task_id, task);
    assert_eq!((first.delivered, first.stream_sequence), (1, 1));
    assert_eq!(first.subject(), cfg.subjects.result(task));
    let Received::Malformed(second) = next(&mut deliveries).await.expect("pulled") else {
        panic!("garbage does not decode");
    };
    assert_eq!(second.value.subject, subject);
    assert_eq!(second.value.payload.as_ref(), b"\xff\xff\xff");
    assert_eq!(second.value.error.envelope, "task result");
    assert_eq!(second.stream_sequence, 2);

    first.settle(Settlement::Ack).await;
    second.settle(Settlement::Ack).await;
    until_empty(&bus, &results).await;
}

#[tokio::test]
async fn a_nak_with_a_delay_offers_the_message_again_counting_the_delivery() {
    let nats = NatsServer::start().expect("nats-server starts (apt-get install nats-server)");
    let (bus, cfg) = bus(&nats).await;
    let letter = DeadLetter {
        subject: "x".into(),
        reason: "why".into(),
        payload: b"p".to_vec(),
        worker_id: "w".into(),
        task: None,
    };
    bus.publish_dead_letter(&letter).await.expect("published");
    let stream = cfg.subjects.dead_letter_stream();
    let consumer = bus
        .consume::<DeadLetter>(&stream, "test", Duration::from_secs(5))
        .await
        .expect("consumer");
    let mut deliveries = consumer.messages().await.expect("pulls");

    let first = next(&mut deliveries).await.expect("pulled");
    let delay = Duration::from_millis(300);
    let naked = Instant::now();
    first.settle(Settlement::Nak(Some(delay))).await;
    let Received::Value(again) = next(&mut deliveries).await.expect("pulled") else {
        panic!("the letter decodes");
    };
    assert!(
        naked.elapsed() >= delay / 2,
        "offered again after the delay"
    );
    assert_eq!(again.value, letter);
    assert_eq!(again.delivered, 2);
    again.settle(Settlement::AckSync).await;
    until_empty(&bus, &stream).await;
}

#[tokio::test]
async fn a_batch_yields_what_was_pulled_then_ends_and_ends_early_on_a_reconnect() {
    let mut nats = NatsServer::start().expect("nats-server starts (apt-get install nats-server)");
    let (bus, cfg) = bus(&nats).await;
    publish_raw(&bus, cfg.subjects.tasks("default"), b"\xff").await;
    let consumer = bus
        .consume_tasks(&cfg, "default", -1)
        .await
        .expect("consumer");
    assert_eq!(consumer.ack_wait(), Duration::from_secs(1));

    let mut batch = consumer
        .batch(2, Duration::from_secs(1))
        .await
        .expect("pulls");
    let received = tokio::time::timeout(WAIT, batch.next())
        .await
        .expect("in time")
        .expect("one message")
        .expect("pulled");
    let (dispatched, delivery) = received.take();
    let malformed = dispatched.expect_err("not a task request");
    assert_eq!(malformed.error.envelope, "task request");
    delivery.settle(Settlement::Term).await;
    let end = tokio::time::timeout(WAIT, batch.next())
        .await
        .expect("in time");
    assert!(end.is_none(), "the batch expires");

    // A pull request waiting for a minute ends as soon as the connection comes back.
    let mut batch = consumer
        .batch(1, Duration::from_secs(60))
        .await
        .expect("pulls");
    nats.restart().expect("nats-server restarts");
    let started = Instant::now();
    let end = tokio::time::timeout(Duration::from_secs(30), batch.next())
        .await
        .expect("ends before the pull request expires");
    assert!(end.is_none(), "{end:?}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn subscriptions_read_notices_and_name_what_they_cannot_read() {
    let nats = NatsServer::start().expect("nats-server starts (apt-get install nats-server)");
    let (bus, cfg) = bus(&nats).await;
    let mut cancels = bus.cancel_notices().await.expect("subscribed");
    let mut finished = bus.all_finished_notices().await.expect("subscribed");
    bus.flush().await.expect("flushed");

    let notice = CancelNotice {
        task: TaskId::generate(),
        reason: "asked".into(),
    };
    bus.notify_cancel(&notice).await.expect("sent");
    assert_eq!(next(&mut cancels).await.expect("read"), notice);
    let subject = cfg.subjects.cancel(TaskId::generate());
    bus.client()
        .publish(subject.clone(), Bytes::from_static(b"\xff"))
        .await
        .expect("sent");
    let malformed = next(&mut cancels).await.expect_err("malformed");
    assert_eq!(malformed.subject, subject);
    assert_eq!(malformed.error.envelope, "cancel notice");

    let task = TaskId::generate();
    bus.notify_finished(task).await.expect("sent");
    assert_eq!(next(&mut finished).await.expect("read").task, task);

    let mut samples = bus.backlog_samples().await.expect("subscribed");
    bus.flush().await.expect("flushed");
    let sample = Backlog {
        outbox: 3,
        tasks: 2,
        results: 1,
    };
    bus.share_backlog(&sample).await.expect("sent");
    let read = next(&mut samples).await.expect("read");
    assert_eq!((read, read.total()), (sample, 6));
}

#[tokio::test]
async fn streams_are_read_by_depth_pending_count_last_progress_and_advised_message() {
    let nats = NatsServer::start().expect("nats-server starts (apt-get install nats-server)");
    let (bus, cfg) = bus(&nats).await;
    let tasks = cfg.subjects.tasks_stream();
    let consumer = cfg.subjects.workers_consumer("default");
    assert_eq!(
        bus.consumer_pending(&tasks, &consumer).await.expect("read"),
        None
    );
    publish_raw(&bus, cfg.subjects.tasks("default"), b"one").await;
    publish_raw(&bus, cfg.subjects.tasks("default"), b"two").await;
    assert_eq!(bus.stream_depth(&tasks).await.expect("read"), 2);
    let missing = bus
        .stream_depth("NO_SUCH_STREAM")
        .await
        .expect_err("a stream that does not exist has no depth");
    assert!(
        missing.to_string().contains("NO_SUCH_STREAM") && missing.to_string().contains("not found"),
        "{missing}"
    );
    bus.consume_tasks(&cfg, "default", -1)
        .await
        .expect("consumer");
    assert_eq!(
        bus.consumer_pending(&tasks, &consumer).await.expect("read"),
        Some(2)
    );

    let task = TaskId::generate();
    assert!(bus.last_progress(task).await.is_none());
    let event = |seq| taskwire_protocol::pb::TaskProgress {
        task_id: task.to_string(),
        seq,
        ..Default::default()
    };
    for seq in [1, 2] {
        bus.send_progress(task, &event(seq))
            .await
            .expect("sent")
            .await
            .expect("stored");
    }
    let last = bus.last_progress(task).await.expect("a last message");
    assert_eq!(last.events().expect("decodes"), vec![event(2)]);
    let mut replay = bus.replay_progress(task).await.expect("replays");
    for seq in [1, 2] {
        let Received::Value(d) = next(&mut replay).await.expect("pulled") else {
            panic!("progress decodes");
        };
        assert_eq!(d.value.0, vec![event(seq)]);
    }

    let advisory = MaxDeliveries {
        stream: tasks.clone(),
        stream_seq: 1,
        deliveries: 100,
    };
    let advised = bus.advised_message(&advisory).await.expect("read");
    assert_eq!(advised.expect("there").payload.as_ref(), b"one");
    bus.delete_advised(&advisory).await.expect("deleted");
    assert_eq!(bus.advised_message(&advisory).await.expect("read"), None);
    assert_eq!(bus.stream_depth(&tasks).await.expect("read"), 1);
}

#[tokio::test]
async fn the_limits_bucket_is_read_watched_and_compare_and_set_by_model() {
    let nats = NatsServer::start().expect("nats-server starts (apt-get install nats-server)");
    let (bus, _) = bus(&nats).await;
    let bucket = bus.limits_bucket().await.expect("opened");
    let mut watch = bucket.watch().await.expect("watching");
    let model = "anthropic/claude-sonnet-4.5";
    assert_eq!(bucket.get(model).await.expect("read"), None);

    let first = bucket
        .create(model, Bytes::from_static(b"1"))
        .await
        .expect("created");
    assert!(
        bucket
            .create(model, Bytes::from_static(b"x"))
            .await
            .is_err(),
        "a second create conflicts"
    );
    let second = bucket
        .update(model, Bytes::from_static(b"2"), first)
        .await
        .expect("updated");
    assert!(
        bucket
            .update(model, Bytes::from_static(b"x"), first)
            .await
            .is_err(),
        "a stale revision conflicts"
    );
    let now = bucket.get(model).await.expect("read").expect("a value");
    assert_eq!(
        (now.model.as_str(), now.value.as_ref(), now.revision),
        (model, &b"2"[..], second)
    );
    assert!(!now.deleted);

    let seen = next(&mut watch).await.expect("watched");
    assert_eq!((seen.model.as_str(), seen.revision), (model, first));
}
