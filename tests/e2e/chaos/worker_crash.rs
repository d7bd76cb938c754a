//! A worker killed with SIGKILL in the middle of a session: its in-progress acks stop,
//! JetStream redelivers the task after the ack wait, another worker claims it with a
//! new epoch and completes it; the record holds one result and both attempts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use taskwire_e2e::process::{Taskwire, WorkerOptions};
use taskwire_e2e::{final_result, start_with};
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

use super::eventually;

/// Short, so the redelivery comes quickly; workers beat every quarter of it.
const ACK_WAIT: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_session_loses_the_task_to_another_worker_which_completes_it_once() {
    let taskwire = Taskwire::locate().expect("taskwire binary");
    // The first request never gets its answer in time: its worker dies waiting.
    let calls = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::start({
        let calls = calls.clone();
        move |req: &SeenRequest| {
            let prompt = req.last_user_message().unwrap_or_default();
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                ScriptedReply::text("the first attempt's answer, never delivered")
                    .with_delay(Duration::from_secs(60))
            } else {
                ScriptedReply::text(format!("done: {prompt}"))
            }
        }
    })
    .await;
    let cluster = start_with(model, 0, 1, |c| c.ack_wait = ACK_WAIT)
        .await
        .expect("cluster");
    let (nats_url, model_url) = (cluster.nats.url(), cluster.model.base_url());
    let options = WorkerOptions {
        ack_wait: Some(ACK_WAIT),
        ..WorkerOptions::new(&nats_url, &model_url, cluster.workspace.path())
    };
    let mut first = taskwire
        .worker("worker-a", &options)
        .expect("start worker-a");

    let id = cluster
        .submit("general", "summarise the build failures")
        .await
        .expect("submit");
    eventually("worker-a's model request", || {
        first.check_running()?;
        Ok((cluster.model.request_count() >= 1).then_some(()))
    })
    .await
    .expect("the session started");
    let mut client = cluster.client().await.expect("client");
    let running = client
        .get(pb::GetRequest {
            task_id: id.clone(),
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(running.status(), pb::TaskStatus::Running);
    assert_eq!(running.attempts.len(), 1);
    assert_eq!(running.attempts[0].worker_id, "worker-a");

    // Only now a second worker, so the first attempt can only have been worker-a's.
    let mut second = taskwire
        .worker("worker-b", &options)
        .expect("start worker-b");
    eventually("worker-b to pull", || {
        second.check_running()?;
        Ok(second
            .stderr()
            .contains("worker pulling tasks")
            .then_some(()))
    })
    .await
    .expect("worker-b ready");

    first.kill();
    let killed = Instant::now();
    let task = cluster
        .wait_finished(&id)
        .await
        .expect("finished after the kill");
    let recovery = killed.elapsed();
    eprintln!(
        "worker killed mid-session: task completed by another worker {recovery:?} after the kill (ack wait {ACK_WAIT:?})"
    );

    assert_eq!(task.status(), pb::TaskStatus::Completed);
    let result = task.result.as_ref().expect("result");
    assert_eq!(result.worker_id, "worker-b");
    assert_eq!(
        result.output.as_ref().expect("output").text,
        "done: summarise the build failures"
    );
    assert_eq!(task.attempt, 2, "{:?}", task.attempts);
    assert_eq!(task.attempts.len(), 2, "{:?}", task.attempts);
    let (abandoned, completed) = (&task.attempts[0], &task.attempts[1]);
    assert_eq!(
        (abandoned.worker_id.as_str(), abandoned.status()),
        ("worker-a", pb::TaskStatus::Error)
    );
    assert!(
        abandoned.retryable && abandoned.error.contains("redelivered"),
        "{abandoned:?}"
    );
    assert!(abandoned.finished_at.is_some(), "{abandoned:?}");
    assert_eq!(
        (completed.worker_id.as_str(), completed.status()),
        ("worker-b", pb::TaskStatus::Completed)
    );
    assert_eq!(
        cluster.model.request_count(),
        2,
        "one model request per attempt"
    );
    // Redelivery follows the ack wait, not some longer timer.
    assert!(recovery < ACK_WAIT * 3, "took {recovery:?} to recover");

    // One result in the record: the watch stream ends with exactly one.
    let events = cluster.watch(&id).await.expect("watch");
    let results = events
        .iter()
        .filter(|e| matches!(e.event, Some(pb::watch_event::Event::Result(_))))
        .count();
    assert_eq!(results, 1);
    assert_eq!(
        final_result(&events).expect("a result").worker_id,
        "worker-b"
    );
    drop(second);
    cluster.shutdown().await;
}
