//! Patches too large for a message: [`PatchRef`] names an object in the deployment's
//! patch bucket (a JetStream object store, see `taskwire_bus::patches`) with the
//! patch's size and SHA-256, so that the reader can tell a missing, truncated or
//! replaced object from the patch it was promised.
//!
//! Small patches stay inline (`workspace_patch`, `patch`); a message carries either the
//! text or a reference, never both. No patch, inline or not, is larger than
//! [`MAX_PATCH_BYTES`].

use serde::{Deserialize, Serialize};

use crate::{ProtocolError, error::PatchRefError, pb};

/// Largest patch taskwire carries at all, inline or by reference (64 MiB).
pub const MAX_PATCH_BYTES: u64 = 64 * 1024 * 1024;

/// Largest starting changes (`workspace_patch`) or checkpoint changes sent inline;
/// larger ones go by reference.
pub const INLINE_START_PATCH_BYTES: usize = 256 * 1024;

/// Largest result patch sent inline (with a transcript of up to 256 KiB, a result then
/// stays under NATS's default 1 MB message limit); larger ones go by reference.
pub const INLINE_RESULT_PATCH_BYTES: usize = 512 * 1024;

/// A patch kept in the patch bucket.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PatchRef {
    /// The object's name in the bucket.
    pub name: String,
    /// The patch's SHA-256, as 64 lowercase hex digits.
    pub sha256: String,
    /// The patch's length in bytes.
    pub size: u64,
}

impl PatchRef {
    /// Checks a reference from the wire; `field` names it in errors. An absent
    /// message, or one with every field empty, is no reference.
    pub fn from_wire(
        field: &'static str,
        r: Option<pb::PatchRef>,
    ) -> Result<Option<Self>, ProtocolError> {
        let Some(r) = r.filter(|r| *r != pb::PatchRef::default()) else {
            return Ok(None);
        };
        let r = Self {
            name: r.name,
            sha256: r.sha256,
            size: r.size,
        };
        r.check()
            .map_err(|reason| ProtocolError::invalid(field, reason.to_string()))?;
        Ok(Some(r))
    }

    /// Why this reference cannot name a patch, if it cannot.
    pub fn check(&self) -> Result<(), PatchRefError> {
        if self.name.is_empty() || self.name.len() > 255 {
            return Err(PatchRefError::NameLength);
        }
        if self.name.chars().any(char::is_control) {
            return Err(PatchRefError::NameControl);
        }
        if self.sha256.len() != 64
            || !self
                .sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(PatchRefError::Sha256);
        }
        if self.size > MAX_PATCH_BYTES {
            return Err(PatchRefError::TooLarge {
                size: self.size,
                limit: MAX_PATCH_BYTES,
            });
        }
        Ok(())
    }
}

impl std::fmt::Display for PatchRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "patch object `{}` ({} bytes, sha256 {})",
            self.name, self.size, self.sha256
        )
    }
}

impl From<&PatchRef> for pb::PatchRef {
    fn from(r: &PatchRef) -> Self {
        Self {
            name: r.name.clone(),
            sha256: r.sha256.clone(),
            size: r.size,
        }
    }
}

/// `Some(r)` on the wire, for an optional reference.
pub fn to_wire(r: Option<&PatchRef>) -> Option<pb::PatchRef> {
    r.map(pb::PatchRef::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(name: &str, sha256: &str, size: u64) -> Option<pb::PatchRef> {
        Some(pb::PatchRef {
            name: name.into(),
            sha256: sha256.into(),
            size,
        })
    }

    #[test]
    fn an_empty_reference_is_none_and_a_bad_one_names_the_field() {
        assert_eq!(PatchRef::from_wire("patch_ref", None), Ok(None));
        assert_eq!(
            PatchRef::from_wire("patch_ref", Some(pb::PatchRef::default())),
            Ok(None)
        );
        let good = "a".repeat(64);
        assert!(matches!(
            PatchRef::from_wire("patch_ref", wire("p/1", &good, 10)),
            Ok(Some(_))
        ));
        for (name, sha, size) in [
            ("", good.as_str(), 10),
            ("p/1", "ABC", 10),
            ("p/1", &"A".repeat(64), 10),
            ("p/\n1", good.as_str(), 10),
            ("p/1", good.as_str(), MAX_PATCH_BYTES + 1),
        ] {
            let err = PatchRef::from_wire("patch_ref", wire(name, sha, size)).expect_err("refused");
            assert_eq!(err.field(), Some("patch_ref"), "{err}");
        }
    }
}
