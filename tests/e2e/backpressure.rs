//! A full queue refuses submits (`RESOURCE_EXHAUSTED`) instead of dropping work; every
//! accepted task still runs.

use std::time::Duration;

use taskwire_e2e::{PATIENCE, start_with};
use taskwire_protocol::pb;
use taskwire_test_support::ScriptedModel;

#[tokio::test]
async fn a_full_queue_refuses_submits_and_loses_nothing_it_accepted() {
    // No workers yet: tasks stay queued.
    let mut cluster = start_with(ScriptedModel::echo().await, 0, 1, |c| {
        c.max_queued_tasks = 3
    })
    .await
    .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let mut accepted = Vec::new();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let refusal = loop {
        let r = client
            .submit(pb::SubmitRequest {
                agent: "general".into(),
                prompt: format!("task {}", accepted.len()),
                ..Default::default()
            })
            .await;
        match r {
            Ok(r) => accepted.push(r.into_inner().task_id),
            Err(status) => break status,
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the queue never filled"
        );
        // Give the depth sampler a chance to see the queue grow.
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(refusal.code(), tonic::Code::ResourceExhausted);
    assert!(
        refusal.message().contains("queue is full"),
        "{}",
        refusal.message()
    );
    assert!(accepted.len() >= 3, "accepted {}", accepted.len());

    cluster.add_worker("late-worker", 4);
    for id in &accepted {
        let task = cluster.wait_finished(id).await.expect("finished");
        assert_eq!(task.status(), pb::TaskStatus::Completed);
    }
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_fleet_too_far_behind_refuses_submits_loses_nothing_and_accepts_again_once_caught_up() {
    // No workers yet: every accepted task is backlog.
    let mut cluster = start_with(ScriptedModel::echo().await, 0, 1, |c| c.max_backlog = 4)
        .await
        .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let submit = |i: usize| pb::SubmitRequest {
        agent: "general".into(),
        prompt: format!("task {i}"),
        ..Default::default()
    };
    let mut accepted = Vec::new();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let refusal = loop {
        match client.submit(submit(accepted.len())).await {
            Ok(r) => accepted.push(r.into_inner().task_id),
            Err(status) => break status,
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the backlog never reached its limit"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(refusal.code(), tonic::Code::ResourceExhausted);
    assert!(
        refusal.message().contains("the fleet is behind") && refusal.message().contains("limit 4"),
        "{}",
        refusal.message()
    );
    assert!(accepted.len() >= 4, "accepted {}", accepted.len());
    // Refused again while nothing moves: a bound, not a one-off.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = client.submit(submit(99)).await.expect_err("still behind");
    assert_eq!(again.code(), tonic::Code::ResourceExhausted);

    cluster.add_worker("late-worker", 4);
    for id in &accepted {
        let task = cluster.wait_finished(id).await.expect("finished");
        assert_eq!(task.status(), pb::TaskStatus::Completed);
    }
    // Caught up: the sampler sees the backlog gone, and submits are accepted again.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let id = loop {
        match client.submit(submit(100)).await {
            Ok(r) => break r.into_inner().task_id,
            Err(status) => {
                assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status}");
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "never accepted again"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed);
    cluster.shutdown().await;
}
