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
