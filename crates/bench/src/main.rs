//! `taskwire-bench`: end-to-end throughput and latency of no-op agent tasks.
//!
//! Starts its own nats-server, a fresh Postgres database (the server from
//! `TASKWIRE_TEST_DATABASE_URL`), the scripted model answering at once over HTTP, one
//! coordinator and one worker in this process. Submits `--tasks` tasks concurrently over
//! gRPC and times each from its submit to the moment its result is recorded (the
//! coordinator's "finished" notice). For scale it then runs the same number of messages
//! through raw JetStream (publish to a WorkQueue stream, pull, ack) on the same server.
//!
//! Then, one call at a time over one connection, the latency of `Get` and of a whole
//! `Watch` of a finished task: responses of several HTTP/2 frames, which a socket
//! without `TCP_NODELAY` holds back for the client's delayed ACK (~40 ms each).
//!
//! Usage: `taskwire-bench [--tasks N] [--worker-concurrency N] [--submitters N]
//! [--samples N]`

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;
use taskwire_test_support::{NatsServer, ScriptedModel, TestDatabase};
use tokio_util::sync::CancellationToken;

/// The same allocator as the `taskwire` binary, so the figures are the product's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Args {
    tasks: usize,
    worker_concurrency: usize,
    submitters: usize,
    /// Calls in each one-at-a-time latency measurement.
    samples: usize,
}

const USAGE: &str = "usage: taskwire-bench [--tasks N (1000)] [--worker-concurrency N (256)] \
                     [--submitters N (64)] [--samples N (100)]";

/// The parsed flags, or `None` for `--help`.
fn args() -> anyhow::Result<Option<Args>> {
    let mut a = Args {
        tasks: 1000,
        worker_concurrency: 256,
        submitters: 64,
        samples: 100,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            return Ok(None);
        }
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--tasks" => a.tasks = value.parse()?,
            "--worker-concurrency" => a.worker_concurrency = value.parse()?,
            "--submitters" => a.submitters = value.parse()?,
            "--samples" => a.samples = value.parse()?,
            other => anyhow::bail!("unknown flag {other}\n{USAGE}"),
        }
    }
    anyhow::ensure!(a.samples > 0, "--samples must be at least 1");
    Ok(Some(a))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Some(args) = args()? else {
        println!("{USAGE}");
        return Ok(());
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let nats = NatsServer::start()?;
    let db = TestDatabase::create().await?;
    let model = ScriptedModel::echo().await;
    let workspace = tempfile_dir()?;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let coordinator = tokio::spawn(taskwire_coordinator::serve(
        taskwire_coordinator::CoordinatorConfig {
            database_url: db.url().to_owned(),
            nats_url: nats.url(),
            listen: addr,
            http_listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            db_max_connections: 24,
            ..Default::default()
        },
        listener,
        shutdown.clone(),
    ));
    let mut worker_config = taskwire_worker::WorkerConfig {
        nats_url: nats.url(),
        concurrency: args.worker_concurrency,
        workspace: workspace.clone(),
        ..Default::default()
    };
    worker_config.model.base_url = model.base_url();
    worker_config.model.stream = false;
    let worker = tokio::spawn(taskwire_worker::run(worker_config, shutdown.clone()));

    let endpoint = format!("http://{addr}");
    let client = loop {
        if let Ok(mut c) = TaskServiceClient::connect(endpoint.clone()).await
            && c.list_agents(pb::ListAgentsRequest::default())
                .await
                .is_ok()
        {
            break c;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    // Warm up connections, the model client and the database.
    run_tasks(&client, &nats.url(), 50, args.submitters).await?;
    let (elapsed, finished) = run_tasks(&client, &nats.url(), args.tasks, args.submitters).await?;
    let mut latencies: Vec<Duration> = finished.iter().map(|(_, l)| *l).collect();
    latencies.sort();
    let tw_rate = args.tasks as f64 / elapsed.as_secs_f64();
    let raw = raw_jetstream(&nats.url(), args.tasks).await?;
    let raw_rate = args.tasks as f64 / raw.as_secs_f64();

    println!("tasks:                    {}", args.tasks);
    println!(
        "taskwire end to end:      {:.0} ms  ({tw_rate:.0} tasks/s)",
        elapsed.as_secs_f64() * 1e3
    );
    println!("  submit→result p50:      {:.1} ms", pct(&latencies, 0.50));
    println!("  submit→result p99:      {:.1} ms", pct(&latencies, 0.99));
    println!(
        "raw jetstream pub+pull+ack: {:.0} ms  ({raw_rate:.0} msgs/s)",
        raw.as_secs_f64() * 1e3
    );
    println!(
        "ratio taskwire/raw time:  {:.1}x",
        elapsed.as_secs_f64() / raw.as_secs_f64()
    );
    // Idle latency: one task at a time, against one message at a time through JetStream.
    let samples = args.samples;
    let mut idle = Vec::with_capacity(samples);
    for _ in 0..samples {
        let (_, l) = run_tasks(&client, &nats.url(), 1, 1).await?;
        idle.extend(l.into_iter().map(|(_, l)| l));
    }
    idle.sort();
    let mut raw_idle = raw_jetstream_latency(&nats.url(), samples).await?;
    raw_idle.sort();
    println!("one task at a time ({samples}):");
    println!("  submit→result p50:      {:.2} ms", pct(&idle, 0.50));
    println!("  submit→result p99:      {:.2} ms", pct(&idle, 0.99));
    println!(
        "  raw jetstream publish→delivery p50: {:.2} ms",
        pct(&raw_idle, 0.50)
    );
    let (finished_id, _) = finished.first().context("no task finished")?;
    let mut gets = get_latency(&client, finished_id, samples).await?;
    gets.sort();
    let mut watches = watch_latency(&client, finished_id, samples).await?;
    watches.sort();
    println!("one call at a time on a finished task ({samples}):");
    println!("  Get p50:                {:.2} ms", pct(&gets, 0.50));
    println!("  Get p99:                {:.2} ms", pct(&gets, 0.99));
    println!("  Watch to its end p50:   {:.2} ms", pct(&watches, 0.50));
    println!("  Watch to its end p99:   {:.2} ms", pct(&watches, 0.99));
    println!("model requests served:    {}", model.request_count());

    shutdown.cancel();
    let _ = worker.await;
    let _ = coordinator.await;
    let _ = std::fs::remove_dir_all(&workspace);
    Ok(())
}

/// `n` calls of `Get` on `task_id`, one at a time; the latency of each.
async fn get_latency(
    client: &TaskServiceClient<tonic::transport::Channel>,
    task_id: &str,
    n: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut client = client.clone();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let task = client
            .get(pb::GetRequest {
                task_id: task_id.to_owned(),
            })
            .await?
            .into_inner();
        out.push(t.elapsed());
        anyhow::ensure!(task.result.is_some(), "task {task_id} is not finished");
    }
    Ok(out)
}

/// `n` whole `Watch` streams of `task_id` (replayed progress, the result, the end), one
/// at a time; the latency of each.
async fn watch_latency(
    client: &TaskServiceClient<tonic::transport::Channel>,
    task_id: &str,
    n: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut client = client.clone();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let mut stream = client
            .watch(pb::WatchRequest {
                task_id: task_id.to_owned(),
            })
            .await?
            .into_inner();
        let mut events = 0;
        while stream.message().await?.is_some() {
            events += 1;
        }
        out.push(t.elapsed());
        anyhow::ensure!(events > 0, "the watch of {task_id} was empty");
    }
    Ok(out)
}

/// Submits `n` tasks from `submitters` concurrent callers; returns the time from the
/// first submit to the last recorded result, and each task's id and submit→result
/// latency.
async fn run_tasks(
    client: &TaskServiceClient<tonic::transport::Channel>,
    nats_url: &str,
    n: usize,
    submitters: usize,
) -> anyhow::Result<(Duration, Vec<(String, Duration)>)> {
    let nats = async_nats::connect(nats_url).await?;
    let mut finished = nats.subscribe("taskwire.finished.*").await?;
    nats.flush().await?;
    let started: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let t0 = Instant::now();
    let collector = tokio::spawn(async move {
        let mut done = HashMap::with_capacity(n);
        while done.len() < n {
            match tokio::time::timeout(Duration::from_secs(60), finished.next()).await {
                Ok(Some(msg)) => {
                    let id = msg
                        .subject
                        .as_str()
                        .rsplit('.')
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    done.insert(id, Instant::now());
                }
                _ => break,
            }
        }
        done
    });
    futures::stream::iter(0..n)
        .for_each_concurrent(submitters, |i| {
            let mut client = client.clone();
            let started = started.clone();
            async move {
                let t = Instant::now();
                let r = client
                    .submit(pb::SubmitRequest {
                        agent: "general".into(),
                        prompt: format!("no-op task {i}"),
                        ..Default::default()
                    })
                    .await;
                match r {
                    Ok(r) => {
                        started
                            .lock()
                            .expect("lock")
                            .insert(r.into_inner().task_id, t);
                    }
                    Err(e) => eprintln!("submit failed: {e}"),
                }
            }
        })
        .await;
    let done = collector.await?;
    let elapsed = done
        .values()
        .max()
        .map_or(Duration::ZERO, |last| *last - t0);
    let started = started.lock().expect("lock");
    anyhow::ensure!(done.len() == n, "only {} of {n} tasks finished", done.len());
    let latencies = done
        .iter()
        .filter_map(|(id, end)| started.get(id).map(|s| (id.clone(), *end - *s)))
        .collect();
    Ok((elapsed, latencies))
}

/// Publish→delivery latency of single messages through a WorkQueue stream and a
/// waiting pull consumer, one at a time.
async fn raw_jetstream_latency(url: &str, n: usize) -> anyhow::Result<Vec<Duration>> {
    use async_nats::jetstream::{self, consumer, stream};
    let client = async_nats::connect(url).await?;
    let js = jetstream::new(client);
    let s = js
        .create_stream(stream::Config {
            name: "BENCH_LATENCY".into(),
            subjects: vec!["bench.latency".into()],
            retention: stream::RetentionPolicy::WorkQueue,
            ..Default::default()
        })
        .await?;
    let c: consumer::PullConsumer = s
        .create_consumer(consumer::pull::Config {
            durable_name: Some("latency".into()),
            ..Default::default()
        })
        .await?;
    let mut messages = c.messages().await?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        js.publish("bench.latency", format!("m{i}").into()).await?;
        let m = messages
            .next()
            .await
            .context("stream ended")?
            .map_err(|e| anyhow::anyhow!(e))?;
        out.push(t.elapsed());
        m.ack().await.map_err(|e| anyhow::anyhow!(e))?;
    }
    Ok(out)
}

/// Publishes `n` messages to a WorkQueue stream (pipelined) while a pull consumer takes
/// and acks them; returns the time from the first publish to the last ack.
async fn raw_jetstream(url: &str, n: usize) -> anyhow::Result<Duration> {
    use async_nats::jetstream::{self, consumer, stream};
    let client = async_nats::connect(url).await?;
    let js = jetstream::new(client);
    let s = js
        .create_stream(stream::Config {
            name: "BENCH_RAW".into(),
            subjects: vec!["bench.raw".into()],
            retention: stream::RetentionPolicy::WorkQueue,
            ..Default::default()
        })
        .await?;
    let c: consumer::PullConsumer = s
        .create_consumer(consumer::pull::Config {
            durable_name: Some("raw".into()),
            ..Default::default()
        })
        .await?;
    let t0 = Instant::now();
    let consume = tokio::spawn(async move {
        let mut messages = c.messages().await?;
        let mut seen = 0;
        while seen < n {
            let m = messages
                .next()
                .await
                .context("stream ended")?
                .map_err(|e| anyhow::anyhow!(e))?;
            m.ack().await.map_err(|e| anyhow::anyhow!(e))?;
            seen += 1;
        }
        anyhow::Ok(Instant::now())
    });
    let mut acks = Vec::with_capacity(n);
    for i in 0..n {
        acks.push(js.publish("bench.raw", format!("m{i}").into()).await?);
    }
    for a in acks {
        a.await?;
    }
    let end = consume.await??;
    Ok(end - t0)
}

fn pct(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("taskwire-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
