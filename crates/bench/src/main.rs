//! `taskwire-bench`: throughput, latency, CPU per task and memory per waiting session of
//! real `taskwire` processes, with the same servers' raw JetStream and Postgres rates
//! measured in the same run (see the crate docs and `docs/performance.md`).
//!
//! Phases: (1) the raw rates; (2) `--tasks` no-op tasks from `--submitters` concurrent
//! gRPC callers, with the CPU each process used; (3) one task at a time, by its
//! finished notice and by `Submit` then `Watch`; (4) the same load again with trace
//! export on to an OTLP receiver in this process; (5) a worker's resident set with
//! `--waiting-sessions` sessions waiting on a model that does not answer yet; (6) real
//! tasks: `--repo-runs` parent + `explore` child runs that grep and read a real git
//! repository, in a section of their own (`--only repos` runs this phase alone); (7)
//! `--only scaling`: the throughput pass for 1, 2 and 4 coordinators and 1, 2, 4 and 8
//! workers (`--coordinators N` and `--workers N` set them for phases 2 to 4).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use taskwire_bench::cluster::{self, Client, Process, Taskwire};
use taskwire_bench::cpu::{Meter, Readings};
use taskwire_bench::figures::{self, Memory, Pass, Raw, Setup};
use taskwire_bench::load::{self, Events};
use taskwire_bench::raw;
use taskwire_bench::report;
use taskwire_bench::repos::{self, Repo};
use taskwire_bench::timeline;
use taskwire_bench::{repo_figures, repo_runs, repo_script, scaling};
use taskwire_bench::{stages, statements, traffic};
use taskwire_test_support::{
    Collector, Gate, NatsServer, PrivatePostgres, ScriptedModel, ScriptedReply,
};

/// The same allocator as the `taskwire` binary, so the client side behaves alike.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Prompts containing this wait for the model's gate: the sessions of the memory phase.
const WAITING: &str = "bench-waiting-session";

#[derive(Debug, Parser)]
#[command(
    name = "taskwire-bench",
    about = "taskwire end to end on real processes, as ratios to raw JetStream and Postgres"
)]
struct Args {
    /// No-op tasks in each throughput pass.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..))]
    tasks: u32,
    /// Worker processes.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    workers: u32,
    /// Coordinator processes; submitters spread their calls over them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    coordinators: u32,
    /// Sessions each worker runs at once (`taskwire worker --concurrency`).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    worker_concurrency: u32,
    /// Concurrent gRPC submitters in the throughput passes.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    submitters: u32,
    /// Seconds of open-loop load at `--paced-share` of the measured throughput, after
    /// the throughput pass, for submit→result under a sustained load (0 skips it).
    #[arg(long, default_value_t = 10)]
    paced_secs: u64,
    /// The share of the throughput pass's rate the open-loop load submits at.
    #[arg(long, default_value_t = 0.8)]
    paced_share: f64,
    /// Tasks in each one-at-a-time latency measurement.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    samples: u32,
    /// Sessions held waiting on the model in the memory phase (0 skips it).
    #[arg(long, default_value_t = 1000)]
    waiting_sessions: u32,
    /// Connections committing at once in the raw Postgres phase.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    pg_connections: u32,
    /// The `taskwire` binary [default: `taskwire` next to this executable].
    #[arg(long)]
    taskwire_bin: Option<PathBuf>,
    /// Where the table is written (its section replaced).
    #[arg(long, default_value = "docs/performance.md")]
    docs: PathBuf,
    /// Print the table only.
    #[arg(long)]
    no_docs: bool,
    /// Also print Postgres's statements per task in the plain pass (from
    /// `pg_stat_statements`, loaded for the run), and nats-server's messages per task
    /// (from its monitoring port's counters).
    #[arg(long)]
    statements: bool,
    /// Also print where one task's time goes: `--samples` tasks run one at a time with
    /// trace export on, cut at the edges of their spans.
    #[arg(long)]
    timeline: bool,
    /// Also print where a task's time goes under load, stage by stage (each stage's
    /// backlog sampled during a throughput pass on fresh processes, and during the
    /// sustained load, by Little's law), and what the stages do alone (submits with no
    /// worker running, then the workers on that backlog).
    #[arg(long)]
    stages: bool,
    /// Parent + `explore` child runs per repository in the real-task phase (0 skips it).
    #[arg(long, default_value_t = 40)]
    repo_runs: u32,
    /// Real-task runs at a time (the worker runs twice as many sessions: each parent
    /// holds its slot while its child runs).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    repo_concurrency: u32,
    /// In the real-task phase, each parent first writes a file of its own, so that its
    /// workspace is made (and its child starts from its change).
    #[arg(long)]
    repo_parent_writes: bool,
    /// The repositories of the real-task phase.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "this,tabler")]
    repos: Vec<Repo>,
    /// Where the real-task phase's repositories are made once and reused [default:
    /// `~/.cache/taskwire/bench/repos`].
    #[arg(long)]
    repo_cache: Option<PathBuf>,
    /// Rounds of the trace-export phase: each round runs the throughput pass on fresh
    /// processes without export and then with it, and the figure is the round with the
    /// median difference (one comparison moves by ±15 % on a shared 2-core machine).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    trace_rounds: u32,
    /// More environment for the exporting processes of the trace-export phase, as
    /// `KEY=VALUE` (repeatable): `OTEL_TRACES_SAMPLER=always_off` measures what the
    /// spans cost with nothing recorded or exported.
    #[arg(long, value_parser = parse_env_pair)]
    trace_env: Vec<(String, String)>,
    /// The OTLP protocol of the trace-export phase: `http/protobuf` (taskwire's
    /// default) or `grpc`.
    #[arg(long, value_enum, default_value_t = TraceProtocol::HttpProtobuf)]
    trace_protocol: TraceProtocol,
    /// After their throughput pass, the process sets compared in the trace-export
    /// rounds and in the scaling phase also take one open-loop load, this share of the
    /// first throughput pass's rate, for 5 s (0 skips it): CPU per task on
    /// equal work, where throughput passes of different speeds batch differently.
    #[arg(long, default_value_t = 0.5)]
    equal_load_share: f64,
    /// The equal load's rate in tasks/s, instead of a share of the first pass: the
    /// same work for runs of different binaries, or on different days.
    #[arg(long, conflicts_with = "equal_load_share")]
    equal_load_rate: Option<f64>,
    /// Rounds of the scaling phase: every setup runs once per round, and its row is
    /// the round with the median orchestration CPU per task.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// The scaling phase's setups, as `COORDINATORSxWORKERS` (comma-separated) [default:
    /// 1x1,2x1,4x1,1x2,1x4,1x8,2x2]. The first is the one the others are compared with.
    #[arg(long, value_delimiter = ',', value_parser = parse_setup)]
    setups: Vec<(u32, u32)>,
    /// Run only this phase (and write only its section).
    #[arg(long, value_enum)]
    only: Option<Only>,
}

/// `KEY=VALUE`, a variable of the environment.
fn parse_env_pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

/// `CxW`: a number of coordinators and of workers, each at least 1.
fn parse_setup(s: &str) -> Result<(u32, u32), String> {
    let parse = |n: &str| n.trim().parse::<u32>().ok().filter(|n| *n > 0);
    match s.split_once('x').map(|(c, w)| (parse(c), parse(w))) {
        Some((Some(c), Some(w))) => Ok((c, w)),
        _ => Err(format!(
            "{s:?} is not COORDINATORSxWORKERS (such as 2x1), each at least 1"
        )),
    }
}

/// A phase that can run alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Only {
    /// The real-task phase (6).
    Repos,
    /// The scaling phase (7): the throughput pass for 1, 2 and 4 coordinators and 1,
    /// 2, 4 and 8 workers, each setup on fresh processes.
    Scaling,
}

/// An OTLP protocol the trace-export phase can measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TraceProtocol {
    /// OTLP/HTTP with protobuf bodies, taskwire's default.
    #[value(name = "http/protobuf")]
    HttpProtobuf,
    /// OTLP/gRPC.
    Grpc,
}

impl TraceProtocol {
    /// The value of `OTEL_EXPORTER_OTLP_PROTOCOL`.
    fn name(self) -> &'static str {
        match self {
            Self::HttpProtobuf => "http/protobuf",
            Self::Grpc => "grpc",
        }
    }
}

/// The servers and the model, shared by every phase.
struct Servers {
    nats: NatsServer,
    pg: PrivatePostgres,
    model: ScriptedModel,
    gate: Gate,
    taskwire: Taskwire,
}

/// Coordinators and their workers.
struct Stack {
    coordinators: Vec<Process>,
    workers: Vec<Process>,
    /// One client per coordinator; load is spread over them.
    clients: Vec<Client>,
}

impl Stack {
    async fn start(
        s: &Servers,
        coordinators: u32,
        workers: u32,
        concurrency: u32,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let db = s.pg.url_for("taskwire");
        let mut started = Vec::new();
        let mut clients = Vec::new();
        for i in 0..coordinators.max(1) {
            let addr = cluster::free_addr()?;
            let mut coordinator = s.taskwire.coordinator(
                &format!("coordinator-{i}"),
                &db,
                &s.nats.url(),
                addr,
                env,
            )?;
            clients.push(cluster::wait_serving(&mut coordinator, addr).await?);
            started.push(coordinator);
        }
        let workers = (0..workers)
            .map(|i| {
                s.taskwire.worker(
                    &format!("worker-{i}"),
                    &s.nats.url(),
                    &s.model.base_url(),
                    concurrency as usize,
                    env,
                )
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            coordinators: started,
            workers,
            clients,
        })
    }

    /// The processes `args` name: `--coordinators`, `--workers`, `--worker-concurrency`.
    async fn of_args(s: &Servers, args: &Args, env: &[(&str, &str)]) -> anyhow::Result<Self> {
        Self::start(
            s,
            args.coordinators,
            args.workers,
            args.worker_concurrency,
            env,
        )
        .await
    }

    /// The first coordinator's client alone: for tasks one at a time.
    fn one(&self) -> &[Client] {
        &self.clients[..1]
    }

    fn meters(&self) -> [Meter; 2] {
        [
            Meter::Pids(self.coordinators.iter().map(Process::pid).collect()),
            Meter::Pids(self.workers.iter().map(Process::pid).collect()),
        ]
    }

    fn check_running(&mut self) -> anyhow::Result<()> {
        for p in self.coordinators.iter_mut().chain(self.workers.iter_mut()) {
            p.check_running()?;
        }
        Ok(())
    }

    fn stop(self) {
        for w in self.workers {
            w.stop();
        }
        for c in self.coordinators {
            c.stop();
        }
    }
}

async fn pass(
    s: &Servers,
    stack: &mut Stack,
    events: &Events,
    args: &Args,
    label: &str,
    traffic: Option<&str>,
) -> anyhow::Result<Pass> {
    // Warm up connections, pools, the model client and the database.
    let warm = args.tasks.min(500) as usize;
    events
        .batch(
            &stack.clients,
            &format!("{label} warm-up"),
            warm,
            args.submitters as usize,
        )
        .await?;
    if args.statements {
        statements::reset(&s.pg.url_for("taskwire")).await?;
    }
    let meters = pass_meters(s, stack)?;
    let http = traffic.map(|url| (reqwest::Client::new(), url));
    let traffic_before = match &http {
        Some((client, url)) => Some(traffic::Counters::read(client, url).await?),
        None => None,
    };
    let before = Readings::take(&meters)?;
    let n = args.tasks as usize;
    let batch = events
        .batch(
            &stack.clients,
            &format!("{label} no-op"),
            n,
            args.submitters as usize,
        )
        .await?;
    let cpu = before.per_unit_since(&meters, n)?;
    if let (Some((client, url)), Some(before)) = (&http, traffic_before) {
        let after = traffic::Counters::read(client, url).await?;
        println!("{}", traffic::report(before, after, n));
    }
    stack.check_running()?;
    Ok(Pass { batch, cpu })
}

/// What a pass meters, in the order of [`figures::Pass::cpu`]: the coordinators, the
/// workers, nats-server, Postgres, and the benchmark's own process last (the scripted
/// model, the callers and, when traces are exported, the span receiver, all on the
/// same cores).
fn pass_meters(s: &Servers, stack: &Stack) -> anyhow::Result<Vec<Meter>> {
    let mut meters = stack.meters().to_vec();
    meters.extend(server_meters(s)?);
    meters.push(Meter::Pids(vec![std::process::id()]));
    Ok(meters)
}

/// The equal load's rate (tasks/s): `--equal-load-rate`, or else `--equal-load-share`
/// of `n` tasks in `elapsed`.
fn equal_load(args: &Args, n: usize, elapsed: Duration) -> anyhow::Result<f64> {
    if let Some(rate) = args.equal_load_rate {
        anyhow::ensure!(
            rate.is_finite() && rate >= 0.0,
            "--equal-load-rate must be tasks/s, 0 or more, not {rate}"
        );
        return Ok(rate);
    }
    anyhow::ensure!(
        args.equal_load_share.is_finite() && args.equal_load_share >= 0.0,
        "--equal-load-share must be a share of 0 or more (0.5 is 50 %), not {}",
        args.equal_load_share
    );
    Ok(args.equal_load_share * n as f64 / elapsed.as_secs_f64().max(f64::EPSILON))
}

/// An open-loop load of `rate` tasks/s for [`scaling::EQUAL_LOAD`] on `stack`: the CPU per task
/// of each meter, as [`pass`] gives it; `None` when `rate` is 0.
async fn paced_pass(
    s: &Servers,
    stack: &mut Stack,
    events: &Events,
    label: &str,
    rate: f64,
) -> anyhow::Result<Option<Vec<f64>>> {
    if rate <= 0.0 {
        return Ok(None);
    }
    let meters = pass_meters(s, stack)?;
    let before = Readings::take(&meters)?;
    let tasks = events
        .paced(
            &stack.clients,
            &format!("{label} equal load"),
            rate,
            scaling::EQUAL_LOAD,
        )
        .await?
        .len();
    stack.check_running()?;
    Ok(Some(before.per_unit_since(&meters, tasks)?))
}

/// `--stages`: a throughput pass on fresh processes with the stages' backlogs
/// sampled, then the stages alone on fresh processes: submits while no worker runs,
/// then the workers on that backlog, then, the workers stopped, claims and results
/// with the benchmark in the workers' place.
async fn stages(s: &Servers, events: &Events, args: &Args) -> anyhow::Result<String> {
    let n = args.tasks as usize;
    let submitters = args.submitters as usize;
    let db = s.pg.url_for("taskwire");
    eprintln!("stages: {n} tasks with the stages' backlogs sampled");
    let stack = Stack::of_args(s, args, &[]).await?;
    events
        .batch(&stack.clients, "stages warm-up", n.min(500), submitters)
        .await?;
    let sampler = stages::Sampler::start(&s.nats.url(), &db).await?;
    let batch = events
        .batch(&stack.clients, "stages no-op", n, submitters)
        .await?;
    let backlogs = sampler.stop().await?;
    stack.stop();
    let throughput = n as f64 / batch.elapsed.as_secs_f64();

    eprintln!("stages: {n} submits with no worker running, then the workers on them");
    let mut stack = Stack::start(s, args.coordinators, 0, args.worker_concurrency, &[]).await?;
    let (submits, dispatches) =
        stages::submit_alone(&s.nats.url(), &stack.clients, n, submitters).await?;
    let before = events.finished_count();
    stack.workers = (0..args.workers)
        .map(|i| {
            s.taskwire.worker(
                &format!("worker-{i}"),
                &s.nats.url(),
                &s.model.base_url(),
                args.worker_concurrency as usize,
                &[],
            )
        })
        .collect::<Result<_, _>>()?;
    let results = stages::drain_alone(events, before, n).await?;
    stack.check_running()?;

    eprintln!(
        "stages: {n} submits with the workers stopped, claimed and reported by the benchmark"
    );
    stack.workers.clear();
    stages::submit_alone(&s.nats.url(), &stack.clients, n, submitters).await?;
    let (claims, recorded) =
        stages::claims_and_results_alone(&s.nats.url(), &db, events, n).await?;
    stack.check_running()?;
    stack.stop();
    Ok(stages::report(
        &backlogs,
        throughput,
        stages::mean(&batch.submit_to_result),
        Some(stages::Alone {
            submits,
            dispatches,
            results,
            claims,
            recorded,
        }),
    ))
}

fn server_meters(s: &Servers) -> anyhow::Result<[Meter; 2]> {
    let nats = s.nats.pid().context("nats-server is not running")?;
    let pg = s.pg.postmaster_pid().context("postgres is not running")?;
    Ok([Meter::Pids(vec![nats]), Meter::Tree(pg)])
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // The client side's allocator must not take CPU from the processes measured: with
    // huge pages, mimalloc's fresh pages were zeroed 2 MiB at a time, a tenth of the
    // machine's CPU during the throughput pass. The flag is inherited by the servers
    // and `taskwire` processes this starts (which set it themselves).
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    // The program by its name, not the path it was built at.
    let command = std::env::args()
        .enumerate()
        .map(|(i, a)| match i {
            0 => a.rsplit('/').next().unwrap_or_default().to_owned(),
            _ => a,
        })
        .collect::<Vec<_>>()
        .join(" ");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let loads = vec![("at the start".to_owned(), report::load_average())];
    let taskwire = Taskwire::locate(args.taskwire_bin.clone())?;
    // With `--statements`, its monitoring port too, for its message counters.
    let nats = if args.statements {
        NatsServer::start_with_args(["-m", "-1"])?
    } else {
        NatsServer::start()?
    };
    // Commits are durable, as in production: the raw rate and taskwire's both pay fsync.
    let mut settings = vec![("fsync", "on")];
    if args.statements {
        settings.extend(statements::SETTINGS);
    }
    let pg = PrivatePostgres::start_with_settings(&settings)?;
    let gate = Gate::new();
    let model_gate = gate.clone();
    let model = ScriptedModel::start(move |req| {
        if let Some(reply) = repo_script::reply(req) {
            return reply;
        }
        let reply = ScriptedReply::text("done");
        if req
            .first_user_message()
            .is_some_and(|m| m.contains(WAITING))
        {
            reply.with_gate(&model_gate)
        } else {
            reply
        }
    })
    .await;
    let s = Servers {
        nats,
        pg,
        model,
        gate,
        taskwire,
    };
    create_database(&s.pg).await?;
    let events = Events::listen(&s.nats.url()).await?;
    if args.only.is_none() {
        let section = end_to_end(&s, &events, &args, &command, loads).await?;
        println!("{section}");
        if !args.no_docs {
            report::write(&args.docs, &section)?;
            eprintln!("wrote {}", args.docs.display());
        }
    }
    if args.only == Some(Only::Scaling) {
        let section = scaling(&s, &events, &args, &command).await?;
        println!("{section}");
        if !args.no_docs {
            report::write_region(&args.docs, (scaling::BEGIN, scaling::END), &section)?;
            eprintln!("wrote {}", args.docs.display());
        }
        return Ok(());
    }
    if args.repo_runs > 0 && !args.repos.is_empty() {
        let section = real_tasks(&s, &events, &args, &command).await?;
        println!("{section}");
        if !args.no_docs {
            report::write_region(
                &args.docs,
                (repo_figures::BEGIN, repo_figures::END),
                &section,
            )?;
            eprintln!("wrote {}", args.docs.display());
        }
    }
    Ok(())
}

/// Phase 7: the throughput pass for each setup (`--setups`, else [`scaling::SETUPS`]), after the raw
/// rates.
async fn scaling(
    s: &Servers,
    events: &Events,
    args: &Args,
    command: &str,
) -> anyhow::Result<String> {
    let n = args.tasks as usize;
    let mut loads = vec![("at the start".to_owned(), report::load_average())];
    eprintln!("phase 7: raw jetstream and postgres");
    let js_time = raw::jetstream_rate(&s.nats.url(), n).await?;
    let pg_time = raw::postgres_commits(&s.pg.url(), n, args.pg_connections as usize).await?;
    let raw_rates = scaling::RawRates {
        jetstream: n as f64 / js_time.as_secs_f64(),
        commits: n as f64 / pg_time.as_secs_f64(),
    };
    // Rounds one after another, each over every setup: a drift of the machine's load
    // falls on every setup alike.
    let setups = match args.setups.is_empty() {
        true => scaling::SETUPS.to_vec(),
        false => args.setups.clone(),
    };
    let mut rounds: Vec<Vec<scaling::Row>> = vec![Vec::new(); setups.len()];
    // The equal load: a share of the first setup's first pass's rate, the same for all.
    let mut rate = None;
    for round in 1..=args.rounds {
        for (&(coordinators, workers), measured) in setups.iter().zip(&mut rounds) {
            eprintln!(
                "phase 7, round {round}/{}: {n} tasks, {coordinators} coordinator(s), {workers} worker(s)",
                args.rounds
            );
            let mut stack =
                Stack::start(s, coordinators, workers, args.worker_concurrency, &[]).await?;
            let label = format!("{coordinators}c{workers}w{round}");
            let pass = pass(s, &mut stack, events, args, &label, None).await?;
            let rate = match rate {
                Some(rate) => rate,
                None => *rate.insert(equal_load(args, n, pass.batch.elapsed)?),
            };
            let equal = paced_pass(s, &mut stack, events, &label, rate).await?;
            stack.stop();
            let four = |cpu: &[f64]| -> anyhow::Result<[f64; 4]> {
                cpu.get(..4)
                    .and_then(|c| c.try_into().ok())
                    .context("four CPU meters")
            };
            measured.push(scaling::Row {
                coordinators,
                workers,
                tasks: n,
                elapsed: pass.batch.elapsed,
                submit_to_result: pass.batch.submit_to_result,
                cpu: four(&pass.cpu)?,
                equal_load: equal
                    .map(|cpu| four(&cpu).map(|cpu| scaling::EqualLoad { rate, cpu }))
                    .transpose()?,
            });
        }
    }
    let mut rows: Vec<scaling::Row> = rounds
        .into_iter()
        .filter_map(scaling::median_round)
        .collect();
    loads.push(("at the end".to_owned(), report::load_average()));
    Ok(scaling::section(
        command,
        &report::machine(),
        &loads,
        raw_rates,
        &mut rows,
        args.worker_concurrency,
        args.rounds,
    ))
}

/// Phases 1 to 5: the section of the end-to-end figures.
async fn end_to_end(
    s: &Servers,
    events: &Events,
    args: &Args,
    command: &str,
    mut loads: Vec<(String, String)>,
) -> anyhow::Result<String> {
    let n = args.tasks as usize;
    let samples = args.samples as usize;

    eprintln!("phase 1: raw jetstream and postgres");
    let [nats_meter, pg_meter] = server_meters(s)?;
    let before = Readings::take(std::slice::from_ref(&nats_meter))?;
    let js_time = raw::jetstream_rate(&s.nats.url(), n).await?;
    let js_cpu = before.per_unit_since(std::slice::from_ref(&nats_meter), n)?[0];
    let js_latency = raw::jetstream_latency(&s.nats.url(), samples).await?;
    let before = Readings::take(std::slice::from_ref(&pg_meter))?;
    let pg_time = raw::postgres_commits(&s.pg.url(), n, args.pg_connections as usize).await?;
    let pg_cpu = before.per_unit_since(std::slice::from_ref(&pg_meter), n)?[0];
    let js_rate = n as f64 / js_time.as_secs_f64();
    let pg_rate = n as f64 / pg_time.as_secs_f64();

    eprintln!("phase 2: {n} tasks from {} submitters", args.submitters);
    let mut stack = Stack::of_args(s, args, &[]).await?;
    let monitoring = if args.statements {
        Some(
            s.nats
                .monitoring_url()
                .context("nats-server names no monitoring port")?,
        )
    } else {
        None
    };
    let mut plain = pass(s, &mut stack, events, args, "plain", monitoring.as_deref()).await?;
    if args.statements {
        println!(
            "{}",
            statements::report(&s.pg.url_for("taskwire"), n).await?
        );
    }
    loads.push((
        "after the throughput pass".to_owned(),
        report::load_average(),
    ));
    let paced = if args.paced_secs > 0 {
        anyhow::ensure!(
            args.paced_share.is_finite() && args.paced_share > 0.0,
            "--paced-share must be a share above 0 (0.8 is 80 %), not {}",
            args.paced_share
        );
        let rate = args.paced_share * n as f64 / plain.batch.elapsed.as_secs_f64();
        eprintln!(
            "phase 2b: {rate:.0} tasks/s for {} s ({:.0} % of that throughput)",
            args.paced_secs,
            args.paced_share * 100.0
        );
        // With `--stages`, where a task's time goes at this load too.
        let sampler = match args.stages {
            true => Some(stages::Sampler::start(&s.nats.url(), &s.pg.url_for("taskwire")).await?),
            false => None,
        };
        let submit_to_result = events
            .paced(
                &stack.clients,
                "paced",
                rate,
                Duration::from_secs(args.paced_secs),
            )
            .await?;
        if let Some(sampler) = sampler {
            let backlogs = sampler.stop().await?;
            println!(
                "At the sustained load: {}",
                stages::report(&backlogs, rate, stages::mean(&submit_to_result), None)
            );
        }
        Some(figures::Paced {
            rate,
            share: args.paced_share,
            secs: args.paced_secs,
            submit_to_result,
        })
    } else {
        None
    };

    eprintln!("phase 3: {samples} tasks one at a time");
    let mut one = Vec::with_capacity(samples);
    for _ in 0..samples {
        one.extend(
            events
                .batch(stack.one(), "single", 1, 1)
                .await?
                .submit_to_result,
        );
    }
    let mut watched = load::watch_latency(&stack.clients[0], samples).await?;
    stack.stop();
    if args.stages {
        println!("{}", stages(s, events, args).await?);
    }

    let collector = Collector::start().await?;
    let protocol = args.trace_protocol.name();
    let endpoint = match args.trace_protocol {
        TraceProtocol::Grpc => collector.endpoint(),
        TraceProtocol::HttpProtobuf => collector.http_endpoint(),
    };
    let mut otel = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
    ];
    otel.extend(args.trace_env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    // Rounds of a pass without export and one with it, each on fresh processes, one
    // after the other: a drift of the machine's load falls on both alike.
    let mut trace_rounds = Vec::new();
    let mut last = None;
    let trace_rate = equal_load(args, n, plain.batch.elapsed)?;
    for round in 1..=args.trace_rounds {
        eprintln!(
            "phase 4, round {round}/{}: {n} tasks without trace export, then with it",
            args.trace_rounds
        );
        // The last round's processes stay for the timeline; the others stop here.
        if let Some(previous) = last.take() {
            Stack::stop(previous);
        }
        let mut stack = Stack::of_args(s, args, &[]).await?;
        let without = pass(s, &mut stack, events, args, "unexported", None).await?;
        let paced_without = paced_pass(s, &mut stack, events, "unexported", trace_rate).await?;
        stack.stop();
        let spans_before = collector.span_count();
        let mut stack = Stack::of_args(s, args, &otel).await?;
        let with = pass(s, &mut stack, events, args, "exported", None).await?;
        let paced_with = paced_pass(s, &mut stack, events, "exported", trace_rate).await?;
        trace_rounds.push(figures::TraceRound {
            protocol,
            without,
            with,
            paced: paced_without
                .zip(paced_with)
                .map(|(without, with)| figures::PacedCpu {
                    rate: trace_rate,
                    without,
                    with,
                }),
            spans: collector.span_count().saturating_sub(spans_before),
        });
        last = Some(stack);
    }
    let stack = last.context("at least one trace-export round")?;
    let mut where_time_goes = None;
    if args.timeline {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        for _ in 0..samples {
            events.batch(stack.one(), "single", 1, 1).await?;
        }
        // The processes export every few seconds: wait for every task's spans.
        let until = Instant::now() + Duration::from_secs(20);
        let mut seen = timeline::tasks(&collector.spans(), since);
        while seen.len() < samples && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(250)).await;
            seen = timeline::tasks(&collector.spans(), since);
        }
        where_time_goes = Some(timeline::report(&seen));
    }
    stack.stop();

    let memory = if args.waiting_sessions > 0 {
        eprintln!(
            "phase 5: {} sessions waiting on the model",
            args.waiting_sessions
        );
        Some(waiting_sessions(s, events, args).await?)
    } else {
        None
    };
    loads.push(("at the end".to_owned(), report::load_average()));

    let setup = Setup {
        tasks: args.tasks,
        submitters: args.submitters,
        workers: args.workers,
        pg_connections: args.pg_connections,
    };
    let rows = figures::rows(
        &setup,
        &mut plain,
        trace_rounds,
        &mut one,
        &mut watched,
        Raw {
            js_rate,
            js_cpu,
            js_latency,
            pg_rate,
            pg_cpu,
        },
        memory,
        paced,
    );
    let mut notes = vec![format!(
        "Processes: {} worker(s) with `--concurrency {}`, logs at `warn`, no titles; the model answers at once; \
         nats-server with the file store and Postgres with `fsync=on`, both private to the run. \
         CPU is user+system time from `/proc/<pid>/stat` over the measured pass (Postgres: postmaster and backends), divided by its tasks.",
        args.workers, args.worker_concurrency
    )];
    if let Some(table) = where_time_goes {
        notes.push(format!(
            "\nWhere one task's time goes (`--timeline`: tasks one at a time with trace export on, \
             cut at the edges of their spans):\n\n{}",
            table.trim_end()
        ));
    }
    Ok(report::section(command, &loads, &rows, &notes))
}

/// Phase 6: the section of the real-task figures.
async fn real_tasks(
    s: &Servers,
    events: &Events,
    args: &Args,
    command: &str,
) -> anyhow::Result<String> {
    let mut loads = vec![("at the start".to_owned(), report::load_average())];
    let cache = args.repo_cache.clone().unwrap_or_else(repos::default_cache);
    let collector = Collector::start().await?;
    let setup = repo_runs::Setup {
        taskwire: &s.taskwire,
        nats_url: s.nats.url(),
        database_url: s.pg.url_for("taskwire"),
        model: &s.model,
        events,
        collector: &collector,
        runs: args.repo_runs as usize,
        at_once: args.repo_concurrency as usize,
        parent_writes: args.repo_parent_writes,
    };
    let mut figures = Vec::new();
    for repo in &args.repos {
        let prepared = repos::prepare(*repo, &cache).await?;
        eprintln!(
            "phase 6: real tasks in {} ({} files at {})",
            prepared.path.display(),
            prepared.files,
            prepared.commit
        );
        figures.push(repo_runs::measure(&setup, prepared).await?);
    }
    loads.push(("at the end".to_owned(), report::load_average()));
    Ok(repo_figures::section(
        command,
        &loads,
        &figures,
        setup.at_once,
    ))
}

/// The Postgres database taskwire uses, beside the raw phase's `postgres`.
async fn create_database(pg: &PrivatePostgres) -> anyhow::Result<()> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&pg.url()).await?;
    sqlx::query("CREATE DATABASE taskwire")
        .execute(&mut conn)
        .await?;
    Ok(())
}

async fn waiting_sessions(s: &Servers, events: &Events, args: &Args) -> anyhow::Result<Memory> {
    let sessions = args.waiting_sessions as usize;
    let mut stack = Stack::start(s, 1, 1, args.waiting_sessions, &[]).await?;
    events.batch(stack.one(), "memory warm-up", 50, 8).await?;
    let worker = Meter::Pids(vec![stack.workers[0].pid()]);
    let idle = worker.rss()?;
    let target = s.model.request_count() + sessions;
    let finished = events.finished_count();
    Events::submit_only(stack.one(), WAITING, sessions, args.submitters as usize).await?;
    let deadline =
        Instant::now() + Duration::from_secs(120) + Duration::from_millis(sessions as u64 * 10);
    while s.model.request_count() < target {
        stack.workers[0].check_running()?;
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {} of {sessions} sessions reached the model",
            sessions + s.model.request_count() - target
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Let the last requests' buffers settle before reading.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let waiting = worker.rss()?;
    s.gate.open();
    // A slow end is a finding of the run, not a reason to lose its figures.
    if let Err(e) = events
        .until_finished(finished + sessions, Duration::from_secs(60))
        .await
    {
        eprintln!("waiting sessions after the model answered: {e:#}");
    }
    stack.stop();
    Ok(Memory {
        idle,
        waiting,
        sessions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_env_pair_is_split_at_its_first_equals_sign_and_a_bare_word_is_refused() {
        assert_eq!(
            parse_env_pair("OTEL_TRACES_SAMPLER_ARG=a=b"),
            Ok(("OTEL_TRACES_SAMPLER_ARG".to_owned(), "a=b".to_owned()))
        );
        assert!(parse_env_pair("OTEL_TRACES_SAMPLER").is_err());
        assert!(parse_env_pair("=x").is_err());
        let args = Args::try_parse_from([
            "taskwire-bench",
            "--trace-env",
            "OTEL_TRACES_SAMPLER=always_off",
        ])
        .expect("parses");
        assert_eq!(
            args.trace_env,
            [("OTEL_TRACES_SAMPLER".to_owned(), "always_off".to_owned())]
        );
    }

    #[test]
    fn scaling_setups_are_read_as_coordinators_by_workers_and_a_bad_one_is_refused() {
        let args = Args::try_parse_from(["taskwire-bench", "--setups", "1x1,2x8"]).expect("parses");
        assert_eq!(args.setups, [(1, 1), (2, 8)]);
        for bad in ["1x0", "x2", "2", "1x1x1", "ax1"] {
            let err = parse_setup(bad).expect_err(bad);
            assert!(err.contains("COORDINATORSxWORKERS"), "{err}");
        }
        let default = Args::try_parse_from(["taskwire-bench"]).expect("parses");
        assert!(
            default.setups.is_empty(),
            "the default setups are scaling::SETUPS"
        );
    }

    #[test]
    fn the_equal_load_is_a_share_of_the_first_pass_and_a_bad_share_is_refused() {
        let args = Args::try_parse_from(["taskwire-bench"]).expect("parses");
        let rate = equal_load(&args, 3000, Duration::from_secs(2)).expect("valid");
        assert!((rate - 750.0).abs() < 1e-9, "half of 1500 tasks/s: {rate}");
        let off =
            Args::try_parse_from(["taskwire-bench", "--equal-load-share", "0"]).expect("parses");
        assert_eq!(
            equal_load(&off, 3000, Duration::from_secs(2)).ok(),
            Some(0.0)
        );
        let bad =
            Args::try_parse_from(["taskwire-bench", "--equal-load-share=-1"]).expect("parses");
        let err = equal_load(&bad, 3000, Duration::from_secs(2)).expect_err("refused");
        assert!(err.to_string().contains("--equal-load-share"), "{err}");
    }

    #[test]
    fn an_equal_load_rate_given_is_the_same_whatever_the_first_pass_did() {
        let args =
            Args::try_parse_from(["taskwire-bench", "--equal-load-rate", "900"]).expect("parses");
        for elapsed in [1, 2, 7] {
            let rate = equal_load(&args, 3000, Duration::from_secs(elapsed)).expect("valid");
            assert!((rate - 900.0).abs() < 1e-9, "{rate}");
        }
        let bad = Args::try_parse_from(["taskwire-bench", "--equal-load-rate=-5"]).expect("parses");
        let err = equal_load(&bad, 3000, Duration::from_secs(2)).expect_err("refused");
        assert!(err.to_string().contains("--equal-load-rate"), "{err}");
        assert!(
            Args::try_parse_from([
                "taskwire-bench",
                "--equal-load-rate",
                "900",
                "--equal-load-share",
                "0.5"
            ])
            .is_err(),
            "a rate and a share are not both given"
        );
    }

    #[test]
    fn trace_export_is_measured_over_the_default_protocol_unless_grpc_is_named() {
        let default = Args::try_parse_from(["taskwire-bench"]).expect("parses");
        assert_eq!(default.trace_protocol.name(), "http/protobuf");
        for (given, expected) in [("grpc", "grpc"), ("http/protobuf", "http/protobuf")] {
            let args = Args::try_parse_from(["taskwire-bench", "--trace-protocol", given])
                .expect("parses");
            assert_eq!(args.trace_protocol.name(), expected);
        }
        assert!(Args::try_parse_from(["taskwire-bench", "--trace-protocol", "http/json"]).is_err());
    }
}
