//! `mcp`: what a tool call costs through MCP against a built-in tool, on real processes.
//!
//! A private nats-server and Postgres, a `taskwire coordinator` and a `taskwire worker`
//! (release build, in the sandbox as in production), the scripted model in this
//! process. Each task makes `--calls` tool calls, one per model turn, then answers;
//! tasks run one at a time, `--tasks` per tool, after a warm-up task. The tools:
//!
//! - `read` (built-in) of a small file: the baseline;
//! - `everything_echo`: the npm reference server over stdio (a `node` child of the
//!   worker in the sandbox, started at the session's start and stopped at its end);
//! - `remote_shout`: a Streamable HTTP server built with the official Python SDK
//!   (`tests/mcp/http_server.py`, a peer: its CPU is not counted, as the model's is not).
//!
//! Per tool: run time per task (p50), CPU of the coordinator and the worker per task
//! with their reaped child processes (the `node` servers), and the time and CPU each
//! call adds over `read`. The peers come from `scripts/setup.sh`
//! (`~/.cache/taskwire/mcp`).
//!
//! Usage: `mcp [--tasks N] [--calls N]`

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use serde_json::json;
use taskwire_bench::cluster::{self, Client, Taskwire, Workspace};
use taskwire_bench::cpu::{Meter, Readings};
use taskwire_protocol::pb;
use taskwire_test_support::{NatsServer, PrivatePostgres, ScriptedModel, ScriptedReply};

/// The tools compared: name, what a good answer contains.
const TOOLS: [(&str, &str); 3] = [
    ("read", "a note"),
    ("everything_echo", "Echo: hi"),
    ("remote_shout", "HI"),
];

/// The arguments of call `n` of `tool`: each differs from the last (a session refuses
/// the same call three times in a row).
fn arguments(tool: &str, n: usize) -> serde_json::Value {
    match tool {
        "read" => json!({"filePath": "notes.txt", "limit": 100 + n}),
        "everything_echo" => json!({"message": format!("hi {n}")}),
        _ => json!({"text": format!("hi {n}")}),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut tasks = 20usize;
    let mut calls = 10usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().context("a flag without its value")?;
        match arg.as_str() {
            "--tasks" => tasks = value.parse()?,
            "--calls" => calls = value.parse()?,
            other => bail!("unknown flag {other}; usage: mcp [--tasks N] [--calls N]"),
        }
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let home = PathBuf::from(std::env::var_os("HOME").context("HOME")?);
    let peers = home.join(".cache/taskwire/mcp");
    let everything =
        peers.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let python = peers.join("venv/bin/python");
    if !everything.exists() || !python.exists() {
        bail!(
            "the MCP peers are missing under {}: run scripts/setup.sh",
            peers.display()
        );
    }
    let http_server =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/http_server.py");
    let mut remote = tokio::process::Command::new(&python)
        .arg(&http_server)
        .args(["--port", "0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("the http mcp server")?;
    let url = {
        use tokio::io::AsyncBufReadExt;
        let stdout = remote.stdout.take().context("stdout")?;
        let line = tokio::io::BufReader::new(stdout)
            .lines()
            .next_line()
            .await?
            .context("the server's ready line")?;
        line.strip_prefix("ready ").context("ready URL")?.to_owned()
    };

    let taskwire = Taskwire::locate(None)?;
    let config = taskwire.dir().join("definitions");
    std::fs::create_dir_all(&config)?;
    std::fs::write(
        config.join("mcp.json"),
        json!({"mcp": {
            "everything": {"type": "local", "command": ["node", everything, "stdio"], "timeout": 30000},
            "remote": {"type": "remote", "url": url, "timeout": 30000}
        }})
        .to_string(),
    )?;
    let base = taskwire.dir().join("base");
    std::fs::create_dir_all(&base)?;
    std::fs::write(base.join("notes.txt"), "a note\n")?;

    let nats = NatsServer::start()?;
    let pg = PrivatePostgres::start_with_settings(&[("fsync", "on")])?;
    {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&pg.url()).await?;
        sqlx::query("CREATE DATABASE taskwire")
            .execute(&mut conn)
            .await?;
    }
    let model = ScriptedModel::start(move |req| {
        let first = req.first_user_message().unwrap_or_default().to_owned();
        let mut words = first.split(' ').skip(1);
        let (Some(tool), Some(n)) = (words.next(), words.next().and_then(|n| n.parse().ok()))
        else {
            return ScriptedReply::text("done");
        };
        let turn = req.assistant_turns();
        if turn < n {
            let args = arguments(tool, turn);
            return ScriptedReply::tool_calls([(format!("c{turn}"), tool.to_owned(), args)]);
        }
        let last = req
            .messages
            .iter()
            .rev()
            .find(|m| m.role == "tool")
            .map_or(String::new(), |m| m.content.clone());
        ScriptedReply::text(format!("last: {last}"))
    })
    .await;

    let addr = cluster::free_addr()?;
    let config_dir = config.display().to_string();
    let mut coordinator = taskwire.coordinator(
        "mcp-coordinator",
        &pg.url_for("taskwire"),
        &nats.url(),
        addr,
        &[("TASKWIRE_CONFIG_DIR", config_dir.as_str())],
    )?;
    let client = cluster::wait_serving(&mut coordinator, addr).await?;
    let workspaces = taskwire.dir().join("workspaces");
    let worker = taskwire.worker_in(
        "mcp-worker",
        &nats.url(),
        &model.base_url(),
        4,
        Workspace {
            base: &base,
            dir: &workspaces,
        },
        &[],
    )?;
    let meters = [
        Meter::Pids(vec![coordinator.pid()]),
        Meter::Pids(vec![worker.pid()]),
    ];

    println!(
        "{tasks} tasks per tool, one at a time, each {calls} tool calls (one per model turn) then an answer; \
         CPU of coordinator + worker with reaped child processes\n"
    );
    println!(
        "| tool | run time p50 per task | CPU per task | per call over `read`: time | per call over `read`: CPU |"
    );
    println!("|---|---|---|---|---|");
    let mut baseline: Option<(Duration, Duration)> = None;
    for (tool, expect) in TOOLS {
        run(&client, tool, calls, expect).await?; // warm-up
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = Readings::take(&meters)?;
        let mut times = Vec::new();
        for _ in 0..tasks {
            times.push(run(&client, tool, calls, expect).await?);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let split = before.per_unit_since(&meters, tasks)?;
        eprintln!(
            "  {tool}: coordinator {:.1} ms, worker {:.1} ms per task",
            split[0] / 1e3,
            split[1] / 1e3
        );
        let cpu = Duration::from_secs_f64(split.iter().sum::<f64>() / 1e6);
        times.sort();
        let p50 = times[times.len() / 2];
        let (over_time, over_cpu) = match baseline {
            None => {
                baseline = Some((p50, cpu));
                ("-".to_owned(), "-".to_owned())
            }
            Some((t, c)) => (
                format!(
                    "{:.2} ms",
                    (p50.as_secs_f64() - t.as_secs_f64()) * 1e3 / calls as f64
                ),
                format!(
                    "{:.2} ms",
                    (cpu.as_secs_f64() - c.as_secs_f64()) * 1e3 / calls as f64
                ),
            ),
        };
        println!(
            "| `{tool}` | {:.1} ms | {:.1} ms | {over_time} | {over_cpu} |",
            p50.as_secs_f64() * 1e3,
            cpu.as_secs_f64() * 1e3
        );
    }
    worker.stop();
    coordinator.stop();
    Ok(())
}

/// One task of `calls` calls of `tool`, submitted and watched to its result; its time.
async fn run(client: &Client, tool: &str, calls: usize, expect: &str) -> anyhow::Result<Duration> {
    let mut client = client.clone();
    let started = Instant::now();
    let submitted = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: format!("bench {tool} {calls}"),
            ..Default::default()
        })
        .await?
        .into_inner();
    let mut events = client
        .watch(pb::WatchRequest {
            task_id: submitted.task_id.clone(),
        })
        .await?
        .into_inner();
    while let Some(event) = events.next().await {
        if let Some(pb::watch_event::Event::Result(result)) = event?.event {
            let took = started.elapsed();
            let text = result.output.map(|o| o.text).unwrap_or_default();
            if result.status != pb::TaskStatus::Completed as i32 || !text.contains(expect) {
                bail!("{tool}: the task did not get the tool's answer: {text:?}");
            }
            return Ok(took);
        }
    }
    bail!("{tool}: the watch ended without a result")
}
