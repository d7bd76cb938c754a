//! Rate limits per model, held for a whole fleet.
//!
//! A model's catalogue entry may set `requests_per_minute`, `tokens_per_minute`
//! (input plus output) and `max_concurrent_requests` ([`RateLimits`]). A
//! [`LimitedProvider`] makes each call wait for its slot in the model's [`Budget`]
//! instead of sending it to fail, and handles throttling (429, Anthropic's 529) once
//! for everyone sharing the budget: the `Retry-After` or an empty window's reset
//! silences the model until the time named, the rate learned from the 429s spaces the
//! calls after it, and each retry waits a fully jittered backoff.
//!
//! Where the budget lives is a [`BudgetStore`]: [`LocalBudgets`] for one process, or
//! a store shared by every worker of a deployment (the worker's NATS key-value bucket),
//! so that limits hold across processes.
//!
//! - [`budget`]: the budget as a value and its pure transitions.
//! - [`hints`]: what the providers' headers say about their limits.

pub mod budget;
pub mod hints;

use backon::BackoffBuilder as _;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

pub use budget::{Budget, Ended, Lease, Reserved};
pub use hints::RateHints;

use crate::catalogue::ModelCatalogue;
use crate::{ChatRequest, ChatResponse, LlmError, Provider, StreamDelta};

/// One model's limits; unset means none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimits {
    pub requests_per_minute: Option<u32>,
    /// Input plus output tokens, estimated before a call and corrected by its usage.
    pub tokens_per_minute: Option<u64>,
    pub max_concurrent_requests: Option<u32>,
}

impl RateLimits {
    pub fn is_set(&self) -> bool {
        *self != Self::default()
    }
}

/// Rounds a call waits out a contended budget store (each one a store's whole
/// [`BudgetStore::modify`] retry loop, then a pause) before it sends without a slot.
const MAX_CONTENDED_ROUNDS: u32 = 8;

/// Why [`BudgetStore::modify`] could not store a budget.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    /// The budget could not be encoded for the store.
    #[error("failed to encode the budget of {model}: {source}")]
    Encode {
        model: String,
        #[source]
        source: serde_json::Error,
    },
    /// Other writers changed the budget every time it was about to be stored.
    #[error("the budget of {model} kept changing under {tries} tries")]
    Contended { model: String, tries: usize },
    /// The store could not be read or written. Boxed so that the store's own error
    /// types stay out of this crate's interface.
    #[error(transparent)]
    Store(Box<dyn std::error::Error + Send + Sync>),
}

/// Where models' budgets are kept. Changes are atomic: [`BudgetStore::modify`] runs
/// its change on the current value and stores the result, again on a conflict with
/// another writer.
#[async_trait::async_trait]
pub trait BudgetStore: Send + Sync {
    /// The budget of `model` as last seen (possibly a little stale); `None` when it
    /// has none.
    fn peek(&self, model: &str) -> Option<Budget>;

    /// Applies `change` to the budget of `model` (a default one if it has none) and
    /// stores it; the change may run more than once, the last run's result stands.
    async fn modify(
        &self,
        model: &str,
        change: &mut (dyn for<'b> FnMut(&'b mut Budget) + Send),
    ) -> Result<(), BudgetError>;
}

/// Budgets of one process.
#[derive(Debug, Default)]
pub struct LocalBudgets(Mutex<HashMap<String, Budget>>);

#[async_trait::async_trait]
impl BudgetStore for LocalBudgets {
    fn peek(&self, model: &str) -> Option<Budget> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(model)
            .cloned()
    }

    async fn modify(
        &self,
        model: &str,
        change: &mut (dyn for<'b> FnMut(&'b mut Budget) + Send),
    ) -> Result<(), BudgetError> {
        let mut budgets = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        change(budgets.entry(model.to_owned()).or_default());
        Ok(())
    }
}

/// What a [`LimitedProvider`] reports as it works, for metrics.
pub trait LimitEvents: Send + Sync {
    /// A call of `model` waited `wait` for its slot.
    fn waited(&self, model: &str, wait: Duration);
    /// A call of `model` was given its slot.
    fn permitted(&self, model: &str);
    /// The provider throttled a call of `model`.
    fn throttled(&self, model: &str);
}

/// Reports nothing.
pub struct NoEvents;

impl LimitEvents for NoEvents {
    fn waited(&self, _: &str, _: Duration) {}
    fn permitted(&self, _: &str) {}
    fn throttled(&self, _: &str) {}
}

/// Settings of a [`LimitedProvider`].
#[derive(Debug, Clone, Copy)]
pub struct LimitSettings {
    /// Throttled tries of one call before its error is returned (default 8).
    pub max_throttled: u32,
    /// The first retry's backoff ceiling; doubles per throttle (default 500 ms).
    pub backoff_base: Duration,
    /// The backoff's cap (default 30 s).
    pub backoff_cap: Duration,
    /// How long a concurrency lease lasts if its holder never gives it back (default:
    /// the request timeout's 300 s and a minute).
    pub lease: Duration,
    /// How often a call waiting for a concurrency slot looks again (default 100 ms,
    /// jittered).
    pub full_poll: Duration,
}

impl Default for LimitSettings {
    fn default() -> Self {
        Self {
            max_throttled: 8,
            backoff_base: Duration::from_millis(500),
            backoff_cap: Duration::from_secs(30),
            lease: Duration::from_secs(360),
            full_poll: Duration::from_millis(100),
        }
    }
}

/// A [`Provider`] whose calls keep to their models' budgets. Its inner provider must
/// not retry throttled calls itself (`HttpConfig::retry_throttled = false`): this
/// does, for the whole fleet.
pub struct LimitedProvider {
    inner: Arc<dyn Provider>,
    catalogue: ModelCatalogue,
    store: Arc<dyn BudgetStore>,
    events: Arc<dyn LimitEvents>,
    settings: LimitSettings,
    /// Calls this process sent in the last ten seconds, per model: the rate learning
    /// starts from when the provider names none.
    sent: Mutex<HashMap<String, VecDeque<Instant>>>,
}

/// The window `sent` counts over.
const SENT_WINDOW: Duration = Duration::from_secs(10);

impl LimitedProvider {
    pub fn new(
        inner: Arc<dyn Provider>,
        catalogue: ModelCatalogue,
        store: Arc<dyn BudgetStore>,
        events: Arc<dyn LimitEvents>,
        settings: LimitSettings,
    ) -> Self {
        Self {
            inner,
            catalogue,
            store,
            events,
            settings,
            sent: Mutex::default(),
        }
    }

    /// Waits for the call's slot; the lease taken, if any. `on_delta` hears of a wait.
    async fn acquire(
        &self,
        model: &str,
        limits: &RateLimits,
        tokens: u64,
        priority: u8,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Option<u64> {
        let started = Instant::now();
        let mut told = false;
        let mut contended = 0u32;
        let lease = loop {
            let now = now_ms();
            if !limits.is_set() && self.store.peek(model).is_none_or(|b| b.is_free(now)) {
                break None;
            }
            let lease_id = fastrand::u64(..);
            let lease_ms = millis(self.settings.lease);
            let mut reserved = Reserved::At {
                at_ms: now,
                lease: None,
            };
            if let Err(reason) = self
                .store
                .modify(model, &mut |b| {
                    reserved = b.reserve(limits, now_ms(), tokens, priority, lease_id, lease_ms);
                })
                .await
            {
                // A throttle already known is kept whatever the store says: no call
                // goes out while a provider's Retry-After runs.
                let blocked = self.store.peek(model).map_or(0, |b| b.blocked_until_ms);
                let known_block = Duration::from_millis(blocked.saturating_sub(now_ms()));
                if matches!(reason, BudgetError::Contended { .. })
                    && contended < MAX_CONTENDED_ROUNDS
                {
                    // Busy, not broken: other sessions are taking slots. Try again
                    // after them instead of sending unchecked.
                    contended += 1;
                    let wait = known_block.max(jitter(self.settings.full_poll));
                    tokio::time::sleep(wait).await;
                    continue;
                }
                // The provider's own 429s still protect it; a call is not held up
                // by a store that cannot answer.
                tracing::warn!(model, %reason, "rate budget unavailable, sending without it");
                if !known_block.is_zero() {
                    tokio::time::sleep(known_block).await;
                }
                break None;
            }
            let (until_ms, lease) = match reserved {
                Reserved::At { at_ms, lease } => (at_ms, lease),
                Reserved::Full { retry_ms } => {
                    let poll = jitter(self.settings.full_poll);
                    let until = (now_ms() + millis(poll)).min(retry_ms.max(now_ms()));
                    (until, None)
                }
                Reserved::Later { retry_ms } => {
                    (retry_ms + millis(jitter(self.settings.full_poll)), None)
                }
            };
            let wait = Duration::from_millis(until_ms.saturating_sub(now_ms()));
            if !wait.is_zero() {
                if !told {
                    told = true;
                    on_delta(StreamDelta::RateLimited {
                        model: model.to_owned(),
                        wait,
                    });
                }
                crate::spans::rate_limit_wait(model, millis(wait))
                    .instrument(tokio::time::sleep(wait))
                    .await;
            }
            if matches!(reserved, Reserved::Full { .. } | Reserved::Later { .. }) {
                continue;
            }
            // A throttle heard while this call waited for its slot silences it too.
            let silenced = self
                .store
                .peek(model)
                .is_some_and(|b| b.blocked_until_ms > now_ms());
            if silenced {
                if let Some(id) = lease {
                    self.finish(model, limits, Some(id), &Ended::Failed).await;
                }
                continue;
            }
            break lease;
        };
        let waited = started.elapsed();
        if waited > Duration::from_millis(1) {
            self.events.waited(model, waited);
        }
        self.events.permitted(model);
        lease
    }

    async fn finish(&self, model: &str, limits: &RateLimits, lease: Option<u64>, ended: &Ended) {
        if let Err(reason) = self
            .store
            .modify(model, &mut |b| b.finish(limits, now_ms(), lease, ended))
            .await
        {
            tracing::warn!(model, %reason, "rate budget unavailable, the call's end not recorded");
        }
    }

    /// Counts a call sent now; the calls per minute sent in the last window.
    fn count_sent(&self, model: &str) -> f64 {
        let mut sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        let times = sent.entry(model.to_owned()).or_default();
        let now = Instant::now();
        while times
            .front()
            .is_some_and(|t| now.duration_since(*t) > SENT_WINDOW)
        {
            times.pop_front();
        }
        times.push_back(now);
        #[allow(clippy::cast_precision_loss)]
        let per_minute = times.len() as f64 * 60.0 / SENT_WINDOW.as_secs_f64();
        per_minute
    }

    /// The fully jittered backoff before the `n`th retry of a throttled call.
    fn backoff(&self, n: u32) -> Duration {
        let ceiling = backon::ExponentialBuilder::new()
            .with_min_delay(self.settings.backoff_base)
            .with_max_delay(self.settings.backoff_cap)
            .with_factor(2.0)
            .without_max_times()
            .build()
            .nth(n as usize)
            .unwrap_or(self.settings.backoff_cap);
        ceiling.mul_f64(fastrand::f64())
    }
}

#[async_trait::async_trait]
impl Provider for LimitedProvider {
    async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ChatResponse, LlmError> {
        let model = request.model.as_str();
        let limits = self.catalogue.rate_limits(model);
        // Only a token limit needs the estimate (a walk over the whole request).
        let estimated = if limits.tokens_per_minute.is_some() {
            estimate_tokens(request, &self.catalogue)
        } else {
            0
        };
        let mut throttles = 0;
        loop {
            let lease = self
                .acquire(model, &limits, estimated, request.priority, on_delta)
                .await;
            let sent_rpm = self.count_sent(model);
            let mut hints = RateHints::default();
            let result = {
                let mut forward = |delta: StreamDelta| match delta {
                    StreamDelta::RateHints(h) => hints = h,
                    other => on_delta(other),
                };
                self.inner.chat(request, &mut forward).await
            };
            let now = SystemTime::now();
            let silent_for = |d: Duration| now_ms_at(now) + millis(d);
            match result {
                Ok(response) => {
                    let silent_until_ms = hints.exhausted_for().map(silent_for);
                    let tracked = limits.is_set()
                        || silent_until_ms.is_some()
                        || self.store.peek(model).is_some_and(|b| !b.is_free(now_ms()));
                    if tracked {
                        let tokens = response.usage.input_tokens + response.usage.output_tokens;
                        let ended = Ended::Answered {
                            estimated,
                            tokens,
                            silent_until_ms,
                            limit_rpm: hints.limit_requests,
                        };
                        self.finish(model, &limits, lease, &ended).await;
                    }
                    return Ok(response);
                }
                Err(error) if error.throttled() => {
                    self.events.throttled(model);
                    throttles += 1;
                    let wait = error
                        .retry_after()
                        .or(hints.exhausted_for())
                        .unwrap_or(Duration::from_secs(1));
                    let ended = Ended::Throttled {
                        silent_until_ms: silent_for(wait),
                        limit_rpm: hints.limit_requests,
                        sent_rpm,
                    };
                    self.finish(model, &limits, lease, &ended).await;
                    if throttles > self.settings.max_throttled {
                        return Err(error);
                    }
                    let backoff = self.backoff(throttles - 1);
                    tracing::info!(
                        model,
                        throttles,
                        retry_after_ms = millis(wait),
                        backoff_ms = millis(backoff),
                        "model throttled the call; the fleet waits, then retries"
                    );
                    // The call is queued again, not slow: whoever waits on it (a title
                    // beside its session) hears how long.
                    on_delta(StreamDelta::RateLimited {
                        model: model.to_owned(),
                        wait: backoff.max(wait),
                    });
                    tokio::time::sleep(backoff).await;
                }
                Err(error) => {
                    if lease.is_some() {
                        self.finish(model, &limits, lease, &Ended::Failed).await;
                    }
                    return Err(error);
                }
            }
        }
    }
}

/// About how many tokens a call spends: its input at four bytes a token, and its
/// answer at most (the request's or the model's cap, else 1,024).
pub fn estimate_tokens(request: &ChatRequest, catalogue: &ModelCatalogue) -> u64 {
    let input: usize = request
        .messages
        .iter()
        .map(|m| {
            m.content.len()
                + m.tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.len())
                    .sum::<usize>()
        })
        .sum::<usize>()
        + request
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len())
            .sum::<usize>();
    let output = request
        .max_tokens
        .map(u64::from)
        .or(catalogue.limits(&request.model).max_output_tokens)
        .unwrap_or(1024);
    (input as u64).div_ceil(4) + output
}

fn now_ms() -> u64 {
    now_ms_at(SystemTime::now())
}

fn now_ms_at(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH).map_or(0, millis)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `d` times a random factor in [50 %, 100 %].
fn jitter(d: Duration) -> Duration {
    d.mul_f64(0.5 + fastrand::f64() / 2.0)
}
