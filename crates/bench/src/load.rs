//! Load on a coordinator through its gRPC API, timed as a client sees it.
//!
//! [`Events`] listens on NATS for two things per task: its first `TaskProgress` (the
//! worker has claimed it and started its session: "submit→start") and the
//! coordinator's finished notice (its result is recorded: "submit→result"). Only
//! their arrival time is kept, so the listener costs little of the figures it takes.
//! [`Events::batch`] submits tasks from concurrent callers; [`watch_latency`] is
//! `taskwire submit --wait`: `Submit`, then `Watch` until the result.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use taskwire_bus::messages::TaskNotice;
use taskwire_bus::{Bus, NatsOptions, Subjects};
use taskwire_protocol::pb;

use crate::cluster::Client;

/// What a batch of tasks measured.
#[derive(Debug)]
pub struct Batch {
    /// From the first submit to the last recorded result.
    pub elapsed: Duration,
    pub submit_to_start: Vec<Duration>,
    pub submit_to_result: Vec<Duration>,
    /// The id of one task of the batch.
    pub some_task: String,
}

#[derive(Default)]
struct Seen {
    started: HashMap<String, Instant>,
    finished: HashMap<String, Instant>,
}

/// Arrival times of tasks' first progress and finished notices.
pub struct Events {
    seen: Arc<Mutex<Seen>>,
    finished: tokio::sync::watch::Receiver<usize>,
}

impl Events {
    /// Subscribes to the progress and finished subjects of the `taskwire` prefix.
    pub async fn listen(nats_url: &str) -> anyhow::Result<Self> {
        let bus = Bus::connect(
            nats_url,
            "taskwire-bench-events",
            &NatsOptions::default(),
            Subjects::default(),
        )
        .await?;
        // Progress is read as a notice: only its task, from the subject; the payload
        // is not decoded.
        let mut progress = bus
            .subscribe::<TaskNotice>(bus.subjects().progress_all())
            .await?;
        let mut finished = bus.all_finished_notices().await?;
        bus.flush().await?;
        let seen: Arc<Mutex<Seen>> = Arc::default();
        let (count, count_rx) = tokio::sync::watch::channel(0);
        let record = seen.clone();
        tokio::spawn(async move {
            // Keeps the connection while the subscriptions are read.
            let _bus = bus;
            loop {
                tokio::select! {
                    Some(notice) = progress.next() => {
                        let Ok(notice) = notice else { continue };
                        let mut seen = record.lock().unwrap_or_else(PoisonError::into_inner);
                        seen.started.entry(notice.task.to_string()).or_insert_with(Instant::now);
                    }
                    Some(notice) = finished.next() => {
                        let Ok(notice) = notice else { continue };
                        let now = Instant::now();
                        let mut seen = record.lock().unwrap_or_else(PoisonError::into_inner);
                        if seen.finished.insert(notice.task.to_string(), now).is_none() {
                            let n = seen.finished.len();
                            count.send_replace(n);
                        }
                    }
                    else => break,
                }
            }
        });
        Ok(Self {
            seen,
            finished: count_rx,
        })
    }

    /// How many tasks have finished since listening began.
    pub fn finished_count(&self) -> usize {
        *self.finished.borrow()
    }

    /// Waits for the finished notice of task `id`; when it arrived.
    pub async fn finished(&self, id: &str, patience: Duration) -> anyhow::Result<Instant> {
        let mut rx = self.finished.clone();
        let arrival = async {
            loop {
                // Marked seen before the look, so a notice after it wakes the wait.
                rx.borrow_and_update();
                let arrived = {
                    let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
                    seen.finished.get(id).copied()
                };
                if let Some(at) = arrived {
                    return Ok(at);
                }
                rx.changed().await.context("the event listener stopped")?;
            }
        };
        tokio::time::timeout(patience, arrival)
            .await
            .with_context(|| format!("task {id} did not finish within {patience:?}"))?
    }

    /// Waits until `target` tasks have finished since listening began.
    pub async fn until_finished(&self, target: usize, patience: Duration) -> anyhow::Result<()> {
        let mut rx = self.finished.clone();
        tokio::time::timeout(patience, rx.wait_for(|n| *n >= target))
            .await
            .with_context(|| {
                format!(
                    "only {} of {target} tasks finished within {patience:?}",
                    self.finished_count()
                )
            })?
            .context("the event listener stopped")?;
        Ok(())
    }

    /// Submits `n` tasks whose prompts start with `prompt`, from `submitters`
    /// concurrent callers, and waits for all their results.
    pub async fn batch(
        &self,
        client: &[Client],
        prompt: &str,
        n: usize,
        submitters: usize,
    ) -> anyhow::Result<Batch> {
        let target = self.finished_count() + n;
        let submitted: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let t0 = Instant::now();
        let errors = submit_all(client, prompt, n, submitters, &submitted).await;
        if let Some(e) = errors {
            bail!("a submit failed: {e}");
        }
        self.until_finished(target, patience(n)).await?;
        let submitted = submitted.lock().unwrap_or_else(PoisonError::into_inner);
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let mut batch = Batch {
            elapsed: Duration::ZERO,
            submit_to_start: Vec::with_capacity(n),
            submit_to_result: Vec::with_capacity(n),
            some_task: submitted.keys().next().cloned().unwrap_or_default(),
        };
        for (id, at) in submitted.iter() {
            let end = seen
                .finished
                .get(id)
                .with_context(|| format!("task {id} has no finished notice"))?;
            batch.elapsed = batch.elapsed.max(*end - t0);
            batch.submit_to_result.push(*end - *at);
            if let Some(start) = seen.started.get(id) {
                batch
                    .submit_to_start
                    .push(start.saturating_duration_since(*at));
            }
        }
        Ok(batch)
    }

    /// Submits tasks at `rate` per second for `duration`, open loop (each submit is
    /// sent on its schedule whether or not the earlier ones were answered, spread over
    /// the coordinators), then waits for all their results; each task's
    /// submit→result.
    pub async fn paced(
        &self,
        clients: &[Client],
        prompt: &str,
        rate: f64,
        duration: Duration,
    ) -> anyhow::Result<Vec<Duration>> {
        let n = (rate * duration.as_secs_f64()).round().max(1.0) as usize;
        let target = self.finished_count() + n;
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(1.0)));
        // Late ticks are sent at once: the load keeps its rate, as clients would.
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut sent = tokio::task::JoinSet::new();
        for i in 0..n {
            tick.tick().await;
            let mut client = clients[i % clients.len()].clone();
            let prompt = format!("{prompt} {i}");
            sent.spawn(async move {
                let at = Instant::now();
                let in_flight = &crate::stages::SUBMITS_IN_FLIGHT;
                in_flight.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let answer = client.submit(request(prompt)).await;
                in_flight.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                answer.map(|r| (r.into_inner().task_id, at))
            });
        }
        let mut submitted = Vec::with_capacity(n);
        while let Some(joined) = sent.join_next().await {
            submitted.push(
                joined
                    .context("a submitter panicked")?
                    .context("a submit failed")?,
            );
        }
        self.until_finished(target, patience(n)).await?;
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        submitted
            .into_iter()
            .map(|(id, at)| {
                let end = seen
                    .finished
                    .get(&id)
                    .with_context(|| format!("task {id} has no finished notice"))?;
                Ok(end.saturating_duration_since(at))
            })
            .collect()
    }

    /// Submits `n` tasks without waiting for their results: for sessions that wait.
    pub async fn submit_only(
        client: &[Client],
        prompt: &str,
        n: usize,
        submitters: usize,
    ) -> anyhow::Result<()> {
        let submitted: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        match submit_all(client, prompt, n, submitters, &submitted).await {
            Some(e) => bail!("a submit failed: {e}"),
            None => Ok(()),
        }
    }
}

/// Generous time for `n` tasks to finish: a stuck run fails rather than hangs.
pub(crate) fn patience(n: usize) -> Duration {
    Duration::from_secs(60) + Duration::from_millis(n as u64 * 10)
}

/// Submits `n` tasks, the `i`th to `clients[i % clients.len()]`; the first error, if
/// any.
async fn submit_all(
    clients: &[Client],
    prompt: &str,
    n: usize,
    submitters: usize,
    submitted: &Arc<Mutex<HashMap<String, Instant>>>,
) -> Option<tonic::Status> {
    let errors: Arc<Mutex<Option<tonic::Status>>> = Arc::default();
    futures::stream::iter(0..n)
        .for_each_concurrent(submitters.max(1), |i| {
            // Spread over the coordinators, as a load balancer would.
            let mut client = clients[i % clients.len()].clone();
            let (submitted, errors) = (submitted.clone(), errors.clone());
            async move {
                let t = Instant::now();
                let in_flight = &crate::stages::SUBMITS_IN_FLIGHT;
                in_flight.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // Pushed back (the fleet is behind): retry, as a client should.
                let mut answer = client.submit(request(format!("{prompt} {i}"))).await;
                while matches!(&answer, Err(e) if e.code() == tonic::Code::ResourceExhausted) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    answer = client.submit(request(format!("{prompt} {i}"))).await;
                }
                in_flight.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                match answer {
                    Ok(r) => {
                        let id = r.into_inner().task_id;
                        let mut map = submitted.lock().unwrap_or_else(PoisonError::into_inner);
                        map.insert(id, t);
                    }
                    Err(e) => {
                        let mut first = errors.lock().unwrap_or_else(PoisonError::into_inner);
                        first.get_or_insert(e);
                    }
                }
            }
        })
        .await;
    errors.lock().unwrap_or_else(PoisonError::into_inner).take()
}

fn request(prompt: String) -> pb::SubmitRequest {
    pb::SubmitRequest {
        agent: "general".into(),
        prompt,
        ..Default::default()
    }
}

/// `n` tasks one at a time, each `Submit` followed by a `Watch` read until its
/// result, as `taskwire submit --wait` does; the latency of each.
pub async fn watch_latency(client: &Client, n: usize) -> anyhow::Result<Vec<Duration>> {
    use pb::watch_event::Event;
    let mut client = client.clone();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        let task_id = client
            .submit(request(format!("watched task {i}")))
            .await?
            .into_inner()
            .task_id;
        let mut stream = client
            .watch(pb::WatchRequest {
                task_id: task_id.clone(),
            })
            .await?
            .into_inner();
        loop {
            match stream.message().await? {
                Some(pb::WatchEvent {
                    event: Some(Event::Result(_)),
                    ..
                }) => break,
                Some(_) => {}
                None => bail!("the watch of task {task_id} ended before its result"),
            }
        }
        out.push(t.elapsed());
    }
    Ok(out)
}

/// The `q` quantile of `samples` (sorted here), in milliseconds.
pub fn quantile_ms(samples: &mut [Duration], q: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_unstable();
    let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
    samples[i].as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_pick_the_nearest_rank() {
        let mut s: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        assert_eq!(quantile_ms(&mut s, 0.5), 51.0);
        assert_eq!(quantile_ms(&mut s, 0.99), 99.0);
        assert_eq!(quantile_ms(&mut [], 0.5), 0.0);
    }
}
