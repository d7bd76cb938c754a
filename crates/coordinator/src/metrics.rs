//! The coordinator's metrics, every name in this one file (`docs/metrics.md` lists
//! them): what the coordinator records as it happens (submits, results, retries, dead
//! letters, latencies) and gauges that a named loop refreshes every
//! [`REFRESH_INTERVAL`], so a scrape never runs a query.
//!
//! Labels stay low in cardinality: agents (names from the registry), statuses and
//! fixed reasons; never task ids. The gauges describe the whole deployment (every
//! coordinator reports the same values): aggregate them with `max`, not `sum`.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use taskwire_metrics::buckets;
use tokio_util::sync::CancellationToken;

/// The `stage` labels of the backlog gauge.
const BACKLOG_STAGES: [&str; 3] = ["outbox", "tasks", "results"];

/// How often the gauges are refreshed.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AgentLabels {
    pub agent: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FinishedLabels {
    pub agent: String,
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: &'static str,
}

/// How one result-webhook POST ended (the `outcome` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebhookOutcome {
    /// The receiver answered 2xx.
    Delivered,
    /// It did not; another attempt follows.
    Retrying,
    /// It did not, and it was the last attempt.
    Failed,
}

impl WebhookOutcome {
    const ALL: [Self; 3] = [Self::Delivered, Self::Retrying, Self::Failed];

    fn label(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::Retrying => "retrying",
            Self::Failed => "failed",
        }
    }
}

/// What a schedule did at a tick (the `outcome` label of the fires metric).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleOutcome {
    /// A tick (or a queued tick) submitted its task.
    Started,
    /// TriggerSchedule submitted a task.
    Triggered,
    /// The previous run was still going (overlap `skip`, or `queue_one` with one waiting).
    SkippedOverlap,
    /// The tick waits for the previous run (overlap `queue_one`).
    Queued,
    /// The tick was missed while no coordinator ran and the catch-up policy dropped it.
    SkippedMissed,
    /// The task was refused at submit (its agent gone, a full queue).
    Refused,
}

impl ScheduleOutcome {
    const ALL: [Self; 6] = [
        Self::Started,
        Self::Triggered,
        Self::SkippedOverlap,
        Self::Queued,
        Self::SkippedMissed,
        Self::Refused,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Triggered => "triggered",
            Self::SkippedOverlap => "skipped_overlap",
            Self::Queued => "queued",
            Self::SkippedMissed => "skipped_missed",
            Self::Refused => "refused",
        }
    }
}

/// Why a submit was refused for backpressure (the `reason` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The tasks stream held `--max-queued-tasks`.
    QueueFull,
    /// The fleet was `--max-backlog` tasks behind.
    Backlog,
}

impl Refusal {
    const ALL: [Self; 2] = [Self::QueueFull, Self::Backlog];

    fn label(self) -> &'static str {
        match self {
            Self::QueueFull => "queue_full",
            Self::Backlog => "backlog",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StageLabels {
    pub stage: &'static str,
}

/// Why a dead letter was recorded (the `reason` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeadLetterReason {
    /// A task message reached JetStream's max deliveries.
    MaxDeliveries,
    /// A worker terminated a message it could not run (a malformed envelope).
    Rejected,
    /// A result message could not be decoded.
    MalformedResult,
}

impl DeadLetterReason {
    fn label(self) -> &'static str {
        match self {
            Self::MaxDeliveries => "max_deliveries",
            Self::Rejected => "rejected",
            Self::MalformedResult => "malformed_result",
        }
    }
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn task_histogram() -> Histogram {
    Histogram::new(buckets::TASK_SECONDS)
}

/// The coordinator's metrics and the registry that exposes them. Cheap to clone.
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

struct Inner {
    registry: Arc<Registry>,
    submitted: Family<AgentLabels, Counter>,
    finished: Family<FinishedLabels, Counter>,
    retries: Family<AgentLabels, Counter>,
    dead_letters: Family<ReasonLabels, Counter>,
    webhook_deliveries: Family<OutcomeLabels, Counter>,
    schedule_ticks: Family<OutcomeLabels, Counter>,
    refused: Family<ReasonLabels, Counter>,
    backlog: Family<StageLabels, Gauge>,
    backlog_limit: Gauge,
    schedule_lag: Histogram,
    queued: Gauge,
    running: Gauge,
    approvals_pending: Gauge,
    outbox_backlog: Gauge,
    queue_wait: Histogram,
    run_duration: HistogramFamily<AgentLabels>,
    duration: HistogramFamily<AgentLabels>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut r = Registry::default();
        let submitted = Family::<AgentLabels, Counter>::default();
        r.register(
            "taskwire_coordinator_tasks_submitted",
            "Tasks accepted by Submit, RunCommand and workers' child submits (an idempotent repeat is not counted)",
            submitted.clone(),
        );
        let finished = Family::<FinishedLabels, Counter>::default();
        r.register(
            "taskwire_coordinator_tasks_finished",
            "Tasks whose final result from a worker was recorded, by agent and status",
            finished.clone(),
        );
        let retries = Family::<AgentLabels, Counter>::default();
        r.register(
            "taskwire_coordinator_task_retries",
            "Failed attempts recorded with a retry scheduled",
            retries.clone(),
        );
        let dead_letters = Family::<ReasonLabels, Counter>::default();
        // Every reason is known: exported at 0 from the start, so rates and alerts
        // work before the first dead letter.
        for reason in [
            DeadLetterReason::MaxDeliveries,
            DeadLetterReason::Rejected,
            DeadLetterReason::MalformedResult,
        ] {
            drop(dead_letters.get_or_create(&ReasonLabels {
                reason: reason.label(),
            }));
        }
        r.register(
            "taskwire_coordinator_dead_letters",
            "Dead letters recorded, by reason",
            dead_letters.clone(),
        );
        let webhook_deliveries = Family::<OutcomeLabels, Counter>::default();
        for outcome in WebhookOutcome::ALL {
            drop(webhook_deliveries.get_or_create(&OutcomeLabels {
                outcome: outcome.label(),
            }));
        }
        r.register(
            "taskwire_coordinator_webhook_deliveries",
            "Result-webhook POSTs, by outcome",
            webhook_deliveries.clone(),
        );
        let refused = Family::<ReasonLabels, Counter>::default();
        for reason in Refusal::ALL {
            drop(refused.get_or_create(&ReasonLabels {
                reason: reason.label(),
            }));
        }
        r.register(
            "taskwire_coordinator_submits_refused",
            "Submits (and schedule ticks) refused RESOURCE_EXHAUSTED for backpressure, by reason: queue_full (--max-queued-tasks), backlog (--max-backlog)",
            refused.clone(),
        );
        let backlog = Family::<StageLabels, Gauge>::default();
        for stage in BACKLOG_STAGES {
            drop(backlog.get_or_create(&StageLabels { stage }));
        }
        r.register(
            "taskwire_coordinator_backlog",
            "Tasks the fleet is behind on, by stage, as backpressure last sampled them for the fleet (this coordinator or another): outbox (dispatches not yet published), tasks (task messages in the tasks stream, waiting or running), results (results not yet recorded); --max-backlog bounds their sum",
            backlog.clone(),
        );
        let backlog_limit = Gauge::default();
        r.register(
            "taskwire_coordinator_backlog_limit",
            "The backlog at which submits are refused RESOURCE_EXHAUSTED (--max-backlog; 0: no limit)",
            backlog_limit.clone(),
        );
        let schedule_ticks = Family::<OutcomeLabels, Counter>::default();
        for outcome in ScheduleOutcome::ALL {
            drop(schedule_ticks.get_or_create(&OutcomeLabels {
                outcome: outcome.label(),
            }));
        }
        r.register(
            "taskwire_coordinator_schedule_ticks",
            "Schedule ticks acted on, by outcome (started, triggered, skipped_overlap, queued, skipped_missed, refused)",
            schedule_ticks.clone(),
        );
        let schedule_lag = Histogram::new(buckets::SCHEDULE_LAG_SECONDS);
        r.register_with_unit(
            "taskwire_coordinator_schedule_lag",
            "Time from a schedule's tick to the dispatch of its task (the commit that writes its outbox row), by the database's clock",
            Unit::Seconds,
            schedule_lag.clone(),
        );
        let queued = Gauge::default();
        r.register(
            "taskwire_coordinator_tasks_queued",
            "Task messages waiting for a worker: the workers' consumer's pending count (the tasks stream's depth before a worker created it)",
            queued.clone(),
        );
        let running = Gauge::default();
        r.register(
            "taskwire_coordinator_tasks_running",
            "Tasks running in the whole deployment",
            running.clone(),
        );
        let approvals_pending = Gauge::default();
        r.register(
            "taskwire_coordinator_approvals_pending",
            "Tasks waiting for an answer to an approval request",
            approvals_pending.clone(),
        );
        let outbox_backlog = Gauge::default();
        r.register(
            "taskwire_coordinator_outbox_backlog",
            "Dispatches written to the outbox and not yet published to JetStream",
            outbox_backlog.clone(),
        );
        let queue_wait = task_histogram();
        r.register_with_unit(
            "taskwire_coordinator_queue_wait",
            "Time from a task's submit (or its retry or replay) to the claim that starts it",
            Unit::Seconds,
            queue_wait.clone(),
        );
        let run_duration = HistogramFamily::<AgentLabels>::new_with_constructor(task_histogram);
        r.register_with_unit(
            "taskwire_coordinator_task_run_duration",
            "Time from the claim of the recorded attempt to its final result",
            Unit::Seconds,
            run_duration.clone(),
        );
        let duration = HistogramFamily::<AgentLabels>::new_with_constructor(task_histogram);
        r.register_with_unit(
            "taskwire_coordinator_task_duration",
            "Time from a task's submit to its final result (end to end, retries included)",
            Unit::Seconds,
            duration.clone(),
        );
        Self(Arc::new(Inner {
            registry: Arc::new(r),
            submitted,
            finished,
            retries,
            dead_letters,
            webhook_deliveries,
            schedule_ticks,
            refused,
            backlog,
            backlog_limit,
            schedule_lag,
            queued,
            running,
            approvals_pending,
            outbox_backlog,
            queue_wait,
            run_duration,
            duration,
        }))
    }

    pub fn webhook_delivery(&self, outcome: WebhookOutcome) {
        self.0
            .webhook_deliveries
            .get_or_create(&OutcomeLabels {
                outcome: outcome.label(),
            })
            .inc();
    }

    /// A submit refused for backpressure.
    pub fn submit_refused(&self, reason: Refusal) {
        self.0
            .refused
            .get_or_create(&ReasonLabels {
                reason: reason.label(),
            })
            .inc();
    }

    /// The backlog limit this coordinator refuses submits at (`--max-backlog`).
    pub fn set_backlog_limit(&self, limit: u64) {
        self.0
            .backlog_limit
            .set(i64::try_from(limit).unwrap_or(i64::MAX));
    }

    /// The backlog as last sampled, by stage.
    pub fn set_backlog(&self, backlog: crate::backpressure::Backlog) {
        for (stage, value) in
            BACKLOG_STAGES
                .into_iter()
                .zip([backlog.outbox, backlog.tasks, backlog.results])
        {
            self.0
                .backlog
                .get_or_create(&StageLabels { stage })
                .set(i64::try_from(value).unwrap_or(i64::MAX));
        }
    }

    /// `count` schedule ticks acted on with `outcome`.
    pub fn schedule_ticks(&self, outcome: ScheduleOutcome, count: u64) {
        if count > 0 {
            self.0
                .schedule_ticks
                .get_or_create(&OutcomeLabels {
                    outcome: outcome.label(),
                })
                .inc_by(count);
        }
    }

    /// A tick's task dispatched `lag` after its tick.
    pub fn schedule_lag(&self, lag: Duration) {
        self.0.schedule_lag.observe(lag.as_secs_f64());
    }

    /// The registry `/metrics` encodes.
    pub fn registry(&self) -> Arc<Registry> {
        self.0.registry.clone()
    }

    pub fn task_submitted(&self, agent: &str) {
        self.0
            .submitted
            .get_or_create(&AgentLabels {
                agent: agent.to_owned(),
            })
            .inc();
    }

    /// A claim started a task that waited `waited` in the queue.
    pub fn task_claimed(&self, waited: Duration) {
        self.0.queue_wait.observe(waited.as_secs_f64());
    }

    /// A final result was recorded.
    pub fn task_finished(
        &self,
        agent: &str,
        status: &str,
        since_submit: Duration,
        since_claim: Option<Duration>,
    ) {
        let labels = AgentLabels {
            agent: agent.to_owned(),
        };
        self.0
            .finished
            .get_or_create(&FinishedLabels {
                agent: agent.to_owned(),
                status: status.to_owned(),
            })
            .inc();
        self.0
            .duration
            .get_or_create(&labels)
            .observe(since_submit.as_secs_f64());
        if let Some(run) = since_claim {
            self.0
                .run_duration
                .get_or_create(&labels)
                .observe(run.as_secs_f64());
        }
    }

    pub fn task_retried(&self, agent: &str) {
        self.0
            .retries
            .get_or_create(&AgentLabels {
                agent: agent.to_owned(),
            })
            .inc();
    }

    pub fn dead_letter(&self, reason: DeadLetterReason) {
        self.0
            .dead_letters
            .get_or_create(&ReasonLabels {
                reason: reason.label(),
            })
            .inc();
    }
}

/// Refreshes the gauges every [`REFRESH_INTERVAL`] until `shutdown`, as the
/// `metrics-refresh` loop. Failure policy: a failed read keeps the gauge's last value
/// and is tried again on the next tick.
pub async fn refresh(state: Arc<crate::State>, shutdown: CancellationToken) {
    let metrics = &state.metrics;
    let consumer = state.subjects.workers_consumer(&state.config.queue);
    let mut tick = tokio::time::interval(REFRESH_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match state.store.gauge_counts().await {
            Ok(counts) => {
                metrics.0.running.set(counts.running);
                metrics.0.approvals_pending.set(counts.awaiting_approval);
                metrics.0.outbox_backlog.set(counts.outbox_backlog);
            }
            Err(error) => tracing::debug!(%error, "failed to refresh the task gauges"),
        }
        metrics.set_backlog(state.queue_depth.backlog());
        let pending = match state
            .bus
            .consumer_pending(&state.subjects.tasks_stream(), &consumer)
            .await
        {
            Ok(Some(pending)) => Some(pending),
            // No worker has created the consumer yet: everything in the stream waits.
            Ok(None) => Some(state.queue_depth.get()),
            Err(error) => {
                tracing::debug!(%error, "failed to read the tasks stream for the queue gauge");
                None
            }
        };
        if let Some(pending) = pending {
            metrics
                .0
                .queued
                .set(i64::try_from(pending).unwrap_or(i64::MAX));
        }
    }
}
