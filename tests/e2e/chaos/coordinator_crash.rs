//! The coordinator killed with SIGKILL during a burst of submits: every submit it
//! acknowledged was committed (task and outbox row together), so after a restart on the
//! same database and NATS each one is dispatched, run once and recorded.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use taskwire_e2e::process::{Taskwire, WorkerOptions, free_addr, wait_serving};
use taskwire_protocol::pb;
use taskwire_test_support::{NatsServer, TestDatabase};

use super::{echo_of, eventually, prompts_seen, slow_echo, task, wait_finished};

const ACK_WAIT: Duration = Duration::from_secs(5);
const SUBMITS: usize = 300;
const IN_FLIGHT: usize = 24;
/// Acknowledged submits after which the coordinator is killed.
const KILL_AFTER: usize = 80;

fn prompt(i: usize) -> String {
    format!("burst task {i}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submits_acknowledged_before_a_coordinator_crash_all_complete_once_after_restart() {
    taskwire_test_support::init_tracing();
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let nats = NatsServer::start().expect("nats");
    let db = TestDatabase::create().await.expect("database");
    let model = slow_echo(Duration::from_millis(20)).await;
    let workspace = tempfile::tempdir().expect("workspace");
    let (nats_url, model_url) = (nats.url(), model.base_url());
    let addr = free_addr().expect("port");
    let mut coordinator = taskwire
        .coordinator("coordinator-1", db.url(), &nats_url, addr, ACK_WAIT)
        .expect("start");
    let client = wait_serving(&mut coordinator, addr)
        .await
        .expect("coordinator serving");
    let options = WorkerOptions {
        nats_url: &nats_url,
        model_base_url: &model_url,
        workspace: workspace.path(),
        concurrency: 8,
        ack_wait: ACK_WAIT,
    };
    let mut worker = taskwire.worker("worker", &options).expect("start worker");

    let acked = Arc::new(AtomicUsize::new(0));
    let burst = tokio::spawn({
        let acked = acked.clone();
        futures::stream::iter(0..SUBMITS)
            .map(move |i| {
                let (mut client, acked) = (client.clone(), acked.clone());
                async move {
                    let r = tokio::time::timeout(
                        Duration::from_secs(10),
                        client.submit(task(&prompt(i))),
                    )
                    .await;
                    let r = match r {
                        Ok(Ok(r)) => Ok(r.into_inner().task_id),
                        Ok(Err(status)) => Err(format!("{:?}", status.code())),
                        Err(_) => Err("timed out".to_owned()),
                    };
                    if r.is_ok() {
                        acked.fetch_add(1, Ordering::SeqCst);
                    }
                    (i, r)
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect::<Vec<_>>()
    });
    eventually("submits to be acknowledged", || {
        coordinator.check_running()?;
        Ok((acked.load(Ordering::SeqCst) >= KILL_AFTER).then_some(()))
    })
    .await
    .expect("burst under way");
    coordinator.kill();
    let killed = Instant::now();
    let outcomes = burst.await.expect("burst");

    let acknowledged: Vec<(usize, String)> = outcomes
        .iter()
        .filter_map(|(i, r)| r.as_ref().ok().map(|id| (*i, id.clone())))
        .collect();
    let mut refusals: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, r) in &outcomes {
        if let Err(code) = r {
            *refusals.entry(code.as_str()).or_default() += 1;
        }
    }
    assert!(
        acknowledged.len() >= KILL_AFTER && acknowledged.len() < SUBMITS,
        "{}",
        acknowledged.len()
    );

    let addr = free_addr().expect("port");
    let mut coordinator = taskwire
        .coordinator("coordinator-2", db.url(), &nats_url, addr, ACK_WAIT)
        .expect("restart");
    let mut client = wait_serving(&mut coordinator, addr)
        .await
        .expect("restarted coordinator serving");
    for (i, id) in &acknowledged {
        let task = wait_finished(&mut client, id).await.unwrap_or_else(|e| {
            panic!(
                "{e}\ncoordinator log:\n{}\nworker log:\n{}",
                coordinator.log_tail(20),
                worker.log_tail(20)
            )
        });
        assert_eq!(
            task.status(),
            pb::TaskStatus::Completed,
            "task {i}: {task:?}\ncoordinator-2 log:\n{}\nworker log:\n{}",
            coordinator.log_tail(30),
            worker.log_tail(30)
        );
        assert_eq!(
            task.result.expect("result").output.expect("output").text,
            echo_of(&prompt(*i))
        );
    }
    let recovered = killed.elapsed();

    // Submits that failed may still have been committed (the crash came between commit
    // and reply): they run too, once. Wait for every stored task to finish.
    let stored = eventually_all_finished(&mut client).await;
    let seen = prompts_seen(&model);
    for (i, _) in &acknowledged {
        assert_eq!(
            seen.get(&prompt(*i)),
            Some(&1),
            "acknowledged task {i} ran {:?} times",
            seen.get(&prompt(*i))
        );
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "ran more than once: {twice:?}");
    assert_eq!(
        model.request_count(),
        stored,
        "one model request per stored task"
    );
    eprintln!(
        "coordinator killed mid-burst: {} of {SUBMITS} submits acknowledged, all {} completed once \
         ({recovered:?} from the kill); {} stored in all ({} committed without an acknowledgement); refusals {refusals:?}",
        acknowledged.len(),
        acknowledged.len(),
        stored,
        stored - acknowledged.len(),
    );
    worker
        .check_running()
        .expect("the worker rode out the coordinator crash");
}

/// Lists every stored task until all are finished; returns how many there are.
async fn eventually_all_finished(
    client: &mut pb::task_service_client::TaskServiceClient<tonic::transport::Channel>,
) -> usize {
    let deadline = tokio::time::Instant::now() + taskwire_e2e::PATIENCE;
    loop {
        let tasks = client
            .list(pb::ListRequest {
                limit: 1000,
                ..Default::default()
            })
            .await
            .expect("list")
            .into_inner()
            .tasks;
        let running = tasks.iter().filter(|t| t.result.is_none()).count();
        if running == 0 {
            assert!(
                tasks
                    .iter()
                    .all(|t| t.status() == pb::TaskStatus::Completed),
                "not all completed"
            );
            return tasks.len();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{running} stored tasks never finished"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
