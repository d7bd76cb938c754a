//! The worker's claims, several to a request: claims made while earlier requests are
//! on their way go together in the next one (as many as are waiting, at most
//! [`MAX_BATCH`]), so a burst of deliveries costs one request and one reply rather
//! than one of each per task. An idle worker's claim goes at once, alone: batching
//! never holds a claim back.

use futures::StreamExt;
use taskwire_bus::messages::{ClaimRequest, ClaimVerdict};
use taskwire_bus::{Bus, RpcError};
use taskwire_protocol::ErrorCode;
use tokio::sync::{mpsc, oneshot};

/// Most claims in one request.
const MAX_BATCH: usize = 64;
/// Requests on their way at once.
const IN_FLIGHT: usize = 4;

type Answer = Result<ClaimVerdict, RpcError>;

/// A handle to the claiming loop; the loop ends when the last handle is dropped.
pub struct Claims {
    tx: mpsc::Sender<(ClaimRequest, oneshot::Sender<Answer>)>,
}

impl Claims {
    /// Starts the loop that sends this worker's claims through `bus`.
    pub fn start(bus: Bus) -> Self {
        let (tx, rx) = mpsc::channel::<(ClaimRequest, oneshot::Sender<Answer>)>(4 * MAX_BATCH);
        tokio::spawn(
            tokio_stream::wrappers::ReceiverStream::new(rx)
                .ready_chunks(MAX_BATCH)
                .for_each_concurrent(IN_FLIGHT, move |batch| {
                    let bus = bus.clone();
                    async move {
                        let (claims, replies): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
                        let answers = bus.claim_batch(&claims).await;
                        for (reply, answer) in replies.into_iter().zip(answers) {
                            let _ = reply.send(answer);
                        }
                    }
                }),
        );
        Self { tx }
    }

    /// Asks to run a task, as [`Bus::claim`] does.
    pub async fn claim(&self, claim: ClaimRequest) -> Answer {
        let (reply, answer) = oneshot::channel();
        let stopped = || RpcError::new(ErrorCode::Unavailable, "the worker's claim loop stopped");
        self.tx.send((claim, reply)).await.map_err(|_| stopped())?;
        answer.await.unwrap_or_else(|_| Err(stopped()))
    }
}
