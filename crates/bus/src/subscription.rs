//! Typed core NATS subscriptions: notices (cancels, approval decisions, finished
//! tasks) and live progress, each read as its domain value; a message that is not one
//! comes out as a [`Malformed`], naming it. Nothing to settle: core NATS delivers at
//! most once, and every reader rechecks what a lost notice would have told it.

use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::{Stream, StreamExt};
use taskwire_protocol::TaskId;

use crate::Bus;
use crate::consumer::{Incoming, Malformed};
use crate::error::BusError;
use crate::messages::{ApprovalDecision, Backlog, CancelNotice, TaskNotice};
use crate::progress::ProgressEvents;

/// A core NATS subscription whose messages are `T`s. Dropping it unsubscribes.
pub struct Subscription<T> {
    subscriber: async_nats::Subscriber,
    _values: PhantomData<fn() -> T>,
}

impl<T: Incoming> Stream for Subscription<T> {
    type Item = Result<T, Malformed>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.subscriber.poll_next_unpin(cx).map(|m| {
            m.map(|m| {
                T::read(m.subject.as_str(), &m.payload).map_err(|error| Malformed {
                    subject: m.subject.to_string(),
                    payload: m.payload,
                    error,
                })
            })
        })
    }
}

impl Bus {
    /// The messages on `subject` (core NATS), read as `T`s, from now on.
    pub async fn subscribe<T: Incoming>(
        &self,
        subject: String,
    ) -> Result<Subscription<T>, BusError> {
        let subscriber = self
            .client()
            .subscribe(subject.clone())
            .await
            .map_err(|e| BusError::Subscribe {
                subject,
                reason: e.to_string(),
            })?;
        Ok(Subscription {
            subscriber,
            _values: PhantomData,
        })
    }

    /// Cancel notices for every task (a worker stops those it runs).
    pub async fn cancel_notices(&self) -> Result<Subscription<CancelNotice>, BusError> {
        self.subscribe(self.subjects().cancel_all()).await
    }

    /// The answers to `task`'s approval requests.
    pub async fn approval_decisions(
        &self,
        task: TaskId,
    ) -> Result<Subscription<ApprovalDecision>, BusError> {
        self.subscribe(self.subjects().approval(task)).await
    }

    /// The notice that `task` finished (its result, if any, is recorded).
    pub async fn finished_notices(
        &self,
        task: TaskId,
    ) -> Result<Subscription<TaskNotice>, BusError> {
        self.subscribe(self.subjects().finished(task)).await
    }

    /// Every task's finished notice.
    pub async fn all_finished_notices(&self) -> Result<Subscription<TaskNotice>, BusError> {
        self.subscribe(self.subjects().finished_all()).await
    }

    /// The backlog samples coordinators share (this one's own included).
    pub async fn backlog_samples(&self) -> Result<Subscription<Backlog>, BusError> {
        self.subscribe(self.subjects().backlog()).await
    }

    /// Every task's progress, live (core NATS: no replay, nothing to settle).
    pub async fn all_progress(&self) -> Result<Subscription<ProgressEvents>, BusError> {
        self.subscribe(self.subjects().progress_all()).await
    }
}
