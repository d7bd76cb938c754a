//! [`AgentSpecBundle`] and [`AgentSpecDigest`]: how a dispatched request names its
//! agent spec.
//!
//! A task's resolved agent spec (a couple of KB, mostly its prompt) and the list of
//! agents its `task` tool may start (their descriptions, several hundred bytes) are the
//! same for every task of that agent while the registry is unchanged. The coordinator
//! stores each distinct bundle of the two once, keyed by the SHA-256 of its encoding,
//! and writes the digest in the task's row and dispatched request in their place; a
//! worker fetches a bundle it has not seen by its digest and keeps it.

use std::fmt;
use std::sync::Arc;

use prost::Message as _;
use sha2::{Digest as _, Sha256};

use crate::{ProtocolError, pb};

/// A resolved agent spec with the agents its `task` tool may start, shared by the
/// tasks dispatched with it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpecBundle {
    pub spec: Arc<pb::AgentSpec>,
    /// `(name, description)` of each agent the `task` tool may start.
    pub subagents: Arc<[(String, String)]>,
}

impl AgentSpecBundle {
    /// Its wire form (`AgentSpecBundle`).
    pub fn to_wire(&self) -> pb::AgentSpecBundle {
        pb::AgentSpecBundle {
            spec: Some(pb::AgentSpec::clone(&self.spec)),
            subagents: agent_refs(&self.subagents),
        }
    }

    /// The bundle in its wire form.
    pub fn from_wire(w: pb::AgentSpecBundle) -> Result<Self, ProtocolError> {
        Ok(Self {
            spec: Arc::new(w.spec.ok_or(ProtocolError::Missing("spec"))?),
            subagents: w
                .subagents
                .into_iter()
                .map(|a| (a.name, a.description))
                .collect(),
        })
    }

    /// Its encoding, as stored and hashed.
    pub fn encode(&self) -> Vec<u8> {
        encode(&self.spec, &self.subagents)
    }

    /// The bundle in `bytes` (as [`AgentSpecBundle::encode`] wrote them).
    pub fn decode(bytes: &[u8]) -> Result<Self, ProtocolError> {
        let wire = pb::AgentSpecBundle::decode(bytes).map_err(|e| ProtocolError::Decode {
            what: "agent spec bundle",
            reason: e.to_string(),
        })?;
        Self::from_wire(wire)
    }

    /// Its digest.
    pub fn digest(&self) -> AgentSpecDigest {
        AgentSpecDigest::of(&self.spec, &self.subagents)
    }

    /// Its digest and encoding, remembered for the last few bundles by identity: the
    /// tasks of one agent share their bundle's parts (see the coordinator's wire specs),
    /// so a bundle is encoded and hashed once, not once per task.
    pub fn encoded(&self) -> (AgentSpecDigest, Arc<[u8]>) {
        recent::encoded(self)
    }
}

/// The recently encoded bundles, by the identity of their parts.
mod recent {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use super::{AgentSpecBundle, AgentSpecDigest};

    /// As many bundles as a registry has agents, and then some.
    const KEPT: usize = 64;

    struct Encoded {
        /// Kept alive by the entry, so that the identity cannot be another bundle's.
        bundle: AgentSpecBundle,
        digest: AgentSpecDigest,
        bytes: Arc<[u8]>,
    }

    static RECENT: Mutex<VecDeque<Encoded>> = Mutex::new(VecDeque::new());

    pub(super) fn encoded(bundle: &AgentSpecBundle) -> (AgentSpecDigest, Arc<[u8]>) {
        let same = |e: &Encoded| {
            Arc::ptr_eq(&e.bundle.spec, &bundle.spec)
                && Arc::ptr_eq(&e.bundle.subagents, &bundle.subagents)
        };
        if let Some(e) = RECENT
            .lock()
            .expect("never poisoned")
            .iter()
            .find(|e| same(e))
        {
            return (e.digest, e.bytes.clone());
        }
        let bytes: Arc<[u8]> = bundle.encode().into();
        let digest = AgentSpecDigest::of_encoded(&bytes);
        let mut recent = RECENT.lock().expect("never poisoned");
        if recent.len() == KEPT {
            recent.pop_front();
        }
        recent.push_back(Encoded {
            bundle: bundle.clone(),
            digest,
            bytes: bytes.clone(),
        });
        (digest, bytes)
    }
}

fn agent_refs(subagents: &[(String, String)]) -> Vec<pb::AgentRef> {
    subagents
        .iter()
        .map(|(name, description)| pb::AgentRef {
            name: name.clone(),
            description: description.clone(),
        })
        .collect()
}

/// The `AgentSpecBundle` encoding of `spec` and `subagents`, without copying the spec.
fn encode(spec: &pb::AgentSpec, subagents: &[(String, String)]) -> Vec<u8> {
    let refs = agent_refs(subagents);
    let len = prost::encoding::message::encoded_len(1, spec)
        + prost::encoding::message::encoded_len_repeated(2, &refs);
    let mut buf = Vec::with_capacity(len);
    prost::encoding::message::encode(1, spec, &mut buf);
    for r in &refs {
        prost::encoding::message::encode(2, r, &mut buf);
    }
    buf
}

/// The SHA-256 of an encoded [`AgentSpecBundle`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentSpecDigest([u8; 32]);

impl AgentSpecDigest {
    /// The digest of the bundle of `spec` and `subagents`.
    pub fn of(spec: &pb::AgentSpec, subagents: &[(String, String)]) -> Self {
        Self::of_encoded(&encode(spec, subagents))
    }

    /// The digest of a bundle's encoding ([`AgentSpecBundle::encode`]).
    pub fn of_encoded(bundle: &[u8]) -> Self {
        Self(Sha256::digest(bundle).into())
    }

    /// A digest from the wire, naming `field` when it is not 32 bytes.
    pub fn parse_field(field: &'static str, bytes: &[u8]) -> Result<Self, ProtocolError> {
        <[u8; 32]>::try_from(bytes).map(Self).map_err(|_| {
            ProtocolError::invalid(
                field,
                format!("is {} bytes, not a 32-byte SHA-256", bytes.len()),
            )
        })
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for AgentSpecDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for AgentSpecDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AgentSpecDigest({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(prompt: &str, subagents: &[(&str, &str)]) -> AgentSpecBundle {
        AgentSpecBundle {
            spec: Arc::new(pb::AgentSpec {
                name: "general".into(),
                prompt: prompt.into(),
                ..Default::default()
            }),
            subagents: subagents
                .iter()
                .map(|(n, d)| ((*n).to_owned(), (*d).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn equal_bundles_have_one_digest_and_different_ones_another() {
        let one = bundle("a", &[("explore", "searches")]);
        assert_eq!(
            one.digest(),
            bundle("a", &[("explore", "searches")]).digest()
        );
        assert_ne!(
            one.digest(),
            bundle("b", &[("explore", "searches")]).digest()
        );
        assert_ne!(one.digest(), bundle("a", &[("explore", "reads")]).digest());
        assert_ne!(one.digest(), bundle("a", &[]).digest());
    }

    #[test]
    fn the_encoding_is_the_wire_messages_and_decodes_back() {
        let one = bundle("a", &[("explore", "searches"), ("general", "does")]);
        assert_eq!(one.encode(), one.to_wire().encode_to_vec());
        assert_eq!(AgentSpecBundle::decode(&one.encode()), Ok(one));
        assert!(AgentSpecBundle::decode(&[]).is_err(), "a bundle has a spec");
    }

    #[test]
    fn a_bundle_shared_by_tasks_is_encoded_once_and_an_equal_one_alike() {
        let shared = bundle("remembered", &[("explore", "searches")]);
        let (digest, bytes) = shared.encoded();
        assert_eq!(digest, shared.digest());
        assert_eq!(&bytes[..], &shared.encode()[..]);
        let (again, same) = shared.clone().encoded();
        assert_eq!(again, digest);
        assert!(Arc::ptr_eq(&bytes, &same), "the same parts: remembered");
        // Equal parts that are not the same ones are encoded again, to the same digest.
        let (equal, other) = bundle("remembered", &[("explore", "searches")]).encoded();
        assert_eq!(equal, digest);
        assert!(!Arc::ptr_eq(&bytes, &other));
        // Other parts, another digest.
        assert_ne!(bundle("changed", &[]).encoded().0, digest);
    }

    #[test]
    fn a_digest_of_the_wrong_length_is_refused_naming_its_field() {
        let err =
            AgentSpecDigest::parse_field("agent_spec_digest", &[1, 2, 3]).expect_err("3 bytes");
        assert!(err.to_string().contains("agent_spec_digest"), "{err}");
        assert!(err.to_string().contains("3 bytes"), "{err}");
        let d = bundle("a", &[]).digest();
        assert_eq!(
            AgentSpecDigest::parse_field("digest", d.as_bytes()).expect("32 bytes"),
            d
        );
    }
}
