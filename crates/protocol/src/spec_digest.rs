//! [`AgentSpecDigest`]: how a dispatched request names its agent spec.
//!
//! A task's resolved agent spec (a couple of KB, mostly its prompt) is the same for
//! every task of that agent while the registry is unchanged. The coordinator stores
//! each spec once, keyed by the SHA-256 of its encoding, and writes the digest in the
//! task's row and dispatched request in place of the spec; a worker fetches a spec it
//! has not seen by its digest and keeps it.

use std::fmt;

use prost::Message as _;
use sha2::{Digest as _, Sha256};

use crate::{ProtocolError, pb};

/// The SHA-256 of an encoded [`pb::AgentSpec`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentSpecDigest([u8; 32]);

impl AgentSpecDigest {
    /// The digest of `spec`.
    pub fn of(spec: &pb::AgentSpec) -> Self {
        Self(Sha256::digest(spec.encode_to_vec()).into())
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

    /// Whether `spec` is the one this digest names.
    pub fn matches(&self, spec: &pb::AgentSpec) -> bool {
        Self::of(spec) == *self
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

    fn spec(prompt: &str) -> pb::AgentSpec {
        pb::AgentSpec {
            name: "general".into(),
            prompt: prompt.into(),
            ..Default::default()
        }
    }

    #[test]
    fn equal_specs_have_one_digest_and_different_ones_another() {
        assert_eq!(
            AgentSpecDigest::of(&spec("a")),
            AgentSpecDigest::of(&spec("a"))
        );
        assert_ne!(
            AgentSpecDigest::of(&spec("a")),
            AgentSpecDigest::of(&spec("b"))
        );
        assert!(AgentSpecDigest::of(&spec("a")).matches(&spec("a")));
        assert!(!AgentSpecDigest::of(&spec("a")).matches(&spec("b")));
    }

    #[test]
    fn a_digest_of_the_wrong_length_is_refused_naming_its_field() {
        let err =
            AgentSpecDigest::parse_field("agent_spec_digest", &[1, 2, 3]).expect_err("3 bytes");
        assert!(err.to_string().contains("agent_spec_digest"), "{err}");
        assert!(err.to_string().contains("3 bytes"), "{err}");
        let d = AgentSpecDigest::of(&spec("a"));
        assert_eq!(
            AgentSpecDigest::parse_field("digest", d.as_bytes()).expect("32 bytes"),
            d
        );
    }
}
