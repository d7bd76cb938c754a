//! Stream and consumer set-up. The coordinator creates and configures the streams at
//! start (idempotently); workers wait for them and create only their queue's consumer.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use taskwire_protocol::TaskId;

use crate::error::CodecError;
use crate::progress::decode_events;
use crate::{Bus, BusError, Subjects};

/// JetStream settings shared by coordinator and workers.
#[derive(Debug, Clone)]
pub struct BusConfig {
    pub subjects: Subjects,
    /// Most tasks waiting in the tasks stream; beyond it a publish is refused
    /// (and `Submit` answers `RESOURCE_EXHAUSTED`) instead of dropping work.
    pub max_queued_tasks: i64,
    /// How long a worker may hold a task without a progress ack before redelivery.
    pub ack_wait: Duration,
    /// Deliveries of one task message before JetStream gives up on it (then the
    /// coordinator dead-letters the task). High, because a delivery that finds the
    /// coordinator unreachable or the tenant busy counts too; real failures are bounded
    /// by each task's attempt budget instead.
    pub max_deliver: i64,
    /// How long progress events are kept for `Watch` replay.
    pub events_max_age: Duration,
    /// How long, and how many bytes of, patches the patch bucket keeps.
    pub patches: crate::patches::BucketLimits,
}

impl Default for BusConfig {
    fn default() -> Self {
        Self {
            subjects: Subjects::default(),
            max_queued_tasks: 1_000_000,
            ack_wait: Duration::from_secs(6),
            max_deliver: 100,
            events_max_age: Duration::from_secs(24 * 3600),
            patches: crate::patches::BucketLimits::default(),
        }
    }
}

/// Creates (or updates to match) taskwire's streams, and the streams behind the patch
/// bucket (see [`crate::patches`]) and the limits bucket (see [`crate::limits`]).
pub async fn ensure_streams(js: &jetstream::Context, cfg: &BusConfig) -> Result<(), BusError> {
    let s = &cfg.subjects;
    let streams = [
        stream::Config {
            name: s.tasks_stream(),
            subjects: vec![s.tasks_all()],
            retention: stream::RetentionPolicy::WorkQueue,
            max_messages: cfg.max_queued_tasks,
            discard: stream::DiscardPolicy::New,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        },
        stream::Config {
            name: s.events_stream(),
            subjects: vec![s.progress_all()],
            retention: stream::RetentionPolicy::Limits,
            max_age: cfg.events_max_age,
            ..Default::default()
        },
        stream::Config {
            name: s.results_stream(),
            subjects: vec![s.results_all()],
            retention: stream::RetentionPolicy::WorkQueue,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        },
        stream::Config {
            name: s.advisories_stream(),
            subjects: vec![s.max_deliveries_advisories()],
            retention: stream::RetentionPolicy::WorkQueue,
            max_age: Duration::from_secs(7 * 24 * 3600),
            ..Default::default()
        },
        stream::Config {
            name: s.dead_letter_stream(),
            subjects: vec![s.dead_letters()],
            retention: stream::RetentionPolicy::WorkQueue,
            ..Default::default()
        },
        crate::patches::bucket_config(s, cfg.patches),
        crate::limits::bucket_config(s),
    ];
    for config in streams {
        let name = config.name.clone();
        let fail = |e: &dyn std::fmt::Display| BusError::Stream {
            stream: name.clone(),
            reason: e.to_string(),
        };
        // A stream made here needs no update; one that was there takes this config. So
        // does one another coordinator, starting at the same moment, created between
        // the look and the create: it is there now.
        let made = match js.get_stream(&name).await {
            Ok(_) => false,
            Err(_) => match js.create_stream(config.clone()).await {
                Ok(_) => true,
                Err(created) if js.get_stream(&name).await.is_err() => return Err(fail(&created)),
                Err(_) => false,
            },
        };
        if !made {
            js.update_stream(config).await.map_err(|e| fail(&e))?;
        }
    }
    Ok(())
}

/// How often [`wait_for_streams`] looks again for a stream that is not there yet.
const STREAM_POLL: Duration = Duration::from_millis(250);

/// Waits until the streams a worker uses exist: tasks, events, results, dead letters.
///
/// Workers never create or change streams. The coordinator owns their settings (a
/// worker updating them would undo the coordinator's `max_queued_tasks`), and the
/// worker's NATS user may only look them up (see [`crate::permissions::worker`]).
/// Waits for as long as it takes; the caller stops it on shutdown.
pub async fn wait_for_streams(js: &jetstream::Context, subjects: &Subjects) {
    for name in [
        subjects.tasks_stream(),
        subjects.events_stream(),
        subjects.results_stream(),
        subjects.dead_letter_stream(),
    ] {
        let mut waiting = false;
        loop {
            match js.get_stream(&name).await {
                Ok(_) => break,
                Err(e) if !waiting => {
                    tracing::info!(stream = %name, error = %e, "waiting for a coordinator to create the stream");
                    waiting = true;
                }
                Err(e) => tracing::debug!(stream = %name, error = %e, "stream not there yet"),
            }
            tokio::time::sleep(STREAM_POLL).await;
        }
    }
}

/// The durable pull consumer shared by all workers of `queue`.
pub async fn tasks_consumer(
    js: &jetstream::Context,
    cfg: &BusConfig,
    queue: &str,
    max_ack_pending: i64,
) -> Result<consumer::PullConsumer, BusError> {
    let s = &cfg.subjects;
    let name = s.workers_consumer(queue);
    let stream = js
        .get_stream(s.tasks_stream())
        .await
        .map_err(|e| BusError::Stream {
            stream: s.tasks_stream(),
            reason: e.to_string(),
        })?;
    let config = consumer::pull::Config {
        durable_name: Some(name.clone()),
        filter_subject: s.tasks(queue),
        ack_policy: consumer::AckPolicy::Explicit,
        ack_wait: cfg.ack_wait,
        max_deliver: cfg.max_deliver,
        max_ack_pending,
        ..Default::default()
    };
    let fail = |e: &dyn std::fmt::Display| BusError::Consumer {
        consumer: name.clone(),
        reason: e.to_string(),
    };
    let mut consumer: consumer::PullConsumer = stream
        .get_or_create_consumer(&name, config.clone())
        .await
        .map_err(|e| fail(&e))?;
    // A consumer made by an earlier version (or another worker's settings) keeps its
    // ack wait until told otherwise; this worker's liveness beats are timed for its own.
    let existing = consumer.cached_info().config.ack_wait;
    if existing != cfg.ack_wait {
        consumer = stream.create_consumer(config).await.map_err(|e| fail(&e))?;
        tracing::info!(
            consumer = %name,
            from_ms = existing.as_millis(),
            to_ms = consumer.cached_info().config.ack_wait.as_millis(),
            "tasks consumer's ack wait updated"
        );
    }
    Ok(consumer)
}

/// A durable pull consumer on one of the coordinator's streams (results, dead letters).
pub async fn coordinator_consumer(
    js: &jetstream::Context,
    stream_name: &str,
    name: &str,
    ack_wait: Duration,
) -> Result<consumer::PullConsumer, BusError> {
    let stream = js
        .get_stream(stream_name)
        .await
        .map_err(|e| BusError::Stream {
            stream: stream_name.to_owned(),
            reason: e.to_string(),
        })?;
    let config = consumer::pull::Config {
        durable_name: Some(name.to_owned()),
        ack_policy: consumer::AckPolicy::Explicit,
        ack_wait,
        max_ack_pending: 20_000,
        ..Default::default()
    };
    stream
        .get_or_create_consumer(name, config)
        .await
        .map_err(|e| BusError::Consumer {
            consumer: name.to_owned(),
            reason: e.to_string(),
        })
}

/// The last progress message of a task, as stored in the events stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastProgress {
    /// Its sequence in the events stream.
    pub sequence: u64,
    payload: bytes::Bytes,
}

impl LastProgress {
    /// Its events ([`decode_events`]).
    pub fn events(&self) -> Result<Vec<taskwire_protocol::pb::TaskProgress>, CodecError> {
        decode_events(&self.payload)
    }
}

impl Bus {
    /// [`ensure_streams`] on this bus's connection.
    pub async fn ensure_streams(&self, cfg: &BusConfig) -> Result<(), BusError> {
        ensure_streams(self.js(), cfg).await
    }

    /// [`wait_for_streams`] of this bus's deployment.
    pub async fn wait_for_streams(&self) {
        wait_for_streams(self.js(), self.subjects()).await
    }

    /// How many messages `stream` holds.
    pub async fn stream_depth(&self, stream: &str) -> Result<u64, BusError> {
        let fail = |e: &dyn std::fmt::Display| BusError::Request {
            action: format!("read stream {stream}"),
            reason: e.to_string(),
        };
        // One request, the stream's info, of which only the message count is decoded
        // (decoding the whole info, config and all, was about a fifth of an idle
        // coordinator's CPU; see docs/performance.md).
        let reply: DepthReply = self
            .js()
            .request(format!("STREAM.INFO.{stream}"), &())
            .await
            .map_err(|e| fail(&e))?;
        match reply {
            DepthReply {
                error: Some(error), ..
            } => Err(fail(&error)),
            DepthReply {
                state: Some(state), ..
            } => Ok(state.messages),
            DepthReply { .. } => Err(fail(&"the stream's info names no state")),
        }
    }

    /// How many messages of `stream` the durable consumer `consumer` has yet to
    /// deliver; `None` when there is no such consumer (yet). An error when the stream
    /// cannot be read.
    pub async fn consumer_pending(
        &self,
        stream: &str,
        consumer: &str,
    ) -> Result<Option<u64>, BusError> {
        // The consumer's info is the one request: the stream's own is not read.
        let s = self
            .js()
            .get_stream_no_info(stream)
            .await
            .map_err(|e| BusError::Request {
                action: format!("read stream {stream}"),
                reason: e.to_string(),
            })?;
        Ok(s.consumer_info(consumer).await.ok().map(|i| i.num_pending))
    }

    /// The last progress message of `task`; `None` when it has none, or it cannot be
    /// read now.
    pub async fn last_progress(&self, task: TaskId) -> Option<LastProgress> {
        let stream = self
            .js()
            .get_stream_no_info(self.subjects().events_stream())
            .await
            .ok()?;
        let last = stream
            .get_last_raw_message_by_subject(&self.subjects().progress(task))
            .await
            .ok()?;
        Some(LastProgress {
            sequence: last.sequence,
            payload: last.payload,
        })
    }
}

/// JetStream's answer to `STREAM.INFO`, read only as far as [`Bus::stream_depth`] needs:
/// an error, or the state's message count (every other field is skipped unread).
#[derive(serde::Deserialize)]
struct DepthReply {
    error: Option<jetstream::Error>,
    state: Option<DepthState>,
}

#[derive(serde::Deserialize)]
struct DepthState {
    messages: u64,
}
