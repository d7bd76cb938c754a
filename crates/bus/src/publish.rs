//! Typed publishes: every envelope and notice the coordinator and the workers send,
//! each to its subject, encoded by the [codec](crate::codec), with its headers from
//! [`headers::build`] (the only place headers are made).
//!
//! JetStream publishes (`send_*`) return the ack future, so callers can pipeline a
//! batch and await the acks together; `publish_*` await the ack themselves. Core NATS
//! notices (`notify_*`) are fire-and-forget: losing one is covered by rechecks.

use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::message::PublishMessage;
use bytes::Bytes;
use taskwire_protocol::{TaskId, TaskResult, pb};

use crate::client::Bus;
use crate::codec::encode;
use crate::error::BusError;
use crate::headers::{self, Outgoing};
use crate::messages::{ApprovalDecision, Backlog, CancelNotice, DeadLetter};

impl Bus {
    /// Sends one dispatch (an outbox row: a `TaskRequest` encoded at submit) to the
    /// tasks stream, deduplicated by `msg_id`, with the task's trace context.
    pub async fn send_dispatch(
        &self,
        subject: String,
        payload: Bytes,
        msg_id: &str,
        trace_id: &str,
    ) -> Result<PublishAckFuture, BusError> {
        let out = Outgoing {
            msg_id: Some(msg_id),
            trace_id: Some(trace_id),
            task: Some(msg_id),
        };
        self.send_js(subject, &out, payload).await
    }

    /// Sends one progress event of `task` to the events stream.
    pub async fn send_progress(
        &self,
        task: TaskId,
        progress: &pb::TaskProgress,
    ) -> Result<PublishAckFuture, BusError> {
        let subject = self.subjects().progress(task);
        self.send_js(subject, &Outgoing::default(), encode(progress))
            .await
    }

    /// Stores an attempt's result in the results stream (deduplicated per claim) and
    /// waits until JetStream has it.
    pub async fn publish_result(&self, result: &TaskResult) -> Result<(), BusError> {
        let subject = self.subjects().result(result.task_id);
        let msg_id = format!("{}:{}", result.task_id, result.claim_epoch.0);
        let out = Outgoing {
            msg_id: Some(&msg_id),
            ..Outgoing::default()
        };
        let ack = self.send_js(subject.clone(), &out, encode(result)).await?;
        ack.await.map(|_| ()).map_err(|e| BusError::Publish {
            subject,
            reason: e.to_string(),
        })
    }

    /// Stores a dead letter and waits until JetStream has it.
    pub async fn publish_dead_letter(&self, letter: &DeadLetter) -> Result<(), BusError> {
        let subject = self.subjects().dead_letters();
        let ack = self
            .send_js(subject.clone(), &Outgoing::default(), encode(letter))
            .await?;
        ack.await.map(|_| ()).map_err(|e| BusError::Publish {
            subject,
            reason: e.to_string(),
        })
    }

    /// Tells watchers and waiting parents that `task` is finished (its result, if any,
    /// is recorded).
    pub async fn notify_finished(&self, task: TaskId) -> Result<(), BusError> {
        let subject = self.subjects().finished(task);
        self.finished_here().notify_one();
        self.publish_core(subject, &Outgoing::default(), Bytes::new())
            .await
    }

    /// Shares a sample of the fleet's backlog with the other coordinators.
    pub async fn share_backlog(&self, backlog: &Backlog) -> Result<(), BusError> {
        let subject = self.subjects().backlog();
        self.publish_core(subject, &Outgoing::default(), encode(backlog))
            .await
    }

    /// Tells the worker running the task to stop.
    pub async fn notify_cancel(&self, notice: &CancelNotice) -> Result<(), BusError> {
        let subject = self.subjects().cancel(notice.task);
        self.publish_core(subject, &Outgoing::default(), encode(notice))
            .await
    }

    /// Sends an approval's answer to the asking task's worker.
    pub async fn publish_decision(&self, decision: &ApprovalDecision) -> Result<(), BusError> {
        let subject = self.subjects().approval(decision.task);
        self.publish_core(subject, &Outgoing::default(), encode(decision))
            .await
    }

    async fn send_js(
        &self,
        subject: String,
        out: &Outgoing<'_>,
        payload: Bytes,
    ) -> Result<PublishAckFuture, BusError> {
        let mut msg = PublishMessage::build().payload(payload);
        if let Some(h) = headers::build(out) {
            msg = msg.headers(h);
        }
        self.js()
            .send_publish(subject.clone(), msg)
            .await
            .map_err(|e| BusError::Publish {
                subject,
                reason: e.to_string(),
            })
    }

    async fn publish_core(
        &self,
        subject: String,
        out: &Outgoing<'_>,
        payload: Bytes,
    ) -> Result<(), BusError> {
        let sent = match headers::build(out) {
            Some(h) => {
                self.client()
                    .publish_with_headers(subject.clone(), h, payload)
                    .await
            }
            None => self.client().publish(subject.clone(), payload).await,
        };
        sent.map_err(|e| BusError::Publish {
            subject,
            reason: e.to_string(),
        })
    }
}
