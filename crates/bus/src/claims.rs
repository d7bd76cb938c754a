//! A worker's claims, batched: the claims its sessions ask for at once go to the
//! coordinators as one request ([`Bus::claim_batch`]), so a busy worker pays one
//! round trip, and the coordinator that answers one statement, for many claims. When
//! idle a batch holds one claim, sent as a plain claim: no delay, and the same request
//! as before batching. Coordinators of an earlier version serve no batches: then each
//! claim of a batch is asked alone.

use taskwire_protocol::ErrorCode;
use tokio_util::sync::CancellationToken;

use crate::batch::Batcher;
use crate::client::Bus;
use crate::error::RpcError;
use crate::messages::{ClaimRequest, ClaimVerdict};

/// Most claims in one request.
const MAX_BATCH: usize = 256;
/// Claim requests in flight at once: one, so that claims asked while it is answered
/// gather into the next.
const CONCURRENT_BATCHES: usize = 1;

/// One worker's claims, batched (cheap to clone).
#[derive(Clone)]
pub struct Claimer {
    batcher: Batcher<ClaimRequest, Result<ClaimVerdict, RpcError>>,
}

impl Claimer {
    /// Starts the batching loop on `bus`; it stops when `shutdown` fires.
    pub fn start(bus: Bus, shutdown: CancellationToken) -> Self {
        let batcher = Batcher::start(
            "claim batcher",
            MAX_BATCH,
            CONCURRENT_BATCHES,
            shutdown,
            move |claims: Vec<ClaimRequest>| {
                let bus = bus.clone();
                async move { ask(&bus, claims).await }
            },
        );
        Self { batcher }
    }

    /// Asks to run a task ([`Bus::claim`]), together with whatever other claims this
    /// worker is asking for at the same moment.
    pub async fn claim(&self, claim: ClaimRequest) -> Result<ClaimVerdict, RpcError> {
        self.batcher.call(claim).await.unwrap_or_else(|| {
            Err(RpcError::new(
                ErrorCode::Unavailable,
                "the worker is stopping: claim not sent",
            ))
        })
    }
}

/// The answers to `claims`, in order.
async fn ask(bus: &Bus, claims: Vec<ClaimRequest>) -> Vec<Result<ClaimVerdict, RpcError>> {
    if let [claim] = claims.as_slice() {
        return vec![bus.claim(claim).await];
    }
    match bus.claim_batch(&claims).await {
        Ok(Some(answers)) => answers,
        Ok(None) => futures::future::join_all(claims.iter().map(|c| bus.claim(c))).await,
        Err(e) => vec![Err(e); claims.len()],
    }
}
