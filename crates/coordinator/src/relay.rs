//! The outbox relay: publishes committed dispatch messages to JetStream.
//!
//! Each coordinator's relay publishes the dispatches of the submits its own coordinator
//! wrote: the submit batcher hands them over from memory once committed ([`Handoff`]),
//! and the relay publishes them and deletes their rows by id. The relays thus divide
//! the work by writer (each task is written by one coordinator), with no scan and no
//! lock between them. Rows nobody is publishing — written by another path (a replay, a
//! schedule's fire, a delayed start; those wake the relay), or left by a coordinator
//! that died or whose publish failed, `OWN_GRACE` after they were written — are found
//! by a scan every `POLL`, each batch locked (`FOR UPDATE SKIP LOCKED`) in the
//! transaction that deletes what JetStream acknowledged, so several relays' scans each
//! take rows the others are not. Either way a batch is published pipelined (all sends
//! first, then all acks) and only acknowledged rows are deleted. A row published twice
//! (a crash between publish and delete) carries the same `Nats-Msg-Id`, so JetStream
//! stores it once. When traces are exported, each dispatch is a producer span under its
//! submit's span. Failure policy: log, back off, retry forever.
//!
//! With a dispatch window (`--dispatch-window N`), the relay keeps at most N tasks in
//! the tasks stream that no worker has taken yet: every dispatch waits in the outbox,
//! from where each batch is taken in priority order with the tenants of a priority
//! taking turns (see `Store::relay_outbox`), so the submit batcher only wakes the
//! relay's scan. Without one, every dispatch is published at once and the stream serves
//! them first in, first out.

use backon::BackoffBuilder as _;
use std::sync::Arc;
use std::time::Duration;

use prost::Message as _;
use taskwire_bus::Bus;
use taskwire_store::Store;
use taskwire_store::outbox::OutboxMessage;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

const POLL: Duration = Duration::from_millis(250);
/// How long after its commit a row its writer is publishing itself is left to it: then
/// any relay's scan takes it (the writer died, or its publish failed).
pub const OWN_GRACE: Duration = Duration::from_secs(2);
/// Committed batches waiting for the relay; a submit batch waits for room, so a relay
/// that cannot keep up slows the submits instead of holding more in memory.
const HANDOFF_BATCHES: usize = 64;

const BATCH: i64 = 1024;
/// How soon a relay whose window is full looks again.
const WINDOW_POLL: Duration = Duration::from_millis(20);

/// How the submit batcher hands its committed dispatches to the relay.
#[derive(Clone)]
pub enum Handoff {
    /// The rows themselves, to publish from memory (no dispatch window); other relays'
    /// scans leave them alone for `grace`.
    Own {
        rows: mpsc::Sender<Vec<OutboxMessage>>,
        grace: Duration,
    },
    /// A wake-up for the relay's scan (a dispatch window orders what is published).
    Scan(Arc<Notify>),
}

impl Handoff {
    /// A handoff for a relay with a dispatch window (`window`) or none, and the
    /// relay's end of it.
    pub fn new(
        window: bool,
        wake: Arc<Notify>,
        grace: Duration,
    ) -> (Self, Option<mpsc::Receiver<Vec<OutboxMessage>>>) {
        if window {
            return (Self::Scan(wake), None);
        }
        let (rows, rx) = mpsc::channel(HANDOFF_BATCHES);
        (Self::Own { rows, grace }, Some(rx))
    }

    /// Hands over a committed batch's rows (`None` or empty: there is nothing to
    /// publish from memory, so the scan is woken instead).
    pub async fn hand(&self, rows: Option<Vec<OutboxMessage>>) {
        match (self, rows) {
            (Self::Own { rows: tx, .. }, Some(rows)) if !rows.is_empty() => {
                // A relay that stopped (shutdown) leaves them to a scan after the grace.
                let _ = tx.send(rows).await;
            }
            (Self::Own { .. }, _) => {}
            (Self::Scan(wake), _) => wake.notify_one(),
        }
    }
}

/// The dispatch window: at most `size` undelivered tasks in the stream.
#[derive(Clone)]
pub struct Window {
    pub size: u64,
    pub undelivered: crate::backpressure::Undelivered,
}

/// Room left in a window: its size less the undelivered tasks last sampled and what
/// this relay published after that sample started (a publish the sample may not have
/// seen is counted; one it saw is not counted twice).
struct Room {
    window: Window,
    /// When each recent batch was published, and how many it held.
    published: std::collections::VecDeque<(tokio::time::Instant, u64)>,
}

impl Room {
    fn left(&mut self) -> i64 {
        let Some((count, sampled)) = self.window.undelivered.get() else {
            return 0; // not sampled yet
        };
        while self.published.front().is_some_and(|(at, _)| *at < sampled) {
            self.published.pop_front();
        }
        let since: u64 = self.published.iter().map(|(_, n)| n).sum();
        let used = count.saturating_add(since);
        i64::try_from(self.window.size.saturating_sub(used)).unwrap_or(i64::MAX)
    }

    fn published(&mut self, n: u64) {
        self.published.push_back((tokio::time::Instant::now(), n));
    }
}

/// After a failed relay: 50 ms, doubling up to 5 s, until one succeeds.
const RETRY_MAX: Duration = Duration::from_secs(5);
const RETRY: backon::ExponentialBuilder = backon::ExponentialBuilder::new()
    .with_min_delay(Duration::from_millis(50))
    .with_max_delay(RETRY_MAX)
    .with_factor(2.0)
    .without_max_times();

/// Runs the relay until `shutdown`: `own` brings the rows this coordinator's submits
/// wrote (none with a dispatch window); `wake`, a reason to scan.
pub async fn run(
    store: Store,
    bus: Bus,
    wake: Arc<Notify>,
    mut own: Option<mpsc::Receiver<Vec<OutboxMessage>>>,
    window: Option<Window>,
    shutdown: CancellationToken,
) {
    let mut backoff = RETRY.build();
    let mut room = window.map(|window| Room {
        window,
        published: std::collections::VecDeque::new(),
    });
    // A scan every `POLL` however busy the own rows keep the relay.
    let mut poll = tokio::time::interval(POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let limit = room.as_mut().map_or(BATCH, |r| r.left().min(BATCH));
        if limit <= 0 {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(WINDOW_POLL) => {}
            }
            continue;
        }
        match relay_once(&store, &bus, limit).await {
            Ok(n) => {
                backoff = RETRY.build();
                if let Some(room) = room.as_mut() {
                    room.published(n as u64);
                }
                if n as i64 == limit {
                    continue; // more may be waiting
                }
            }
            Err(e) => {
                let delay = backoff.next().unwrap_or(RETRY_MAX);
                tracing::warn!(error = %e, backoff_ms = delay.as_millis() as u64, "outbox relay failed, retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
                continue;
            }
        }
        // Publish own rows as they come, until a scan is due.
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = wake.notified() => break,
                _ = poll.tick() => break,
                Some(rows) = recv(&mut own) => publish_own(&store, &bus, rows, &mut own).await,
            }
        }
    }
}

/// The next batch of own rows; pending forever without a channel (or once it closed).
async fn recv(own: &mut Option<mpsc::Receiver<Vec<OutboxMessage>>>) -> Option<Vec<OutboxMessage>> {
    match own {
        Some(rx) => match rx.recv().await {
            Some(rows) => Some(rows),
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// Publishes `rows` and whatever else was handed over meanwhile, then deletes the rows
/// JetStream acknowledged. A failure leaves the rest to a scan after `OWN_GRACE`.
async fn publish_own(
    store: &Store,
    bus: &Bus,
    mut rows: Vec<OutboxMessage>,
    own: &mut Option<mpsc::Receiver<Vec<OutboxMessage>>>,
) {
    if let Some(rx) = own.as_mut() {
        while rows.len() < BATCH as usize {
            match rx.try_recv() {
                Ok(more) => rows.extend(more),
                Err(_) => break,
            }
        }
    }
    let mut failure = None;
    let done = publish(bus, rows, &mut failure).await;
    if let Some(e) = failure {
        tracing::warn!(error = %e, grace_ms = OWN_GRACE.as_millis() as u64, "publishing own dispatches failed, the outbox scan takes the rest");
    }
    if let Err(e) = store.outbox_delete(&done).await {
        // Published but not deleted: a scan publishes them again after the grace, and
        // JetStream stores each once (same `Nats-Msg-Id`).
        tracing::warn!(error = %e, rows = done.len(), "deleting published outbox rows failed");
    }
}

/// Publishes one batch of at most `limit`; returns how many rows it read.
async fn relay_once(store: &Store, bus: &Bus, limit: i64) -> Result<usize, String> {
    let mut failure = None;
    let read = store
        .relay_outbox(limit, |rows| publish(bus, rows, &mut failure))
        .await
        .map_err(|e| e.to_string())?;
    match failure {
        Some(e) => Err(e),
        None => Ok(read),
    }
}

/// The one field of a stored `TaskRequest` the relay reads, for the dispatch's span:
/// decoding it skips every other field (the prompt, the agent's spec), where decoding
/// the whole request would copy them all.
#[derive(Clone, PartialEq, prost::Message)]
struct StoredTraceparent {
    /// `TaskRequest.traceparent`.
    #[prost(string, tag = "33")]
    traceparent: String,
}

/// Publishes `rows` pipelined (all sends, then all acks); returns the ids JetStream
/// acknowledged, and leaves in `failure` why the others were not.
async fn publish(bus: &Bus, rows: Vec<OutboxMessage>, failure: &mut Option<String>) -> Vec<i64> {
    let total = rows.len();
    let mut pending = Vec::with_capacity(total);
    for row in rows {
        // Exported traces get a producer span per dispatch, under the submit's span;
        // the dispatch's `traceparent` header names it.
        let span = taskwire_traces::exporting().then(|| {
            let parent = StoredTraceparent::decode(row.payload.as_slice())
                .map(|r| r.traceparent)
                .unwrap_or_default();
            crate::spans::publish(&row.subject, &row.msg_id, &parent, &row.trace_id)
        });
        let sent = bus.send_dispatch(
            row.subject.clone(),
            row.payload.into(),
            &row.msg_id,
            &row.trace_id,
        );
        let sent = match span {
            Some(span) => span.instrument(sent).await,
            None => sent.await,
        };
        match sent {
            Ok(ack) => pending.push((row.id, ack)),
            Err(e) => {
                tracing::warn!(error = %e, subject = %row.subject, "failed to publish outbox row");
                failure.get_or_insert_with(|| e.to_string());
                break;
            }
        }
    }
    // Awaited together: acks lost to a reconnect cost one timeout, not one each.
    let (ids, acks): (Vec<i64>, Vec<_>) = pending.into_iter().unzip();
    let acks = futures::future::join_all(acks.into_iter().map(|a| a.into_future())).await;
    let mut done = Vec::with_capacity(ids.len());
    for (id, ack) in ids.into_iter().zip(acks) {
        match ack {
            Ok(_) => done.push(id),
            Err(e) => {
                failure.get_or_insert_with(|| e.to_string());
            }
        }
    }
    if let Some(e) = failure.as_mut()
        && done.len() < total
    {
        *e = format!(
            "jetstream refused {} of {total} messages: {e}",
            total - done.len()
        );
    }
    done
}

#[cfg(test)]
mod tests;
