//! [`AgentSpecs`]: the agent spec bundles a worker has fetched, by digest, and the
//! decode of a dispatched task request, which names its bundle by digest.
//!
//! The coordinator stores each distinct [`AgentSpecBundle`] (the resolved agent spec,
//! a couple of KB mostly of prompt, and the subagents its `task` tool may start) once
//! and dispatches requests with its [`AgentSpecDigest`] in their place. A worker asks
//! the coordinators for a bundle the first time a request names it
//! ([`Bus::agent_spec`], checked against the digest) and keeps it: a bundle never
//! changes under its digest, so the cache is never stale, and the tasks of one agent
//! share one copy. Tasks that arrive together naming a new bundle wait on one lookup.
//!
//! The tasks consumer yields [`Dispatched`] requests; [`AgentSpecs::resolve`] completes
//! one with its spec. A request with its spec inline (from a coordinator of an earlier version, or one
//! run with inline specs) is decoded as it is.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use taskwire_protocol::{AgentSpecBundle, AgentSpecDigest, ProtocolError, TaskRequest, pb};
use tokio::sync::OnceCell;

use crate::Bus;
use crate::codec::{Envelope as _, decode_wire};
use crate::consumer::Incoming;
use crate::error::{CodecError, RpcError};

/// Most specs kept. A registry holds a few dozen agents, and a reload makes new specs
/// only for the agents that changed; past this the cache starts over.
const MAX_SPECS: usize = 512;

type Slot = Arc<OnceCell<AgentSpecBundle>>;

/// A worker's agent specs by digest (cheap to clone; clones share the cache).
#[derive(Clone)]
pub struct AgentSpecs {
    bus: Bus,
    specs: Arc<Mutex<HashMap<AgentSpecDigest, Slot>>>,
}

/// A dispatched task request as pulled from the tasks stream: protobuf, with its agent
/// spec named by digest (or inline). [`AgentSpecs::resolve`] makes it a
/// [`TaskRequest`]; a message that is not protobuf is not one (the consumer yields it
/// as [`Malformed`](crate::consumer::Malformed)). Boxed: a worker holds it in the
/// future of a task until the spec is resolved.
#[derive(Debug, Clone)]
pub struct Dispatched(Box<pb::TaskRequest>);

impl Dispatched {
    fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        decode_wire::<pb::TaskRequest>(TaskRequest::NAME, bytes).map(|w| Self(Box::new(w)))
    }
}

impl Incoming for Dispatched {
    fn read(_subject: &str, payload: &[u8]) -> Result<Self, CodecError> {
        Self::decode(payload)
    }
}

/// Why a dispatched request could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// The message is not a valid request: it never will be.
    #[error(transparent)]
    Malformed(#[from] CodecError),
    /// Its spec could not be fetched; the error's code says whether it may be later.
    #[error("the agent spec {digest} could not be fetched: {error}")]
    Spec {
        digest: AgentSpecDigest,
        error: RpcError,
    },
}

impl DispatchError {
    /// `INVALID_ARGUMENT` for a malformed request, else the lookup's code (`NOT_FOUND`:
    /// no coordinator knows the spec; `UNAVAILABLE`: none answered).
    pub fn code(&self) -> taskwire_protocol::ErrorCode {
        match self {
            Self::Malformed(_) => taskwire_protocol::ErrorCode::InvalidArgument,
            Self::Spec { error, .. } => error.code(),
        }
    }
}

impl std::fmt::Debug for AgentSpecs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSpecs")
            .field("cached", &self.cached())
            .finish()
    }
}

impl AgentSpecs {
    pub fn new(bus: Bus) -> Self {
        Self {
            bus,
            specs: Arc::default(),
        }
    }

    /// The task request in a dispatched message, with its agent spec.
    pub async fn decode_request(&self, bytes: &[u8]) -> Result<TaskRequest, DispatchError> {
        self.resolve(Dispatched::decode(bytes)?).await
    }

    /// The task request a pulled dispatch holds, with its agent spec.
    pub async fn resolve(&self, dispatched: Dispatched) -> Result<TaskRequest, DispatchError> {
        let malformed = |e: ProtocolError| CodecError::new(TaskRequest::NAME, e);
        let wire = *dispatched.0;
        if wire.agent_spec.is_some() {
            return Ok(TaskRequest::try_from(wire).map_err(malformed)?);
        }
        if wire.agent_spec_digest.is_empty() {
            return Err(malformed(ProtocolError::Missing("agent_spec")).into());
        }
        let digest = AgentSpecDigest::parse_field("agent_spec_digest", &wire.agent_spec_digest)
            .map_err(malformed)?;
        let bundle = self
            .get(digest)
            .await
            .map_err(|error| DispatchError::Spec { digest, error })?;
        Ok(TaskRequest::from_dispatched(wire, &bundle).map_err(malformed)?)
    }

    /// The bundle named by `digest`: kept, or fetched once (concurrent callers wait on
    /// the same lookup; a failed one is tried again by the next caller).
    pub async fn get(&self, digest: AgentSpecDigest) -> Result<AgentSpecBundle, RpcError> {
        let slot = {
            let mut specs = self
                .specs
                .lock()
                .expect("spec cache lock is never poisoned");
            if specs.len() >= MAX_SPECS && !specs.contains_key(&digest) {
                specs.clear();
            }
            specs.entry(digest).or_default().clone()
        };
        let fetched = slot
            .get_or_try_init(|| async {
                tracing::debug!(agent_spec = %digest, "fetching an agent spec");
                self.bus.agent_spec(digest).await
            })
            .await
            .cloned();
        if fetched.is_err() {
            // A failed lookup keeps no room; the next request naming it asks again.
            let mut specs = self
                .specs
                .lock()
                .expect("spec cache lock is never poisoned");
            if specs
                .get(&digest)
                .is_some_and(|s| Arc::ptr_eq(s, &slot) && s.get().is_none())
            {
                specs.remove(&digest);
            }
        }
        fetched
    }

    /// How many specs are kept (fetched or being fetched).
    pub fn cached(&self) -> usize {
        self.specs
            .lock()
            .expect("spec cache lock is never poisoned")
            .len()
    }
}
