//! The real-task phase: parent + `explore` child runs (see [`crate::repo_script`]) in a
//! real git repository (see [`crate::repos`]), several at a time on one worker whose
//! `--workspace` is that repository, and what they cost.
//!
//! Each repository gets two passes, each with a coordinator and a worker of its own
//! and a warm-up round first (the worker's repository cache is made then):
//!
//! 1. **plain**, as in production without trace export: the CPU of the coordinator and
//!    the worker over the measured runs, reaped child processes included (the `git`
//!    commands that make and remove workspaces), read once both are idle again; each
//!    run's time from its submit to the parent's finished notice; and the worker's
//!    `workspace ready … elapsed_ms` lines (its log at debug for that module alone).
//! 2. **traced**, with spans exported to the benchmark's OTLP receiver: claim → first
//!    model call of each attempt (see [`crate::repo_figures`]).
//!
//! A parent holds its worker slot while its child runs, so the worker runs twice as
//! many sessions as there are runs at a time; with as many slots as runs, every slot
//! would hold a parent waiting for a child that cannot start.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use taskwire_protocol::pb;
use taskwire_test_support::{Collector, ScriptedModel};

use crate::cluster::{self, Client, Process, Taskwire, Workspace};
use crate::cpu::{Meter, Readings};
use crate::load::Events;
use crate::repo_figures::{self, RepoFigures};
use crate::repo_script;
use crate::repos::Prepared;

/// The worker's log: warnings, and the line that times each workspace.
const WORKER_LOG: &str = "warn,taskwire_worker::workspace=debug";

/// A run that has not finished in this long has failed.
const PATIENCE: Duration = Duration::from_secs(300);

/// What every pass shares.
pub struct Setup<'a> {
    pub taskwire: &'a Taskwire,
    pub nats_url: String,
    pub database_url: String,
    pub model: &'a ScriptedModel,
    pub events: &'a Events,
    pub collector: &'a Collector,
    /// Measured runs per pass.
    pub runs: usize,
    /// Runs at a time.
    pub at_once: usize,
    /// Parents write a file before they delegate (their workspaces are made).
    pub parent_writes: bool,
}

/// A coordinator and one worker in the repository.
struct Pair {
    coordinator: Process,
    worker: Process,
    client: Client,
}

impl Pair {
    async fn start(setup: &Setup<'_>, repo: &Prepared, pass: &str) -> anyhow::Result<Self> {
        let endpoint = setup.collector.endpoint();
        let otel = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ];
        let traced = pass == "traced";
        let env: &[(&str, &str)] = if traced { &otel } else { &[] };
        let name = format!("repo-{}-{pass}", repo.repo.name());
        let addr = cluster::free_addr()?;
        let mut coordinator = setup.taskwire.coordinator(
            &format!("{name}-coordinator"),
            &setup.database_url,
            &setup.nats_url,
            addr,
            env,
        )?;
        let client = cluster::wait_serving(&mut coordinator, addr).await?;
        let mut worker_env = vec![("RUST_LOG", WORKER_LOG)];
        worker_env.extend_from_slice(env);
        let workspaces = setup.taskwire.dir().join(format!("workspaces-{name}"));
        let worker = setup.taskwire.worker_in(
            &format!("{name}-worker"),
            &setup.nats_url,
            &setup.model.base_url(),
            setup.at_once * 2,
            Workspace {
                base: &repo.path,
                dir: &workspaces,
            },
            &worker_env,
        )?;
        Ok(Self {
            coordinator,
            worker,
            client,
        })
    }

    fn meters(&self) -> [Meter; 2] {
        [
            Meter::Pids(vec![self.coordinator.pid()]),
            Meter::Pids(vec![self.worker.pid()]),
        ]
    }

    fn check_running(&mut self) -> anyhow::Result<()> {
        self.coordinator.check_running()?;
        self.worker.check_running()
    }

    fn stop(self) {
        self.worker.stop();
        self.coordinator.stop();
    }
}

/// Both passes in `repo`.
pub async fn measure(setup: &Setup<'_>, repo: Prepared) -> anyhow::Result<RepoFigures> {
    let label = repo.repo.name();
    eprintln!(
        "  {label}: plain pass, {} runs {} at a time",
        setup.runs, setup.at_once
    );
    let mut pair = Pair::start(setup, &repo, "plain").await?;
    runs(setup, &pair.client, &repo, 0, setup.at_once).await?;
    let meters = pair.meters();
    settle(&meters).await?;
    let log_from = std::fs::metadata(pair.worker.log()).map_or(0, |m| m.len());
    let before = Readings::take(&meters)?;
    let measured = runs(setup, &pair.client, &repo, setup.at_once, setup.runs).await?;
    settle(&meters).await?;
    let cpu = before.per_unit_since(&meters, setup.runs)?;
    pair.check_running()?;
    let log = std::fs::read(pair.worker.log()).context("failed to read the worker's log")?;
    let log = String::from_utf8_lossy(log.get(log_from as usize..).unwrap_or_default());
    pair.stop();
    let parents: HashSet<String> = measured.iter().map(|(id, _)| id.clone()).collect();
    let workspace_ready =
        repo_figures::split_by_task(repo_figures::workspace_ready(&log), &parents);

    eprintln!("  {label}: traced pass, {} runs", setup.runs);
    let mut pair = Pair::start(setup, &repo, "traced").await?;
    runs(setup, &pair.client, &repo, 0, setup.at_once).await?;
    let traced = runs(setup, &pair.client, &repo, setup.at_once, setup.runs).await?;
    pair.check_running()?;
    let traced: HashSet<String> = traced.into_iter().map(|(id, _)| id).collect();
    // The processes export every few seconds: wait for every attempt's model call.
    let until = Instant::now() + Duration::from_secs(30);
    let mut first_call = repo_figures::first_model_calls(&setup.collector.spans(), &traced);
    while (first_call.parent.len() < setup.runs || first_call.child.len() < setup.runs)
        && Instant::now() < until
    {
        tokio::time::sleep(Duration::from_millis(250)).await;
        first_call = repo_figures::first_model_calls(&setup.collector.spans(), &traced);
    }
    pair.stop();
    if first_call.parent.len() < setup.runs || first_call.child.len() < setup.runs {
        eprintln!(
            "  {label}: spans of {} parents and {} children of {} runs received",
            first_call.parent.len(),
            first_call.child.len(),
            setup.runs
        );
    }
    let checked = repo_script::check(&setup.model.requests())?;
    anyhow::ensure!(checked > 0, "no tool call of a real-task run was seen");

    Ok(RepoFigures {
        repo,
        runs: setup.runs,
        cpu_coordinator: Duration::from_secs_f64(cpu[0] / 1e6),
        cpu_worker: Duration::from_secs_f64(cpu[1] / 1e6),
        run_time: measured.into_iter().map(|(_, took)| took).collect(),
        first_call,
        workspace_ready,
    })
}

/// `n` runs (numbered from `from`), `setup.at_once` at a time: each parent's task id
/// and the time from its submit to its finished notice.
async fn runs(
    setup: &Setup<'_>,
    client: &Client,
    repo: &Prepared,
    from: usize,
    n: usize,
) -> anyhow::Result<Vec<(String, Duration)>> {
    let lookup = repo.repo.lookup();
    futures::stream::iter(from..from + n)
        .map(|i| {
            let mut client = client.clone();
            async move {
                let submitted = Instant::now();
                let request = pb::SubmitRequest {
                    agent: "general".into(),
                    prompt: repo_script::parent_prompt(lookup, i, setup.parent_writes),
                    ..Default::default()
                };
                let id = client
                    .submit(request)
                    .await
                    .context("failed to submit a real-task run")?
                    .into_inner()
                    .task_id;
                let finished = setup.events.finished(&id, PATIENCE).await?;
                Ok::<_, anyhow::Error>((id, finished.saturating_duration_since(submitted)))
            }
        })
        .buffer_unordered(setup.at_once.max(1))
        .try_collect()
        .await
}

/// Waits until the processes' CPU time stops growing (their last workspace removed,
/// its `git` processes reaped), for at most a few seconds.
async fn settle(meters: &[Meter]) -> anyhow::Result<()> {
    let total = || -> anyhow::Result<Duration> {
        meters
            .iter()
            .map(Meter::cpu)
            .try_fold(Duration::ZERO, |sum, cpu| Ok(sum + cpu?))
    };
    let until = Instant::now() + Duration::from_secs(3);
    let mut last = total()?;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = total()?;
        if now == last || Instant::now() > until {
            return Ok(());
        }
        last = now;
    }
}
