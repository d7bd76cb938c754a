//! A worker's liveness at the default settings, with real `taskwire` worker processes:
//! how soon a task of a worker that died (SIGKILL) or was cut off from NATS (a network
//! partition) runs elsewhere, and that a live session on a machine whose CPUs are
//! saturated is never offered to another worker. Each fault is tried on a single task
//! and on a parent with children.
//!
//! The tests run one at a time ([`serial`]): the saturation test loads every CPU, and
//! the failover tests measure time. Each prints what it measured (`--nocapture`).

mod failover;
mod saturation;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use taskwire_e2e::process::{Process, Taskwire, WorkerOptions};
use taskwire_e2e::{Cluster, PATIENCE};
use taskwire_test_support::{ScriptedModel, SeenRequest};

/// Held for the whole of each test, so that no two run at once.
async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}

/// The workers' ack wait when none is given: the setting under test.
fn default_ack_wait() -> Duration {
    taskwire_worker::WorkerConfig::default().ack_wait
}

fn first_user(req: &SeenRequest) -> &str {
    req.first_user_message().unwrap_or_default()
}

/// Model requests per conversation, keyed by its first user message.
fn requests_by_prompt(model: &ScriptedModel) -> HashMap<String, usize> {
    let mut seen = HashMap::new();
    for req in model.requests() {
        *seen.entry(first_user(&req).to_owned()).or_default() += 1;
    }
    seen
}

/// Polls `check` every 20 ms until it gives a value, or fails after [`PATIENCE`].
async fn eventually<T>(
    what: &str,
    mut check: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(v) = check()? {
            return Ok(v);
        }
        if Instant::now() > deadline {
            anyhow::bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A worker process of `concurrency` sessions on `nats_url` with the default ack wait,
/// once it pulls tasks.
async fn worker(
    taskwire: &Taskwire,
    cluster: &Cluster,
    name: &str,
    nats_url: &str,
    concurrency: usize,
) -> Process {
    let model = cluster.model.base_url();
    let options = WorkerOptions {
        ack_wait: None,
        concurrency,
        ..WorkerOptions::new(nats_url, &model, cluster.workspace.path())
    };
    let mut worker = taskwire.worker(name, &options).expect("start worker");
    worker.pulling().await.expect("worker ready");
    worker
}

/// The median of `samples`.
fn p50(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}
