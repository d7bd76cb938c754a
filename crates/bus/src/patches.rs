//! The patch bucket: patches too large for a message (a parent's starting changes for
//! a child, a result's patch, a checkpoint's workspace changes) are kept in the
//! deployment's JetStream object store `<PREFIX>_PATCHES`, and the message carries a
//! [`PatchRef`] instead.
//!
//! The coordinator creates the bucket with its streams ([`bucket_config`], applied by
//! [`crate::ensure_streams`]), with a bounded max age and size; workers only put and
//! get objects. [`Patches::put`] names every object afresh (`<kind>/<owner>/<unique>`),
//! so a put never replaces, and never has to purge, an earlier object. [`Patches::get`]
//! checks the object against the reference (size, then SHA-256): a missing, expired,
//! truncated or replaced object is an error naming the reference, never a wrong patch.

use std::time::Duration;

use async_nats::jetstream::{self, object_store, stream};
use sha2::{Digest, Sha256};
use taskwire_protocol::{MAX_PATCH_BYTES, PatchRef};
use tokio::io::AsyncReadExt;

use crate::Subjects;

/// A patch could not be put in, or read from, the patch bucket.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patch is larger than any patch taskwire carries.
    #[error("the patch is {size} bytes, more than the limit of {MAX_PATCH_BYTES} bytes")]
    TooLarge { size: u64 },
    /// The reference names an object the bucket does not hold (never put, deleted, or
    /// expired after the bucket's max age).
    #[error("{reference} is not in bucket {bucket}: it was deleted or has expired")]
    Missing { reference: PatchRef, bucket: String },
    /// The object is not the patch the reference promised.
    #[error("{reference} in bucket {bucket} is corrupt: {reason}")]
    Corrupt {
        reference: PatchRef,
        bucket: String,
        reason: String,
    },
    /// NATS failed (the bucket does not exist yet, a timeout, a refused publish):
    /// trying again later may work.
    #[error("failed to {action} in bucket {bucket}: {reason}")]
    Unavailable {
        action: String,
        bucket: String,
        reason: String,
    },
}

impl PatchError {
    /// Whether trying again later may succeed (`false`: the object is gone or wrong).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }
}

/// Settings of the patch bucket, owned by the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketLimits {
    /// How long an object is kept: a reference older than this is an error.
    pub max_age: Duration,
    /// Most bytes the bucket holds; beyond it a put is refused.
    pub max_bytes: i64,
}

impl Default for BucketLimits {
    fn default() -> Self {
        Self {
            max_age: Duration::from_secs(7 * 24 * 3600),
            max_bytes: 1024 * 1024 * 1024,
        }
    }
}

/// The stream that backs the patch bucket, as `create_object_store` would make it, so
/// that the coordinator can create it or update its limits like its other streams.
pub fn bucket_config(s: &Subjects, limits: BucketLimits) -> stream::Config {
    stream::Config {
        name: s.patches_stream(),
        description: Some("taskwire patches too large for a message".to_owned()),
        subjects: s.patches_objects().to_vec(),
        max_age: limits.max_age,
        max_bytes: limits.max_bytes,
        storage: stream::StorageType::File,
        discard: stream::DiscardPolicy::New,
        allow_rollup: true,
        allow_direct: true,
        ..Default::default()
    }
}

/// Typed access to one deployment's patch bucket.
#[derive(Clone)]
pub struct Patches {
    js: jetstream::Context,
    bucket: String,
}

impl std::fmt::Debug for Patches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Patches")
            .field("bucket", &self.bucket)
            .finish()
    }
}

impl Patches {
    /// The bucket of the deployment named by `subjects`. Nothing is looked up until a
    /// put or a get: a worker that never carries a large patch never needs it.
    pub fn new(js: jetstream::Context, subjects: &Subjects) -> Self {
        Self {
            js,
            bucket: subjects.patches_bucket(),
        }
    }

    /// The bucket's name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    fn unavailable(&self, action: &str, reason: impl ToString) -> PatchError {
        PatchError::Unavailable {
            action: action.to_owned(),
            bucket: self.bucket.clone(),
            reason: reason.to_string(),
        }
    }

    async fn store(&self, action: &str) -> Result<object_store::ObjectStore, PatchError> {
        self.js
            .get_object_store(&self.bucket)
            .await
            .map_err(|e| self.unavailable(action, e))
    }

    /// Puts `patch` under a new name `<kind>/<owner>/<unique>` (say `result/<task id>`)
    /// and returns the reference to send instead of it.
    pub async fn put(&self, kind: &str, owner: &str, patch: &str) -> Result<PatchRef, PatchError> {
        let size = patch.len() as u64;
        if size > MAX_PATCH_BYTES {
            return Err(PatchError::TooLarge { size });
        }
        let reference = PatchRef {
            name: format!("{kind}/{owner}/{}", uuid::Uuid::now_v7().simple()),
            sha256: sha256_hex(patch.as_bytes()),
            size,
        };
        let action = format!("put {reference}");
        let store = self.store(&action).await?;
        store
            .put(reference.name.as_str(), &mut patch.as_bytes())
            .await
            .map_err(|e| self.unavailable(&action, e))?;
        tracing::debug!(bucket = %self.bucket, object = %reference.name, bytes = size, "patch stored");
        Ok(reference)
    }

    /// Reads the patch `reference` names, checked against its size and digest.
    pub async fn get(&self, reference: &PatchRef) -> Result<String, PatchError> {
        let action = format!("read {reference}");
        let corrupt = |reason: String| PatchError::Corrupt {
            reference: reference.clone(),
            bucket: self.bucket.clone(),
            reason,
        };
        let missing = || PatchError::Missing {
            reference: reference.clone(),
            bucket: self.bucket.clone(),
        };
        let store = self.store(&action).await?;
        let mut object = match store.get(reference.name.as_str()).await {
            Ok(o) => o,
            Err(e) if e.kind() == object_store::GetErrorKind::NotFound => return Err(missing()),
            Err(e) => return Err(self.unavailable(&action, e)),
        };
        let size = object.info().size as u64;
        if size != reference.size {
            return Err(corrupt(format!("the object holds {size} bytes")));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or_default());
        if let Err(e) = object.read_to_end(&mut bytes).await {
            return Err(match e.kind() {
                std::io::ErrorKind::InvalidData => corrupt(e.to_string()),
                _ => self.unavailable(&action, e),
            });
        }
        // Chunks that expired before the object's description are missing too.
        if bytes.is_empty() && reference.size > 0 {
            return Err(missing());
        }
        if bytes.len() as u64 != reference.size {
            return Err(corrupt(format!("{} bytes were read", bytes.len())));
        }
        let digest = sha256_hex(&bytes);
        if digest != reference.sha256 {
            return Err(corrupt(format!("its sha256 is {digest}")));
        }
        String::from_utf8(bytes).map_err(|_| corrupt("it is not UTF-8 text".to_owned()))
    }

    /// Deletes the object `reference` names (a coordinator's clean-up; workers may not).
    pub async fn delete(&self, reference: &PatchRef) -> Result<(), PatchError> {
        let action = format!("delete {reference}");
        let store = self.store(&action).await?;
        store
            .delete(reference.name.as_str())
            .await
            .map_err(|e| self.unavailable(&action, e))
    }
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}
