//! nats-server killed and restarted (same port, same store) while tasks run: the
//! coordinator and workers reconnect, the outbox relay publishes what was submitted
//! meanwhile, and every task completes.

use std::time::{Duration, Instant};

use taskwire_e2e::start_with;
use taskwire_protocol::pb;

use super::{echo_of, eventually, prompts_seen, slow_echo, task};

const TASKS: usize = 100;

fn prompt(i: usize) -> String {
    format!("load task {i}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_task_completes_when_nats_restarts_under_load() {
    let model = slow_echo(Duration::from_millis(50)).await;
    let mut cluster = start_with(model, 2, 8, |_| {}).await.expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let mut ids = Vec::with_capacity(TASKS);
    for i in 0..TASKS / 2 {
        ids.push(
            client
                .submit(task(&prompt(i)))
                .await
                .expect("submit")
                .into_inner()
                .task_id,
        );
    }
    eventually("a third of the tasks to reach the model", || {
        Ok((cluster.model.request_count() >= TASKS / 6).then_some(()))
    })
    .await
    .expect("load under way");

    cluster.nats.kill();
    let down = Instant::now();
    // Submits need only Postgres: they are accepted while the broker is away.
    for i in TASKS / 2..TASKS {
        ids.push(
            client
                .submit(task(&prompt(i)))
                .await
                .expect("submit while nats is down")
                .into_inner()
                .task_id,
        );
    }
    tokio::task::block_in_place(|| cluster.nats.restart()).expect("restart nats");
    let outage = down.elapsed();
    let restarted = Instant::now();

    let mut retried = 0;
    for (i, id) in ids.iter().enumerate() {
        let task = cluster
            .wait_finished(id)
            .await
            .unwrap_or_else(|e| panic!("task {i}: {e}"));
        assert_eq!(task.status(), pb::TaskStatus::Completed, "task {i}");
        assert_eq!(
            task.result.expect("result").output.expect("output").text,
            echo_of(&prompt(i))
        );
        retried += usize::from(task.attempt > 1);
    }
    let recovered = restarted.elapsed();
    let seen = prompts_seen(&cluster.model);
    let missing: Vec<usize> = (0..TASKS)
        .filter(|i| !seen.contains_key(&prompt(*i)))
        .collect();
    assert!(missing.is_empty(), "never reached the model: {missing:?}");
    let ran_twice = seen.values().filter(|n| **n > 1).count();
    eprintln!(
        "nats restarted under load (down {outage:?}): all {TASKS} tasks completed {recovered:?} after the restart; \
         {} model requests, {retried} tasks needed a second attempt, {ran_twice} ran twice",
        cluster.model.request_count(),
    );
    cluster.shutdown().await;
}
