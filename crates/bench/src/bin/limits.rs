//! `limits`: a fleet against a rate-limited model provider, on real processes.
//!
//! A private nats-server and Postgres, a `taskwire coordinator` and one or two
//! `taskwire worker`s (release build, titles on), and a model server of the test
//! support that accepts `--rate` requests in any one-second window and answers `429`
//! with `Retry-After: 1` (and OpenAI's `x-ratelimit-*`) above it. `--tasks` root tasks
//! are submitted at once; each makes one model call and one title call. Per setup
//! (one worker, two; the model's `requests_per_minute` configured at 90 % of the rate,
//! or not configured), what the server saw: requests sent per useful call, the peak
//! requests in a second, requests sent while a `Retry-After` ran (more than 50 ms after
//! the 429, so the fleet could have heard it), and throttled ones; the titles written,
//! the wall time, and the coordinator's and workers' CPU per task.
//!
//! Each setup asks for a model of its own name, so that the budgets the fleet keeps in
//! its limits bucket start empty.
//!
//! Usage: `limits [--tasks N] [--rate PER_SECOND]`

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use taskwire_bench::cluster::{self, Client, Taskwire};
use taskwire_bench::cpu::{Meter, Readings};
use taskwire_protocol::pb;
use taskwire_test_support::{NatsServer, PrivatePostgres, ScriptedModel, ScriptedReply};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut tasks = 50usize;
    let mut rate = 10usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().context("a flag without its value")?;
        match arg.as_str() {
            "--tasks" => tasks = value.parse()?,
            "--rate" => rate = value.parse()?,
            other => bail!("unknown flag {other}; usage: limits [--tasks N] [--rate PER_SECOND]"),
        }
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let taskwire = Taskwire::locate(None)?;
    std::fs::create_dir_all(taskwire.dir().join("workspace"))?;
    let nats = NatsServer::start()?;
    let pg = PrivatePostgres::start_with_settings(&[("fsync", "on")])?;
    {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&pg.url()).await?;
        sqlx::query("CREATE DATABASE taskwire")
            .execute(&mut conn)
            .await?;
    }
    let addr = cluster::free_addr()?;
    let mut coordinator = taskwire.coordinator(
        "limits-coordinator",
        &pg.url_for("taskwire"),
        &nats.url(),
        addr,
        &[],
    )?;
    let client = cluster::wait_serving(&mut coordinator, addr).await?;
    let rpm = rate * 60 * 9 / 10;
    println!(
        "{tasks} root tasks at once, each a model call and a title call, against a server \
         that accepts {rate} requests a second and answers 429 with Retry-After: 1 above it\n"
    );
    println!(
        "| setup | requests per useful call | peak requests/s | sent during a Retry-After | throttled | titles | wall time | CPU per task |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for workers in [1usize, 2] {
        for configured in [false, true] {
            let name = format!(
                "m-{workers}w-{}",
                if configured { "rpm" } else { "learned" }
            );
            let model = ScriptedModel::rate_limited(rate, |req| {
                if req
                    .first_user_message()
                    .unwrap_or_default()
                    .starts_with("task ")
                {
                    ScriptedReply::text("done")
                } else {
                    ScriptedReply::text("A title")
                }
            })
            .await;
            let catalogue = serde_json::json!({ &name: {
                "context_window": 100000, "input_usd_per_mtok": 0, "output_usd_per_mtok": 0,
                "requests_per_minute": if configured { Some(rpm) } else { None },
            }})
            .to_string();
            let env = [("TASKWIRE_MODELS", catalogue.as_str())];
            let mut fleet = Vec::new();
            for w in 0..workers {
                fleet.push(taskwire.worker_titled(
                    &format!("{name}-w{w}"),
                    &nats.url(),
                    &model.base_url(),
                    &name,
                    64,
                    &env,
                )?);
            }
            tokio::time::sleep(Duration::from_secs(1)).await; // the workers pull
            let meters: Vec<Meter> = std::iter::once(coordinator.pid())
                .chain(fleet.iter().map(cluster::Process::pid))
                .map(|pid| Meter::Pids(vec![pid]))
                .collect();
            let before = Readings::take(&meters)?;
            let started = Instant::now();
            let titled = run(&client, tasks).await?;
            let wall = started.elapsed();
            let cpu_us: f64 = before.per_unit_since(&meters, tasks)?.iter().sum();
            let report = model.rate_report();
            let useful = 2 * tasks;
            println!(
                "| {workers} worker{}, {} | {:.2} ({} for {useful}) | {} | {} | {} | {titled} of {tasks} | {:.1} s | {:.1} ms |",
                if workers > 1 { "s" } else { "" },
                if configured {
                    format!("`requests_per_minute = {rpm}`")
                } else {
                    "no limit configured (learned)".to_owned()
                },
                report.sent as f64 / useful as f64,
                report.sent,
                report.peak_per_second,
                report.early,
                report.throttled,
                wall.as_secs_f64(),
                cpu_us / 1e3,
            );
            for worker in fleet {
                worker.stop();
            }
        }
    }
    coordinator.stop();
    Ok(())
}

/// Submits `tasks` root tasks and waits for all; how many got a title.
async fn run(client: &Client, tasks: usize) -> anyhow::Result<usize> {
    let mut client = client.clone();
    let mut ids = Vec::with_capacity(tasks);
    for i in 0..tasks {
        let submitted = client
            .submit(pb::SubmitRequest {
                agent: "general".into(),
                prompt: format!("task {i}"),
                ..Default::default()
            })
            .await?
            .into_inner();
        ids.push(submitted.task_id);
    }
    let mut titled = 0;
    let deadline = Instant::now() + Duration::from_secs(600);
    for id in ids {
        loop {
            let task = client
                .get(pb::GetRequest {
                    task_id: id.clone(),
                })
                .await?
                .into_inner();
            if let Some(result) = &task.result {
                if result.status != pb::TaskStatus::Completed as i32 {
                    bail!("task {id} ended {:?}", result.status);
                }
                titled += usize::from(!task.title.is_empty());
                break;
            }
            if Instant::now() > deadline {
                bail!("task {id} did not finish in time");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(titled)
}
