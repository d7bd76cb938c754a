//! Dispatch across workers, and messages that cannot be run.

use std::collections::HashMap;

use async_nats::jetstream;
use taskwire_e2e::{PATIENCE, start};
use taskwire_protocol::pb;
use taskwire_store::Store;
use taskwire_test_support::ScriptedModel;

#[tokio::test]
async fn two_workers_share_fifty_tasks_and_each_completes_exactly_once() {
    let cluster = start(ScriptedModel::echo().await, 2, 4)
        .await
        .expect("cluster");
    let mut ids = Vec::new();
    for i in 0..50 {
        ids.push((
            i,
            cluster
                .submit("general", &format!("task number {i}"))
                .await
                .expect("submit"),
        ));
    }
    let mut by_worker: HashMap<String, usize> = HashMap::new();
    for (i, id) in &ids {
        let task = cluster.wait_finished(id).await.expect("finished");
        assert_eq!(
            task.status(),
            pb::TaskStatus::Completed,
            "task {i}: {:?}",
            task.attempts
        );
        assert_eq!(task.attempt, 1, "task {i} ran more than once");
        let result = task.result.expect("result");
        assert_eq!(
            result.output.expect("output").text,
            format!("echo: task number {i}")
        );
        *by_worker.entry(result.worker_id).or_default() += 1;
    }
    assert_eq!(
        cluster.model.request_count(),
        50,
        "each task reached the model once"
    );
    assert_eq!(by_worker.values().sum::<usize>(), 50);
    assert_eq!(by_worker.len(), 2, "both workers took tasks: {by_worker:?}");
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_malformed_task_message_is_dead_lettered_and_the_worker_keeps_serving() {
    let cluster = start(ScriptedModel::echo().await, 1, 2)
        .await
        .expect("cluster");
    let client = async_nats::connect(cluster.nats.url()).await.expect("nats");
    let js = jetstream::new(client);
    js.publish(
        "taskwire.tasks.default",
        b"\xde\xad not a task request".as_slice().into(),
    )
    .await
    .expect("publish")
    .await
    .expect("stored");

    let store = Store::connect(cluster.db.url(), 2).await.expect("store");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let letter = loop {
        let letters = store.dead_letters(10).await.expect("dead letters");
        if let Some(l) = letters.into_iter().next() {
            break l;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no dead letter recorded"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(letter.subject, "taskwire.tasks.default");
    assert!(
        letter.reason.contains("malformed task request"),
        "reason: {}",
        letter.reason
    );
    assert_eq!(letter.payload, b"\xde\xad not a task request");

    let id = cluster
        .submit("general", "still there?")
        .await
        .expect("submit");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed);
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_message_that_reaches_max_deliveries_dead_letters_its_task_and_leaves_the_stream() {
    use futures::StreamExt;
    // No workers: the test plays a worker that never settles the message.
    let cluster = start(ScriptedModel::echo().await, 0, 1)
        .await
        .expect("cluster");
    let id = cluster
        .submit("general", "never settled")
        .await
        .expect("submit");
    let client = async_nats::connect(cluster.nats.url()).await.expect("nats");
    let js = jetstream::new(client);
    let bus = taskwire_bus::BusConfig {
        ack_wait: std::time::Duration::from_secs(10),
        ..Default::default()
    };
    let consumer = taskwire_bus::tasks_consumer(&js, &bus, "default", -1)
        .await
        .expect("consumer");
    for _ in 0..bus.max_deliver {
        let mut batch = consumer
            .fetch()
            .max_messages(1)
            .expires(PATIENCE)
            .messages()
            .await
            .expect("fetch");
        let msg = batch.next().await.expect("a delivery").expect("message");
        msg.ack_with(async_nats::jetstream::AckKind::Nak(None))
            .await
            .expect("nak");
    }
    // The server notices the exhausted message (and advises) when it next looks for a
    // message to deliver: a pending pull, as a live worker would have, gets nothing.
    let mut batch = consumer
        .fetch()
        .max_messages(1)
        .expires(std::time::Duration::from_millis(500))
        .messages()
        .await
        .expect("fetch");
    assert!(
        batch.next().await.is_none_or(|m| m.is_err()),
        "no sixth delivery"
    );
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::DeadLettered);
    let store = Store::connect(cluster.db.url(), 2).await.expect("store");
    let letters = store.dead_letters(10).await.expect("dead letters");
    assert!(
        letters.iter().any(|l| l.reason.contains("max deliveries")),
        "{letters:?}"
    );
    let mut stream = js.get_stream("TASKWIRE_TASKS").await.expect("stream");
    assert_eq!(
        stream.info().await.expect("info").state.messages,
        0,
        "the message was removed"
    );
    cluster.shutdown().await;
}
