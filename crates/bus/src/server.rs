//! The coordinators' side of worker requests: [`WorkerRequests`], which the coordinator
//! implements with domain types, and [`serve`], the one loop that receives, decodes,
//! dispatches, encodes and answers.
//!
//! Claims (`<P>.rpc.claim`, one per request, and `<P>.rpc.claims`, a worker's batch
//! per request) are answered in batches: whatever claims are waiting, from every
//! request, go to the handler together (so it can make one database round trip); each
//! request gets one reply. Other requests
//! (`<P>.worker.>`) are answered concurrently. Both subscriptions are in the queue
//! group `taskwire-coordinators`, so each request reaches one coordinator.
//!
//! Failure policy: a malformed request is answered `INVALID_ARGUMENT` naming the
//! envelope and field, an unknown method `UNIMPLEMENTED`, a handler's error with its
//! code; the loop keeps serving whatever a request holds. It ends at `shutdown`.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use taskwire_protocol::{AgentSpecBundle, ErrorCode, TaskId, pb};
use tokio_util::sync::CancellationToken;

use crate::client::Bus;
use crate::codec::{Envelope as _, decode};
use crate::error::CodecError;
use crate::error::{BusError, RpcError};
use crate::messages::{
    AgentSpecLookup, ApprovalAsk, ApprovalDecision, ApprovalRequest, ChildSubmit, ChildSubmitted,
    ClaimRequest, ClaimVerdict, SessionLoad, SessionSave, StoredSession, TaskLookup, TaskState,
};
use crate::methods::{self, Method};
use crate::replies;
use crate::subjects::COORDINATORS_GROUP;

/// Requests answered concurrently (claims aside).
const CONCURRENCY: usize = 64;
/// Most claims in one batch.
const MAX_CLAIM_BATCH: usize = 512;
/// Claim batches answered at once: one, so that claims arriving while its statement
/// runs gather into the next.
const CONCURRENT_CLAIM_BATCHES: usize = 1;

/// What a coordinator answers workers with.
#[async_trait]
pub trait WorkerRequests: Send + Sync + 'static {
    /// Answers a batch of claims, in order. `None` leaves one unanswered (its worker's
    /// request times out and the message is offered again later).
    async fn claim(&self, claims: Vec<ClaimRequest>)
    -> Vec<Option<Result<ClaimVerdict, RpcError>>>;
    async fn child_submit(&self, submit: ChildSubmit) -> Result<ChildSubmitted, RpcError>;
    async fn task_lookup(&self, lookup: TaskLookup) -> Result<TaskState, RpcError>;
    /// The agent spec bundle a dispatched request names by its digest.
    async fn agent_spec(&self, lookup: AgentSpecLookup) -> Result<AgentSpecBundle, RpcError>;
    async fn session_load(&self, load: SessionLoad) -> Result<Option<StoredSession>, RpcError>;
    async fn session_save(&self, save: SessionSave) -> Result<(), RpcError>;
    async fn approval_ask(&self, ask: ApprovalAsk) -> Result<(), RpcError>;
    async fn approval_check(
        &self,
        task: TaskId,
        request_id: String,
    ) -> Result<Option<ApprovalDecision>, RpcError>;
    async fn approval_timeout(
        &self,
        task: TaskId,
        request_id: String,
    ) -> Result<Option<ApprovalDecision>, RpcError>;
}

/// Serves worker requests with `handler` until `shutdown`.
pub async fn serve<H: WorkerRequests>(
    bus: Bus,
    handler: Arc<H>,
    shutdown: CancellationToken,
) -> Result<(), BusError> {
    let requests = subscribe(&bus, bus.subjects().rpc_all()).await?;
    let one = subscribe(&bus, bus.subjects().claim()).await?;
    let batches = subscribe(&bus, bus.subjects().claims()).await?;
    let claims = futures::stream::select(one.map(ClaimAsk::One), batches.map(ClaimAsk::Batch));
    let requests = requests
        .take_until(shutdown.clone().cancelled_owned())
        .for_each_concurrent(CONCURRENCY, |msg| {
            let (bus, handler) = (bus.clone(), handler.clone());
            async move {
                let Some(reply) = msg.reply.clone() else {
                    return;
                };
                let token = msg
                    .subject
                    .as_str()
                    .split_once(".worker.")
                    .map_or("", |(_, t)| t);
                let body = answer(handler.as_ref(), token, &msg.payload).await;
                if let Err(e) = bus.client().publish(reply, body).await {
                    tracing::warn!(error = %e, method = %token, "failed to answer a worker request");
                }
            }
        });
    let claims = claims
        .take_until(shutdown.cancelled_owned())
        .ready_chunks(MAX_CLAIM_BATCH)
        .for_each_concurrent(CONCURRENT_CLAIM_BATCHES, |batch| {
            let (bus, handler) = (bus.clone(), handler.clone());
            async move { answer_claims(&bus, handler.as_ref(), batch).await }
        });
    futures::join!(requests, claims);
    Ok(())
}

async fn subscribe(bus: &Bus, subject: String) -> Result<async_nats::Subscriber, BusError> {
    bus.client()
        .queue_subscribe(subject.clone(), COORDINATORS_GROUP.to_owned())
        .await
        .map_err(|e| BusError::Subscribe {
            subject,
            reason: e.to_string(),
        })
}

/// The reply to one request on `<P>.worker.<token>`.
async fn answer<H: WorkerRequests>(handler: &H, token: &str, payload: &[u8]) -> Bytes {
    let Some(method) = methods::of_worker_token(token) else {
        return replies::status_reply(&RpcError::new(
            ErrorCode::Unimplemented,
            format!("unknown worker request `{token}`"),
        ));
    };
    let refused = |e: crate::error::CodecError| {
        tracing::warn!(method = %method, error = %e, "malformed worker request");
        replies::status_reply(&RpcError::from(e))
    };
    match method {
        Method::ChildSubmit => match decode::<ChildSubmit>(payload) {
            Ok(r) => replies::encode_child_reply(&handler.child_submit(r).await),
            Err(e) => refused(e),
        },
        Method::TaskLookup => match decode::<TaskLookup>(payload) {
            Ok(r) => replies::encode_lookup_reply(&handler.task_lookup(r).await),
            Err(e) => refused(e),
        },
        Method::AgentSpec => match decode::<AgentSpecLookup>(payload) {
            Ok(r) => replies::encode_spec_reply(&handler.agent_spec(r).await),
            Err(e) => refused(e),
        },
        Method::SessionLoad => match decode::<SessionLoad>(payload) {
            Ok(r) => replies::encode_load_reply(&handler.session_load(r).await),
            Err(e) => refused(e),
        },
        Method::SessionSave => match decode::<SessionSave>(payload) {
            Ok(r) => replies::encode_save_reply(&handler.session_save(r).await),
            Err(e) => refused(e),
        },
        Method::ApprovalAsk | Method::ApprovalCheck | Method::ApprovalTimeout => {
            let answered = match decode::<ApprovalRequest>(payload) {
                Ok(ApprovalRequest::Ask(a)) => handler.approval_ask(a).await.map(|()| None),
                Ok(ApprovalRequest::Check { task, request_id }) => {
                    handler.approval_check(task, request_id).await
                }
                Ok(ApprovalRequest::TimedOut { task, request_id }) => {
                    handler.approval_timeout(task, request_id).await
                }
                Err(e) => return refused(e),
            };
            replies::encode_approval_reply(&answered)
        }
        // Never a `worker.` token: claims have a subject of their own.
        Method::Claim | Method::ClaimBatch => replies::status_reply(&RpcError::new(
            ErrorCode::Unimplemented,
            "claims are sent to the claim subject",
        )),
    }
}

/// A request for claims: one claim, or a worker's batch.
enum ClaimAsk {
    One(async_nats::Message),
    Batch(async_nats::Message),
}

/// A request as read: for each of its claims, why it is malformed, or `None` for one
/// handed to the handler (in order, with every request's claims).
struct Asked {
    reply: async_nats::Subject,
    batch: bool,
    refused: Vec<Option<RpcError>>,
}

/// Reads one request, moving its well-formed claims onto `claims`; `None` for one
/// without a reply subject (or a batch that cannot be read, which is refused here).
async fn read_ask(bus: &Bus, ask: ClaimAsk, claims: &mut Vec<ClaimRequest>) -> Option<Asked> {
    let (msg, batch) = match ask {
        ClaimAsk::One(msg) => (msg, false),
        ClaimAsk::Batch(msg) => (msg, true),
    };
    let reply = msg.reply.clone()?;
    let read: Vec<Result<ClaimRequest, RpcError>> = if batch {
        match crate::codec::decode_wire::<pb::ClaimBatch>("claim batch", &msg.payload) {
            Ok(wire) => wire
                .claims
                .into_iter()
                .map(|c| {
                    ClaimRequest::from_wire(c)
                        .map_err(|e| RpcError::from(CodecError::new("claim request", e)))
                })
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "malformed claim batch");
                let body = replies::status_reply(&RpcError::from(e));
                let _ = bus.client().publish(reply, body).await;
                return None;
            }
        }
    } else {
        vec![decode::<ClaimRequest>(&msg.payload).map_err(RpcError::from)]
    };
    let refused = read
        .into_iter()
        .map(|c| match c {
            Ok(claim) => {
                claims.push(claim);
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "malformed claim request");
                Some(e)
            }
        })
        .collect();
    Some(Asked {
        reply,
        batch,
        refused,
    })
}

/// Answers a batch of claim requests: malformed claims at once, the others as the
/// handler says, all of them in one call; one reply per request. A claim the handler
/// leaves unanswered is, in a worker's batch, answered `UNAVAILABLE` (its message is
/// offered again later, as after a timeout).
async fn answer_claims<H: WorkerRequests>(bus: &Bus, handler: &H, batch: Vec<ClaimAsk>) {
    let mut asks = Vec::with_capacity(batch.len());
    let mut claims = Vec::new();
    for ask in batch {
        if let Some(asked) = read_ask(bus, ask, &mut claims).await {
            asks.push(asked);
        }
    }
    let asked = claims.len();
    let verdicts = if claims.is_empty() {
        Vec::new()
    } else {
        handler.claim(claims).await
    };
    if verdicts.len() != asked {
        tracing::error!(
            asked,
            answered = verdicts.len(),
            "claim handler answered a different number of claims"
        );
    }
    let mut verdicts = verdicts.into_iter();
    for ask in asks {
        let answers: Vec<Option<Result<ClaimVerdict, RpcError>>> = ask
            .refused
            .into_iter()
            .map(|refused| match refused {
                None => verdicts.next().flatten(),
                Some(e) => Some(Err(e)),
            })
            .collect();
        let body = if ask.batch {
            let answers: Vec<_> = answers
                .into_iter()
                .map(|a| {
                    a.unwrap_or_else(|| {
                        Err(RpcError::new(
                            ErrorCode::Unavailable,
                            "the task was claimed twice at once: offer it again later",
                        ))
                    })
                })
                .collect();
            replies::encode_claim_batch_reply(&answers)
        } else {
            match answers.into_iter().next().flatten() {
                Some(verdict) => replies::encode_claim_reply(&verdict),
                None => continue,
            }
        };
        if let Err(e) = bus.client().publish(ask.reply, body).await {
            tracing::warn!(error = %e, "failed to answer a claim");
        }
    }
}
