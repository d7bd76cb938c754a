//! Crash safety: nothing acknowledged is lost, nothing runs twice into the record,
//! when a worker or the coordinator is killed (SIGKILL, as real `taskwire` processes),
//! when nats-server restarts, and when Postgres stops for a while.
//!
//! - [`worker_crash`]: a worker killed mid-session; another finishes the task.
//! - [`delegation_crash`]: a parent's worker killed while its children run (or after
//!   they finished), foreground or background; the parent re-attaches to them and no
//!   child runs twice.
//! - [`coordinator_crash`]: the coordinator killed during a burst of submits, and down
//!   for longer than JetStream's delivery budget lasts with queued tasks.
//! - [`two_coordinators`]: two coordinators share submits; one is killed mid-burst and
//!   the other finishes the work.
//! - [`nats_restart`]: the broker restarted under load.
//! - [`postgres_outage`]: the database stopped and started again; a transcript load
//!   refused while it is down.
//!
//! Process tests need the `taskwire` binary (`cargo build -p taskwire-cli`). Each test
//! prints what it measured (`--nocapture` shows it); `TASKWIRE_KEEP_LOGS=1` keeps the
//! processes' logs and `TASKWIRE_CHILD_LOG` sets their log filter.

mod coordinator_crash;
mod delegation_crash;
mod nats_restart;
mod postgres_outage;
mod two_coordinators;
mod worker_crash;

use std::collections::HashMap;
use std::time::Duration;

use anyhow::bail;
use taskwire_e2e::PATIENCE;
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};
use tonic::transport::Channel;

/// A `general` task with this prompt.
fn task(prompt: &str) -> pb::SubmitRequest {
    pb::SubmitRequest {
        agent: "general".into(),
        prompt: prompt.into(),
        ..Default::default()
    }
}

/// The echo model's answer to `prompt`.
fn echo_of(prompt: &str) -> String {
    format!("echo: {prompt}")
}

/// A model that answers `echo: <prompt>` after `delay`, so sessions are in flight for a
/// while.
async fn slow_echo(delay: Duration) -> ScriptedModel {
    ScriptedModel::start(move |req: &SeenRequest| {
        ScriptedReply::text(echo_of(req.last_user_message().unwrap_or_default())).with_delay(delay)
    })
    .await
}

/// How many model requests each prompt got: a session of these tests makes exactly one,
/// so a count above one means the task ran twice.
fn prompts_seen(model: &ScriptedModel) -> HashMap<String, usize> {
    let mut seen = HashMap::new();
    for req in model.requests() {
        *seen
            .entry(req.last_user_message().unwrap_or_default().to_owned())
            .or_default() += 1;
    }
    seen
}

/// Polls `Get` until the task has its result, riding out errors for `PATIENCE` (the
/// coordinator may be restarting).
async fn wait_finished(
    client: &mut TaskServiceClient<Channel>,
    task_id: &str,
) -> anyhow::Result<pb::Task> {
    wait_finished_within(client, task_id, PATIENCE).await
}

/// [`wait_finished`] with a patience of its own.
async fn wait_finished_within(
    client: &mut TaskServiceClient<Channel>,
    task_id: &str,
    patience: Duration,
) -> anyhow::Result<pb::Task> {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let last = match client
            .get(pb::GetRequest {
                task_id: task_id.into(),
            })
            .await
        {
            Ok(task) => {
                let task = task.into_inner();
                if task.result.is_some() {
                    return Ok(task);
                }
                format!("status {:?}, attempt {}", task.status(), task.attempt)
            }
            Err(status) => format!("get failed: {status}"),
        };
        if tokio::time::Instant::now() > deadline {
            bail!("task {task_id} did not finish within {patience:?}; last seen: {last}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Polls `check` every 20 ms until it returns `Some`, failing after `PATIENCE` with `what`.
async fn eventually<T>(
    what: &str,
    mut check: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check()? {
            return Ok(value);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out after {PATIENCE:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
