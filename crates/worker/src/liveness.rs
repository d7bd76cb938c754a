//! The worker's liveness signal: an in-progress ack for every task message it holds,
//! sent from a thread of its own over a NATS connection of its own.
//!
//! JetStream offers a task message to another worker once `ack_wait` passes without
//! word from the worker holding it, so `ack_wait` is how long a dead worker's tasks
//! wait (default 6 s). The word must come on time whatever the worker is doing: a
//! session stuck in a long poll, a runtime whose threads are all busy, a machine whose
//! CPUs are saturated. So it does not come from the sessions. One thread, with a
//! single-threaded runtime and a connection that carries nothing else, beats for every
//! held message every `ack_wait / 4` and does nothing else: three beats in a row may be
//! lost or late before a live session's task is offered elsewhere.
//!
//! A message is held from the moment it is pulled until it is settled ([`Held`] is
//! dropped after the ack, nak or term).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use taskwire_bus::consumer::AckSubject;
use taskwire_bus::{Bus, Delivery, Settlement, Subjects};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::WorkerError;

/// Longest the thread waits, when it stops, for its last beats to reach NATS.
const FLUSH_ON_STOP: Duration = Duration::from_secs(2);

/// How often the held messages are beaten for, given the consumer's ack wait.
pub fn beat_period(ack_wait: Duration) -> Duration {
    ack_wait / 4
}

type Registry = Arc<Mutex<HashMap<u64, AckSubject>>>;

/// The beating thread and the messages it beats for.
pub struct Liveness {
    held: Registry,
    next: AtomicU64,
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A message beaten for until this is dropped.
#[must_use = "the message is beaten for only while this is held"]
pub struct Held {
    id: Option<u64>,
    held: Registry,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            lock(&self.held).remove(&id);
        }
    }
}

fn lock(held: &Registry) -> std::sync::MutexGuard<'_, HashMap<u64, AckSubject>> {
    held.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Liveness {
    /// Starts the thread and connects it to NATS as `name`; fails as the worker's own
    /// connection would.
    pub async fn start(
        url: &str,
        name: &str,
        options: &taskwire_bus::NatsOptions,
        period: Duration,
    ) -> Result<Self, WorkerError> {
        let held = Registry::default();
        let stop = CancellationToken::new();
        let (connected, on_connect) = oneshot::channel();
        let (url, name, options) = (url.to_owned(), name.to_owned(), options.clone());
        let thread = {
            let (held, stop) = (held.clone(), stop.clone());
            std::thread::Builder::new()
                .name("taskwire-liveness".into())
                .spawn(move || {
                    let runtime = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(r) => r,
                        Err(e) => {
                            let _ = connected.send(Err(e.to_string()));
                            return;
                        }
                    };
                    runtime.block_on(async move {
                        // Subjects are not used: it only settles deliveries.
                        let bus =
                            match Bus::connect(&url, &name, &options, Subjects::default()).await {
                                Ok(b) => b,
                                Err(e) => {
                                    let _ = connected.send(Err(e.to_string()));
                                    return;
                                }
                            };
                        let _ = connected.send(Ok(()));
                        beat(&bus, &held, period, &stop).await;
                        // Bounded: with NATS gone, a flush waits for a reconnect that
                        // may never come, and stopping must not wait with it.
                        let _ = tokio::time::timeout(FLUSH_ON_STOP, bus.flush()).await;
                    });
                })
                .map_err(|e| WorkerError::Liveness(e.to_string()))?
        };
        match on_connect.await {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => return Err(WorkerError::Liveness(reason)),
            Err(_) => return Err(WorkerError::Liveness("the thread ended".to_owned())),
        }
        tracing::debug!(period_ms = period.as_millis(), "liveness thread beating");
        Ok(Self {
            held,
            next: AtomicU64::new(0),
            stop,
            thread: Some(thread),
        })
    }

    /// Beats for `delivery` until the returned guard is dropped. A message that is not
    /// a JetStream delivery (no ack subject) is not beaten for.
    pub fn hold<T>(&self, delivery: &Delivery<T>) -> Held {
        let id = delivery.ack_subject().map(|ack| {
            let id = self.next.fetch_add(1, Ordering::Relaxed);
            lock(&self.held).insert(id, ack);
            id
        });
        Held {
            id,
            held: self.held.clone(),
        }
    }

    /// Stops beating and waits for the thread to flush and end.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

impl Drop for Liveness {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Every `period`, an in-progress ack for each held message, flushed. A beat that
/// comes late (the thread was not scheduled in time) is logged, so a starved machine
/// shows before its tasks move; so is one that could not be sent (by the bus).
async fn beat(bus: &Bus, held: &Registry, period: Duration, stop: &CancellationToken) {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let due = tokio::select! {
            _ = stop.cancelled() => return,
            due = ticks.tick() => due,
        };
        let late = due.elapsed();
        if late > period {
            tracing::warn!(
                late_ms = late.as_millis(),
                period_ms = period.as_millis(),
                "liveness beat late: the machine is starved of CPU"
            );
        }
        let acks: Vec<AckSubject> = lock(held).values().cloned().collect();
        for ack in acks {
            bus.settle(&ack, Settlement::Progress).await;
        }
        // Written now, not when the connection next has something to send; a
        // connection that cannot write (a partition) does not hold up the next beat.
        if tokio::time::timeout(period, bus.flush()).await.is_err() {
            tracing::warn!("liveness beat not flushed within its period");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_beats_fit_in_the_ack_wait_with_room_for_a_late_one() {
        let ack_wait = Duration::from_secs(6);
        assert_eq!(beat_period(ack_wait), Duration::from_millis(1500));
        assert!(beat_period(ack_wait) * 3 < ack_wait);
    }
}
