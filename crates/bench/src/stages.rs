//! Where a task's time goes under load, stage by stage, and what each stage does alone
//! (`--stages`).
//!
//! [`Sampler`] reads, every [`EVERY`] during the throughput pass, how many tasks each
//! stage holds: submits sent and not yet answered (the callers' own count), dispatches
//! committed and not yet published (the outbox's rows), task messages published and not
//! yet delivered to a worker (the workers' consumer's pending count), delivered and not
//! yet acknowledged (claimed, running and reporting: its ack-pending count), and results
//! published and not yet recorded (the aggregator consumer's pending and ack-pending
//! counts). By Little's law, a stage's mean backlog over the pass divided by the pass's
//! throughput is the mean time a task spends in it, so the stages' times add up to
//! about the mean submit→result; the stage that holds the most is where the fleet is
//! bound.
//!
//! Alone: [`submit_alone`] submits with no worker running, so only the coordinators'
//! submit and relay stages work (submits answered per second, dispatches published per
//! second); [`drain_alone`] then starts the workers on that backlog, so only claims,
//! sessions and results work (results recorded per second). Then, with the workers
//! stopped, [`claims_and_results_alone`] takes a new backlog through the two
//! coordinator stages a worker calls on, with the benchmark in the workers' place: it
//! claims every task (claim batches as workers send them) and then publishes every
//! task's result at once, so each of the two is timed with nothing else running.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use async_nats::jetstream;
use taskwire_bus::Subjects;
use taskwire_bus::subjects::RESULTS_CONSUMER;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use futures::{StreamExt as _, TryStreamExt as _};
use taskwire_bus::messages::{Claim, ClaimRequest, ClaimVerdict};
use taskwire_bus::{Bus, NatsOptions};
use taskwire_protocol::{TaskId, TaskResult, WorkerId, pb};

use crate::cluster::Client;
use crate::load::{Events, patience};

/// How often the backlogs are read.
const EVERY: Duration = Duration::from_millis(25);

/// The workers' queue the benchmark's workers pull from.
const QUEUE: &str = "default";

/// Submits sent and not yet answered, counted by the benchmark's callers.
pub static SUBMITS_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Mean number of tasks in each stage over the samples taken.
#[derive(Debug, Default, Clone, Copy)]
pub struct Backlogs {
    pub submitting: f64,
    pub outbox: f64,
    pub queued: f64,
    /// Delivered to a worker and not yet acknowledged.
    pub delivered: f64,
    /// Running in the store: claimed, result not yet recorded.
    pub running: f64,
    pub results: f64,
    pub samples: usize,
}

impl Backlogs {
    /// Delivered and not yet claimed: what is delivered and not running in the store,
    /// less the results being published (delivered, running and published at once).
    fn claiming(&self) -> f64 {
        (self.delivered - (self.running - self.results)).max(0.0)
    }

    /// In a session or publishing its result: running in the store, result not yet
    /// published.
    fn in_session(&self) -> f64 {
        (self.running - self.results).max(0.0)
    }
}

/// Samples the stages' backlogs until stopped.
pub struct Sampler {
    stop: CancellationToken,
    task: JoinHandle<anyhow::Result<Backlogs>>,
}

/// What one reading sees: the stage counts, in [`Backlogs`]'s order.
async fn read(
    js: &jetstream::Context,
    subjects: &Subjects,
    pool: &sqlx::PgPool,
) -> anyhow::Result<[u64; 6]> {
    let submitting = SUBMITS_IN_FLIGHT.load(Ordering::Relaxed) as u64;
    // One round trip for both store counts.
    let (outbox, running): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM outbox), \
                (SELECT count(*) FROM tasks WHERE finished_at IS NULL AND status = 'running')",
    )
    .fetch_one(pool)
    .await
    .context("count the outbox and the running tasks")?;
    let tasks = consumer_info(
        js,
        &subjects.tasks_stream(),
        &subjects.workers_consumer(QUEUE),
    )
    .await?;
    let results = consumer_info(js, &subjects.results_stream(), RESULTS_CONSUMER).await?;
    Ok([
        submitting,
        u64::try_from(outbox).unwrap_or_default(),
        tasks.num_pending,
        tasks.num_ack_pending as u64,
        u64::try_from(running).unwrap_or_default(),
        results.num_pending + results.num_ack_pending as u64,
    ])
}

/// The info of the durable consumer `consumer` on `stream`.
async fn consumer_info(
    js: &jetstream::Context,
    stream: &str,
    consumer: &str,
) -> anyhow::Result<jetstream::consumer::Info> {
    js.get_stream_no_info(stream)
        .await
        .with_context(|| format!("the stream {stream}"))?
        .consumer_info(consumer)
        .await
        .with_context(|| format!("the consumer {consumer} of {stream}"))
}

impl Sampler {
    /// Starts reading the backlogs on `nats_url` and the taskwire database at `pg_url`.
    pub async fn start(nats_url: &str, pg_url: &str) -> anyhow::Result<Self> {
        let js = jetstream::new(async_nats::connect(nats_url).await?);
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(pg_url)
            .await
            .context("connect to the taskwire database")?;
        let subjects = Subjects::default();
        // One reading before the pass: a missing consumer fails here, not mid-pass.
        read(&js, &subjects, &pool).await?;
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let mut sums = [0u64; 6];
            let mut samples = 0usize;
            let mut tick = tokio::time::interval(EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stopped.cancelled() => break,
                    _ = tick.tick() => {}
                }
                let counts = read(&js, &subjects, &pool).await?;
                for (sum, count) in sums.iter_mut().zip(counts) {
                    *sum += count;
                }
                samples += 1;
            }
            let mean = |i: usize| sums[i] as f64 / samples.max(1) as f64;
            Ok(Backlogs {
                submitting: mean(0),
                outbox: mean(1),
                queued: mean(2),
                delivered: mean(3),
                running: mean(4),
                results: mean(5),
                samples,
            })
        });
        Ok(Self { stop, task })
    }

    /// The mean backlogs since the start.
    pub async fn stop(self) -> anyhow::Result<Backlogs> {
        self.stop.cancel();
        self.task.await.context("the sampler panicked")?
    }
}

/// What the stages did alone.
#[derive(Debug, Clone, Copy)]
pub struct Alone {
    /// Submits answered per second, no worker running.
    pub submits: f64,
    /// Dispatches published per second over the same time (until the last is queued).
    pub dispatches: f64,
    /// Results recorded per second once workers start on the backlog.
    pub results: f64,
    /// Claims granted per second, the benchmark claiming as workers do.
    pub claims: f64,
    /// Results recorded per second, the benchmark publishing them all at once.
    pub recorded: f64,
}

/// Claims in one of the benchmark's claim batches (a worker's batch holds what its
/// sessions asked for while its previous batch was answered).
pub const CLAIM_BATCH: usize = 64;

/// The benchmark's claim batches in flight at once (a worker keeps one in flight).
pub const CLAIMERS: usize = 4;

/// Results the benchmark has in flight at once while publishing.
const PUBLISHERS: usize = 256;

/// The claim and result stages alone, on the `n` tasks queued by [`submit_alone`] with
/// no worker running: every task claimed by the benchmark ([`CLAIMERS`] batches of
/// [`CLAIM_BATCH`] in flight, as that many workers would), then every result published
/// at once and recorded by the aggregators. Claims granted per second, and results
/// recorded per second from the first publish to the last finished notice. The tasks'
/// messages are then purged from the tasks stream, so that no later worker pulls them.
pub async fn claims_and_results_alone(
    nats_url: &str,
    pg_url: &str,
    events: &Events,
    n: usize,
) -> anyhow::Result<(f64, f64)> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(pg_url)
        .await
        .context("connect to the taskwire database")?;
    let queued: Vec<(uuid::Uuid, String)> = sqlx::query_as(
        "SELECT task_id, trace_id FROM tasks WHERE status = 'queued' AND finished_at IS NULL",
    )
    .fetch_all(&pool)
    .await
    .context("read the queued tasks")?;
    anyhow::ensure!(
        queued.len() == n,
        "{} tasks are queued where {n} were submitted",
        queued.len()
    );
    let bus = Bus::connect(
        nats_url,
        "taskwire-bench-claims",
        &NatsOptions::default(),
        Subjects::default(),
    )
    .await?;
    let worker = WorkerId::new("bench-claimer");

    let t0 = Instant::now();
    let granted: Vec<Vec<(&(uuid::Uuid, String), Claim)>> =
        futures::stream::iter(queued.chunks(CLAIM_BATCH))
            .map(|chunk| {
                let (bus, worker) = (&bus, &worker);
                async move {
                    let claims: Vec<ClaimRequest> = chunk
                        .iter()
                        .map(|(task, _)| ClaimRequest {
                            task: TaskId::from_uuid(*task),
                            worker: worker.clone(),
                            delivery: 1,
                        })
                        .collect();
                    let answers = bus
                        .claim_batch(&claims)
                        .await
                        .map_err(|e| anyhow::anyhow!("a claim batch was refused: {e}"))?
                        .context("no coordinator serves claim batches")?;
                    chunk
                        .iter()
                        .zip(answers)
                        .map(|(queued, answer)| match answer {
                            Ok(ClaimVerdict::Granted(claim)) => Ok((queued, claim)),
                            other => anyhow::bail!("task {} was not granted: {other:?}", queued.0),
                        })
                        .collect::<anyhow::Result<Vec<_>>>()
                }
            })
            .buffer_unordered(CLAIMERS)
            .try_collect()
            .await?;
    let claims = n as f64 / t0.elapsed().as_secs_f64();

    let before = events.finished_count();
    let t0 = Instant::now();
    futures::stream::iter(granted.into_iter().flatten())
        .map(|((task, trace), claim)| {
            let bus = &bus;
            async move {
                // Read as a worker's result is: through its wire form.
                let result = TaskResult::try_from(pb::TaskResult {
                    task_id: task.to_string(),
                    trace_id: trace.clone(),
                    attempt: claim.attempt,
                    claim_epoch: claim.epoch.0,
                    status: pb::TaskStatus::Completed as i32,
                    ..Default::default()
                })?;
                anyhow::Ok(bus.publish_result(&result).await?)
            }
        })
        .buffer_unordered(PUBLISHERS)
        .try_collect::<()>()
        .await
        .context("publish a result")?;
    events.until_finished(before + n, patience(n)).await?;
    let recorded = n as f64 / t0.elapsed().as_secs_f64();

    // The claimed tasks' messages were never pulled: no worker is to see them.
    let js = jetstream::new(async_nats::connect(nats_url).await?);
    js.get_stream_no_info(Subjects::default().tasks_stream())
        .await
        .context("the tasks stream")?
        .purge()
        .await
        .context("purge the tasks stream")?;
    Ok((claims, recorded))
}

/// Submits `n` tasks from `submitters` callers while no worker runs; the submit and
/// dispatch rates. The tasks stay queued for [`drain_alone`].
pub async fn submit_alone(
    nats_url: &str,
    clients: &[Client],
    n: usize,
    submitters: usize,
) -> anyhow::Result<(f64, f64)> {
    let js = jetstream::new(async_nats::connect(nats_url).await?);
    let subjects = Subjects::default();
    let (stream, workers) = (subjects.tasks_stream(), subjects.workers_consumer(QUEUE));
    // The workers' consumer was made by the earlier passes' workers.
    let pending = || async { anyhow::Ok(consumer_info(&js, &stream, &workers).await?.num_pending) };
    let queued_before = pending().await?;
    let t0 = Instant::now();
    Events::submit_only(clients, "stage submit", n, submitters).await?;
    let submitted = t0.elapsed();
    let patience = Instant::now() + Duration::from_secs(60);
    loop {
        let queued = pending().await?;
        if queued >= queued_before + n as u64 {
            break;
        }
        anyhow::ensure!(
            Instant::now() < patience,
            "only {} of {n} dispatches were published within 60 s",
            queued.saturating_sub(queued_before)
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let dispatched = t0.elapsed();
    Ok((
        n as f64 / submitted.as_secs_f64(),
        n as f64 / dispatched.as_secs_f64(),
    ))
}

/// Waits for the `n` tasks queued by [`submit_alone`] to finish once workers run
/// (`before`: the tasks finished until then); results recorded per second, from the
/// first result to the last.
pub async fn drain_alone(events: &Events, before: usize, n: usize) -> anyhow::Result<f64> {
    events
        .until_finished(before + 1, Duration::from_secs(60))
        .await?;
    let first = Instant::now();
    events
        .until_finished(
            before + n,
            Duration::from_secs(60) + Duration::from_millis(n as u64 * 10),
        )
        .await?;
    Ok((n.saturating_sub(1)) as f64 / first.elapsed().as_secs_f64())
}

/// The section printed by `--stages`: each stage's mean backlog and time under load,
/// and what the stages did alone.
pub fn report(
    backlogs: &Backlogs,
    throughput: f64,
    mean_submit_to_result: Duration,
    alone: Option<Alone>,
) -> String {
    let ms = |tasks: f64| tasks / throughput * 1e3;
    let rows = [
        ("`Submit` sent, not yet answered", backlogs.submitting),
        (
            "committed, not yet published (the outbox, the relay)",
            backlogs.outbox,
        ),
        (
            "published, not yet delivered (the tasks stream)",
            backlogs.queued,
        ),
        (
            "delivered, not yet claimed (the claim)",
            backlogs.claiming(),
        ),
        (
            "claimed, result not yet published (the session)",
            backlogs.in_session(),
        ),
        (
            "results published, not yet recorded (the aggregator)",
            backlogs.results,
        ),
    ];
    let mut out = format!(
        "Where a task's time goes under load ({throughput:.0} tasks/s; {} samples, every {} ms; \
         mean submit→result {:.1} ms)\n\n| stage | mean tasks in it | mean time in it (Little's law) |\n|---|---:|---:|\n",
        backlogs.samples,
        EVERY.as_millis(),
        mean_submit_to_result.as_secs_f64() * 1e3,
    );
    let mut total = 0.0;
    for (stage, tasks) in rows {
        total += ms(tasks);
        out.push_str(&format!("| {stage} | {tasks:.1} | {:.1} ms |\n", ms(tasks)));
    }
    out.push_str(&format!("| all stages | | {total:.1} ms |\n"));
    if let Some(a) = alone {
        out.push_str(&format!(
            "\nAlone: submits answered {:.0}/s and dispatches published {:.0}/s with no worker \
             running; results recorded {:.0}/s once workers start on that backlog \
             (the throughput pass: {throughput:.0} tasks/s). With the workers stopped and the \
             benchmark in their place: claims granted {:.0}/s ({CLAIMERS} batches of \
             {CLAIM_BATCH} in flight), results recorded {:.0}/s (all published at once).\n",
            a.submits, a.dispatches, a.results, a.claims, a.recorded
        ));
    }
    out
}

/// The mean of `samples`.
pub fn mean(samples: &[Duration]) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.iter().sum::<Duration>() / u32::try_from(samples.len()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stages_time_is_its_mean_backlog_over_the_throughput() {
        let backlogs = Backlogs {
            submitting: 50.0,
            outbox: 10.0,
            queued: 2.0,
            delivered: 30.0,
            // 5 of the 25 running have published their result: 20 are in a session.
            running: 25.0,
            results: 5.0,
            samples: 100,
        };
        assert_eq!(backlogs.in_session(), 20.0);
        assert_eq!(
            backlogs.claiming(),
            10.0,
            "delivered, less those in a session"
        );
        let report = report(&backlogs, 1000.0, Duration::from_millis(90), None);
        assert!(
            report.contains("| delivered, not yet claimed (the claim) | 10.0 | 10.0 ms |"),
            "{report}"
        );
        assert!(report.contains("| all stages | | 97.0 ms |"), "{report}");
    }

    #[test]
    fn a_backlog_read_below_its_parts_counts_no_negative_stage() {
        let backlogs = Backlogs {
            delivered: 3.0,
            running: 10.0,
            results: 1.0,
            ..Backlogs::default()
        };
        assert_eq!(backlogs.claiming(), 0.0);
        assert_eq!(backlogs.in_session(), 9.0);
    }
}
