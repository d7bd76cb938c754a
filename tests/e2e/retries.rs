//! Retryable failures are retried with backoff; a spent budget dead-letters the task,
//! which can be replayed; permanent failures are not retried.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use taskwire_e2e::start;
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

fn submit_request(prompt: &str, max_attempts: u32) -> pb::SubmitRequest {
    pb::SubmitRequest {
        agent: "general".into(),
        prompt: prompt.into(),
        max_attempts: Some(max_attempts),
        ..Default::default()
    }
}

fn attempt_statuses(task: &pb::Task) -> Vec<pb::TaskStatus> {
    task.attempts.iter().map(|a| a.status()).collect()
}

#[tokio::test]
async fn model_server_errors_are_retried_until_the_task_completes() {
    let calls = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::start({
        let calls = calls.clone();
        move |_req: &SeenRequest| {
            if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                ScriptedReply::status(503, "overloaded")
            } else {
                ScriptedReply::text("done at last")
            }
        }
    })
    .await;
    let cluster = start(model, 1, 2).await.expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let id = client
        .submit(submit_request("try hard", 3))
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(
        task.status(),
        pb::TaskStatus::Completed,
        "{:?} {:?}",
        task.attempts,
        task.result
    );
    assert_eq!(task.attempt, 3);
    assert_eq!(
        attempt_statuses(&task),
        vec![
            pb::TaskStatus::Queued,
            pb::TaskStatus::Queued,
            pb::TaskStatus::Completed
        ]
    );
    assert!(
        task.attempts[0].retryable && task.attempts[0].error.contains("503"),
        "{:?}",
        task.attempts[0]
    );
    assert_eq!(
        task.result.expect("result").output.expect("output").text,
        "done at last"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_spent_attempt_budget_dead_letters_the_task_and_replay_runs_it_again() {
    let healthy = Arc::new(AtomicBool::new(false));
    let model = ScriptedModel::start({
        let healthy = healthy.clone();
        move |_req: &SeenRequest| {
            if healthy.load(Ordering::SeqCst) {
                ScriptedReply::text("recovered")
            } else {
                ScriptedReply::status(500, "down")
            }
        }
    })
    .await;
    let cluster = start(model, 1, 2).await.expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let id = client
        .submit(submit_request("doomed for now", 2))
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::DeadLettered);
    assert_eq!(
        attempt_statuses(&task),
        vec![pb::TaskStatus::Queued, pb::TaskStatus::DeadLettered]
    );

    healthy.store(true, Ordering::SeqCst);
    let replayed = client
        .replay(pb::ReplayRequest {
            task_id: id.clone(),
        })
        .await
        .expect("replay")
        .into_inner();
    // Queued by the replay; a fast worker may already have claimed it.
    assert!(
        matches!(
            replayed.status(),
            pb::TaskStatus::Queued | pb::TaskStatus::Running | pb::TaskStatus::Completed
        ),
        "{:?}",
        replayed.status()
    );
    let task = cluster.wait_finished(&id).await.expect("finished again");
    assert_eq!(task.status(), pb::TaskStatus::Completed);
    assert_eq!(
        task.attempts.len(),
        3,
        "history keeps the attempts before the replay"
    );
    let err = client
        .replay(pb::ReplayRequest { task_id: id })
        .await
        .expect_err("completed is final");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_permanent_model_error_is_not_retried() {
    let model = ScriptedModel::start(|_req: &SeenRequest| {
        ScriptedReply::status(400, "bad request: no such model")
    })
    .await;
    let cluster = start(model, 1, 2).await.expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let id = client
        .submit(submit_request("hopeless", 3))
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Error);
    assert_eq!(task.attempt, 1);
    let result = task.result.expect("result");
    assert!(!result.errors[0].retryable);
    assert!(
        result.errors[0].message.contains("400"),
        "{}",
        result.errors[0].message
    );
    assert_eq!(cluster.model.request_count(), 1);
    cluster.shutdown().await;
}
