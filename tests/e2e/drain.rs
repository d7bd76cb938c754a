//! Worker health and drain, on real `taskwire worker` processes: `/healthz` and
//! `/readyz` on `--http-listen`, and SIGTERM as an orchestrator sends it. A draining
//! worker is alive but not ready, finishes the sessions that fit in `--drain-grace`,
//! and releases the others (nak) so another worker takes them at once.

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::bail;
use taskwire_e2e::process::{Process, Taskwire, WorkerOptions, free_addr, http_get};
use taskwire_e2e::{PATIENCE, final_result, start};
use taskwire_protocol::pb;
use taskwire_test_support::{Gate, ScriptedModel, ScriptedReply, SeenRequest};

const DRAIN_GRACE: Duration = Duration::from_secs(4);
/// The workers' ack wait (as [`WorkerOptions::new`] sets it): a released task must be
/// taken again well before a silent one would be.
const ACK_WAIT: Duration = Duration::from_secs(10);

/// Polls `check` until it yields a value, failing after [`PATIENCE`] or when `process`
/// has exited.
async fn until<T, F>(
    what: &str,
    process: &mut Process,
    mut check: impl FnMut() -> F,
) -> anyhow::Result<T>
where
    F: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        process.check_running()?;
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out after {PATIENCE:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `GET path`'s status, or `None` while nothing answers there yet.
async fn status_of(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    http_get(addr, path).await.ok()
}

async fn task(cluster: &taskwire_e2e::Cluster, id: &str) -> pb::Task {
    cluster
        .client()
        .await
        .expect("client")
        .get(pb::GetRequest {
            task_id: id.to_owned(),
        })
        .await
        .expect("get")
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_cannot_reach_nats_is_alive_but_not_ready() {
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let workspace = tempfile::tempdir().expect("workspace");
    let nowhere = format!("nats://{}", free_addr().expect("a closed port"));
    let http = free_addr().expect("a free port");
    let options = WorkerOptions {
        http_listen: Some(http),
        ..WorkerOptions::new(&nowhere, "http://127.0.0.1:9/v1", workspace.path())
    };
    let mut worker = taskwire.worker("worker-lost", &options).expect("start");
    let healthz = until("/healthz", &mut worker, || async {
        Ok(status_of(http, "/healthz").await)
    })
    .await
    .expect("/healthz answers");
    assert_eq!(healthz.0, 200, "{healthz:?}");
    let (status, body) = http_get(http, "/readyz").await.expect("/readyz answers");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("not ready"), "{body}");
    let (status, _) = http_get(http, "/nothing").await.expect("answers");
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_worker_finishes_what_fits_its_grace_and_another_worker_takes_the_rest_at_once()
{
    let taskwire = Taskwire::locate().expect("taskwire binary");
    // Each prompt's answer waits behind its own gate, so the test decides how long each
    // session runs.
    let (short_gate, long_gate) = (Gate::new(), Gate::new());
    let model = ScriptedModel::start({
        let (short_gate, long_gate) = (short_gate.clone(), long_gate.clone());
        move |req: &SeenRequest| {
            let prompt = req.last_user_message().unwrap_or_default();
            let gate = if prompt.starts_with("short") {
                &short_gate
            } else {
                &long_gate
            };
            ScriptedReply::text(format!("done: {prompt}")).with_gate(gate)
        }
    })
    .await;
    let cluster = start(model, 0, 1).await.expect("cluster");
    let (nats_url, model_url) = (cluster.nats.url(), cluster.model.base_url());
    let http = free_addr().expect("a free port");
    let options = WorkerOptions {
        concurrency: 2,
        ack_wait: Some(ACK_WAIT),
        drain_grace: DRAIN_GRACE,
        http_listen: Some(http),
        ..WorkerOptions::new(&nats_url, &model_url, cluster.workspace.path())
    };
    let mut first = taskwire.worker("worker-a", &options).expect("worker-a");

    until("worker-a ready", &mut first, || async {
        Ok(status_of(http, "/readyz")
            .await
            .filter(|(status, _)| *status == 200))
    })
    .await
    .expect("/readyz turns 200");
    let (status, body) = http_get(http, "/healthz").await.expect("/healthz");
    assert_eq!((status, body.as_str()), (200, "ok\n"));

    let short = cluster
        .submit("general", "short task")
        .await
        .expect("submit");
    let long = cluster
        .submit("general", "long task")
        .await
        .expect("submit");
    until("both sessions to ask the model", &mut first, || async {
        Ok((cluster.model.request_count() >= 2).then_some(()))
    })
    .await
    .expect("both sessions running on worker-a");

    first.sigterm().expect("sigterm");
    let terminated = Instant::now();
    let (_, body) = until("/readyz to turn 503", &mut first, || async {
        Ok(status_of(http, "/readyz")
            .await
            .filter(|(status, _)| *status == 503))
    })
    .await
    .expect("a draining worker is not ready");
    assert!(body.contains("draining"), "{body}");
    let (status, _) = http_get(http, "/healthz").await.expect("/healthz");
    assert_eq!(status, 200, "a draining worker is alive");
    assert_eq!(
        task(&cluster, &short).await.status(),
        pb::TaskStatus::Running
    );

    // The short session finishes within the grace, on the draining worker.
    short_gate.open();
    let short_task = cluster.wait_finished(&short).await.expect("short finished");
    assert_eq!(short_task.status(), pb::TaskStatus::Completed);
    let result = short_task.result.as_ref().expect("result");
    assert_eq!(result.worker_id, "worker-a");
    first
        .check_running()
        .expect("still draining the long session");
    let (status, _) = http_get(http, "/readyz").await.expect("/readyz");
    assert_eq!(status, 503, "still draining");

    // The long one outlasts the grace: released, and worker-a exits cleanly.
    let exit = first.wait().await.expect("worker-a exits");
    let released_at = Instant::now();
    let drained = terminated.elapsed();
    assert!(exit.success(), "{exit:?}: {}", first.tail(20));
    assert!(
        drained >= DRAIN_GRACE,
        "worker-a exited {drained:?} after SIGTERM, before its grace was over"
    );
    assert!(
        first
            .stderr()
            .contains("drain grace over, releasing running tasks"),
        "{}",
        first.tail(20)
    );
    let released = task(&cluster, &long).await;
    assert!(released.result.is_none(), "{released:?}");

    let second_options = WorkerOptions {
        http_listen: None,
        ..options
    };
    let mut second = taskwire
        .worker("worker-b", &second_options)
        .expect("worker-b");
    long_gate.open();
    let long_task = cluster.wait_finished(&long).await.expect("long finished");
    let recovery = released_at.elapsed();
    second.check_running().expect("worker-b runs");
    eprintln!("released task completed by another worker {recovery:?} after the release");

    assert_eq!(long_task.status(), pb::TaskStatus::Completed);
    let result = long_task.result.as_ref().expect("result");
    assert_eq!(result.worker_id, "worker-b");
    assert_eq!(
        result.output.as_ref().expect("output").text,
        "done: long task"
    );
    assert!(
        recovery < ACK_WAIT,
        "took {recovery:?}: the task waited for its ack wait instead of being released"
    );
    let workers: Vec<_> = long_task
        .attempts
        .iter()
        .map(|a| (a.worker_id.as_str(), a.status()))
        .collect();
    assert_eq!(workers.len(), 2, "{:?}", long_task.attempts);
    assert_eq!(workers[0].0, "worker-a");
    assert_ne!(workers[0].1, pb::TaskStatus::Completed);
    assert_eq!(workers[1], ("worker-b", pb::TaskStatus::Completed));

    // Completed once: the record holds one result, worker-b's.
    let events = cluster.watch(&long).await.expect("watch");
    let results = events
        .iter()
        .filter(|e| matches!(e.event, Some(pb::watch_event::Event::Result(_))))
        .count();
    assert_eq!(results, 1);
    assert_eq!(
        final_result(&events).expect("a result").worker_id,
        "worker-b"
    );
    let long_requests = cluster
        .model
        .requests()
        .iter()
        .filter(|r| r.last_user_message() == Some("long task"))
        .count();
    assert_eq!(long_requests, 2, "one model request per attempt");
    drop(second);
    cluster.shutdown().await;
}
