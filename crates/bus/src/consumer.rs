//! Typed JetStream consumers: deliveries of domain values read by the
//! [codec](crate::codec) ([`Incoming`]), and the one table by which a delivery is
//! settled. Core NATS subscriptions, typed the same way, are in
//! [`subscription`](crate::subscription).
//!
//! - [`Consumer<T>`]: a durable pull consumer (the workers' tasks consumer, the
//!   coordinators' results, dead letters and advisories). It pulls continuously
//!   ([`Consumer::messages`]) or one batch at a time ([`Consumer::batch`]).
//! - [`Received<T>`]: what a consumer yields: a [`Delivery<T>`], or a delivery of a
//!   message that is not a `T` ([`Malformed`]: its subject, payload and decode error,
//!   for the dead-letter record), which is settled the same way.
//! - [`Settlement`]: `Ack`, `AckSync`, `Nak(delay)`, `Term`, `Progress`; applied by
//!   [`Delivery::settle`] (or [`Bus::settle`] for a delivery pulled on another
//!   connection), which logs a failure: JetStream redelivers a message that was not
//!   settled after its ack wait, and every consumer here makes a redelivery harmless.
//! - [`Bus::replay_progress`]: a task's progress from the first event stored, through
//!   an ordered consumer (nothing to settle).

use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use async_nats::jetstream::consumer::{DeliverPolicy, PullConsumer, pull::OrderedConfig};
use async_nats::jetstream::{self, AckKind};
use bytes::Bytes;
use futures::stream::{BoxStream, Stream, StreamExt};
use taskwire_protocol::TaskId;

use crate::codec::{Envelope, decode};
use crate::error::{BusError, CodecError};
use crate::progress::ProgressEvents;
use crate::specs::Dispatched;
use crate::{Bus, BusConfig};

/// A value that arrives on the bus: read from a message's subject and payload.
pub trait Incoming: Sized + Send + 'static {
    /// The value in a message, or why the message is not one.
    fn read(subject: &str, payload: &[u8]) -> Result<Self, CodecError>;
}

/// Every envelope arrives as its payload, decoded by the codec.
impl<E: Envelope + Send + 'static> Incoming for E {
    fn read(_subject: &str, payload: &[u8]) -> Result<Self, CodecError> {
        decode(payload)
    }
}

/// A message that is not the value expected: what a dead letter records.
#[derive(Debug, Clone)]
pub struct Malformed {
    pub subject: String,
    pub payload: Bytes,
    pub error: CodecError,
}

/// What to tell JetStream about a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// Done with it: a WorkQueue stream removes it. Not confirmed: should the ack be
    /// lost, the message comes again after the ack wait.
    Ack,
    /// [`Ack`](Self::Ack), and wait until the server confirms it: for a message whose
    /// handling should not be repeated without need.
    AckSync,
    /// Offer it again (to any consumer of the same durable), at once or after a delay.
    Nak(Option<Duration>),
    /// Never offer it again: it can never be handled (recorded as a dead letter).
    Term,
    /// Still being handled: restart its ack wait.
    Progress,
}

impl Settlement {
    fn kind(self) -> AckKind {
        match self {
            Self::Ack | Self::AckSync => AckKind::Ack,
            Self::Nak(delay) => AckKind::Nak(delay),
            Self::Term => AckKind::Term,
            Self::Progress => AckKind::Progress,
        }
    }
}

/// Where a delivery's acks go: lets another connection settle it (the worker's
/// liveness beats, see [`Bus::settle`]).
#[derive(Debug, Clone)]
pub struct AckSubject(async_nats::Subject);

/// One message delivered by a JetStream consumer, with its value.
pub struct Delivery<T> {
    pub value: T,
    /// How many times the message was delivered, this time included (1 the first time).
    pub delivered: u64,
    /// Its sequence in its stream (0 if the server did not say).
    pub stream_sequence: u64,
    message: jetstream::Message,
}

impl<T> std::fmt::Debug for Delivery<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("subject", &self.message.subject)
            .field("delivered", &self.delivered)
            .field("stream_sequence", &self.stream_sequence)
            .finish_non_exhaustive()
    }
}

impl<T> Delivery<T> {
    fn of(message: jetstream::Message, value: T) -> Self {
        let (delivered, stream_sequence) = message.info().map_or((1, 0), |i| {
            (u64::try_from(i.delivered).unwrap_or(1), i.stream_sequence)
        });
        Self {
            value,
            delivered,
            stream_sequence,
            message,
        }
    }

    /// The subject the message was published to.
    pub fn subject(&self) -> &str {
        self.message.subject.as_str()
    }

    /// The message as it was published.
    pub fn payload(&self) -> &Bytes {
        &self.message.payload
    }

    /// Where its acks go; `None` for a message that is not a JetStream delivery.
    pub fn ack_subject(&self) -> Option<AckSubject> {
        self.message.reply.clone().map(AckSubject)
    }

    /// The value, and the delivery without it, to settle later: a value used up
    /// early is not kept as long as the delivery.
    pub fn take(self) -> (T, Delivery<()>) {
        let Self {
            value,
            delivered,
            stream_sequence,
            message,
        } = self;
        let rest = Delivery {
            value: (),
            delivered,
            stream_sequence,
            message,
        };
        (value, rest)
    }

    /// Settles the delivery as `how` says. A failure is logged: JetStream offers a
    /// message that was not settled again after its ack wait.
    pub async fn settle(&self, how: Settlement) {
        let settled = match how {
            Settlement::AckSync => self.message.double_ack().await,
            other => self.message.ack_with(other.kind()).await,
        };
        if let Err(error) = settled {
            tracing::warn!(
                subject = %self.message.subject,
                stream_sequence = self.stream_sequence,
                settlement = ?how,
                %error,
                "failed to settle a delivery"
            );
        }
    }
}

/// What a consumer yields: a value, or a message that is not one.
#[derive(Debug)]
pub enum Received<T> {
    Value(Delivery<T>),
    /// Not a `T`: record it (a dead letter) and settle it, usually with
    /// [`Settlement::Term`].
    Malformed(Delivery<Malformed>),
}

impl<T: Incoming> Received<T> {
    fn read(message: jetstream::Message) -> Self {
        match T::read(message.subject.as_str(), &message.payload) {
            Ok(value) => Self::Value(Delivery::of(message, value)),
            Err(error) => {
                let malformed = Malformed {
                    subject: message.subject.to_string(),
                    payload: message.payload.clone(),
                    error,
                };
                Self::Malformed(Delivery::of(message, malformed))
            }
        }
    }
}

impl<T> Received<T> {
    /// The value (or why there is none), and the delivery to settle.
    pub fn take(self) -> (Result<T, Malformed>, Delivery<()>) {
        match self {
            Self::Value(d) => {
                let (value, d) = d.take();
                (Ok(value), d)
            }
            Self::Malformed(d) => {
                let (malformed, d) = d.take();
                (Err(malformed), d)
            }
        }
    }

    /// Settles it, whatever it holds ([`Delivery::settle`]).
    pub async fn settle(&self, how: Settlement) {
        match self {
            Self::Value(d) => d.settle(how).await,
            Self::Malformed(d) => d.settle(how).await,
        }
    }
}

/// A durable pull consumer whose messages are `T`s.
pub struct Consumer<T> {
    consumer: PullConsumer,
    client: async_nats::Client,
    name: String,
    _values: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<T: Incoming> Consumer<T> {
    fn pull_error(&self, e: impl std::fmt::Display) -> BusError {
        BusError::Pull {
            consumer: self.name.clone(),
            reason: e.to_string(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// How long a delivery may go unsettled (without [`Settlement::Progress`]) before
    /// it is offered again, as the server has it.
    pub fn ack_wait(&self) -> Duration {
        self.consumer.cached_info().config.ack_wait
    }

    /// Every message, pulled continuously, until the stream is dropped.
    pub async fn messages(&self) -> Result<Deliveries<T>, BusError> {
        let messages = self
            .consumer
            .messages()
            .await
            .map_err(|e| self.pull_error(e))?;
        Ok(Deliveries::new(self.name.clone(), messages))
    }

    /// One pull of at most `max` messages, waiting at most `expires` for them.
    pub async fn batch(&self, max: usize, expires: Duration) -> Result<Batch<T>, BusError> {
        // A pull request dies with the server it was sent to; the client would only
        // give up on it `expires` plus a margin later. Noticing a reconnect ends the
        // batch at once, so that the caller pulls again.
        let connects = connects(&self.client);
        let messages = self
            .consumer
            .batch()
            .max_messages(max)
            .expires(expires)
            .messages()
            .await
            .map_err(|e| self.pull_error(e))?;
        Ok(Batch {
            messages: Deliveries::new(self.name.clone(), messages),
            client: self.client.clone(),
            connects,
            reconnect_check: tokio::time::interval(RECONNECT_CHECK),
        })
    }
}

/// How many times `client` has connected (reconnects included).
fn connects(client: &async_nats::Client) -> u64 {
    client
        .statistics()
        .connects
        .load(std::sync::atomic::Ordering::Relaxed)
}

/// How often a waiting batch checks whether the connection was re-established.
const RECONNECT_CHECK: Duration = Duration::from_millis(200);

/// The deliveries of a consumer, as they come.
pub struct Deliveries<T> {
    messages: BoxStream<'static, Result<jetstream::Message, BusError>>,
    _values: PhantomData<fn() -> T>,
}

impl<T> Deliveries<T> {
    /// The messages of `consumer` (named in errors).
    fn new<E: std::fmt::Display>(
        consumer: String,
        messages: impl Stream<Item = Result<jetstream::Message, E>> + Send + 'static,
    ) -> Self {
        let messages = messages.map(move |m| {
            m.map_err(|e| BusError::Pull {
                consumer: consumer.clone(),
                reason: e.to_string(),
            })
        });
        Self {
            messages: messages.boxed(),
            _values: PhantomData,
        }
    }
}

impl<T: Incoming> Stream for Deliveries<T> {
    type Item = Result<Received<T>, BusError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.messages
            .poll_next_unpin(cx)
            .map(|m| m.map(|m| m.map(Received::read)))
    }
}

/// The deliveries of one pull ([`Consumer::batch`]).
pub struct Batch<T> {
    messages: Deliveries<T>,
    client: async_nats::Client,
    connects: u64,
    reconnect_check: tokio::time::Interval,
}

impl<T: Incoming> Batch<T> {
    /// The next delivery; `None` once the batch is over: all pulled, expired, or the
    /// connection re-established since (pull again). Cancel-safe.
    pub async fn next(&mut self) -> Option<Result<Received<T>, BusError>> {
        loop {
            tokio::select! {
                m = self.messages.next() => return m,
                _ = self.reconnect_check.tick() => {
                    if connects(&self.client) != self.connects {
                        tracing::debug!("reconnected since the pull request, pulling again");
                        return None;
                    }
                }
            }
        }
    }
}

impl Bus {
    /// The durable consumer `name` on the coordinators' stream `stream` (results, dead
    /// letters, advisories), its messages read as `T`s.
    pub async fn consume<T: Incoming>(
        &self,
        stream: &str,
        name: &str,
        ack_wait: Duration,
    ) -> Result<Consumer<T>, BusError> {
        let consumer =
            crate::streams::coordinator_consumer(self.js(), stream, name, ack_wait).await?;
        Ok(self.typed(consumer, name))
    }

    /// The durable consumer shared by the workers of `queue`, creating it as
    /// [`tasks_consumer`](crate::tasks_consumer) says.
    pub async fn consume_tasks(
        &self,
        cfg: &BusConfig,
        queue: &str,
        max_ack_pending: i64,
    ) -> Result<Consumer<Dispatched>, BusError> {
        let consumer =
            crate::streams::tasks_consumer(self.js(), cfg, queue, max_ack_pending).await?;
        let name = cfg.subjects.workers_consumer(queue);
        Ok(self.typed(consumer, &name))
    }

    fn typed<T>(&self, consumer: PullConsumer, name: &str) -> Consumer<T> {
        Consumer {
            consumer,
            client: self.client().clone(),
            name: name.to_owned(),
            _values: PhantomData,
        }
    }

    /// The progress of `task` from its first stored event on, live, through an ordered
    /// consumer (its deliveries need no settling).
    pub async fn replay_progress(
        &self,
        task: TaskId,
    ) -> Result<Deliveries<ProgressEvents>, BusError> {
        let stream_name = self.subjects().events_stream();
        let consumer = format!("ordered replay of {}", self.subjects().progress(task));
        let fail = |e: &dyn std::fmt::Display| BusError::Consumer {
            consumer: consumer.clone(),
            reason: e.to_string(),
        };
        // Not the stream's info: creating the consumer is the one request a watch
        // needs (and fails alike when the stream is missing).
        let stream = self
            .js()
            .get_stream_no_info(&stream_name)
            .await
            .map_err(|e| BusError::Request {
                action: format!("read stream {stream_name}"),
                reason: e.to_string(),
            })?;
        let messages = stream
            .create_consumer(OrderedConfig {
                filter_subject: self.subjects().progress(task),
                deliver_policy: DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .map_err(|e| fail(&e))?
            .messages()
            .await
            .map_err(|e| fail(&e))?;
        Ok(Deliveries::new(consumer, messages))
    }

    /// Settles, over this bus's connection, a delivery pulled on another one.
    pub async fn settle(&self, at: &AckSubject, how: Settlement) {
        let payload = Bytes::from(how.kind());
        let settled = match how {
            Settlement::AckSync => self
                .client()
                .request(at.0.clone(), payload)
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
            _ => self
                .client()
                .publish(at.0.clone(), payload)
                .await
                .map_err(|e| e.to_string()),
        };
        if let Err(error) = settled {
            tracing::warn!(settlement = ?how, %error, "failed to settle a delivery");
        }
    }
}
