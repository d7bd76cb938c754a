//! The key-value bucket where a deployment keeps its models' rate budgets, one key
//! per model, shared by every worker (see `taskwire_llm::limits`). The coordinator
//! creates it with the streams; workers read, watch and compare-and-set its keys
//! through [`LimitsBucket`], by model: the keys are this module's business.

use async_nats::jetstream::{kv, stream};
use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};

use crate::error::BusError;
use crate::{Bus, Subjects};

/// The stream behind the limits bucket, as `create_key_value` would make it (one
/// value per key, direct gets, in memory: a budget is worth keeping only while the
/// fleet runs), so that the coordinator creates it like its other streams.
pub fn bucket_config(s: &Subjects) -> stream::Config {
    stream::Config {
        name: s.limits_stream(),
        description: Some("taskwire rate budgets of the models".to_owned()),
        subjects: vec![s.limits_keys()],
        max_messages_per_subject: 1,
        storage: stream::StorageType::Memory,
        discard: stream::DiscardPolicy::New,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        ..Default::default()
    }
}

/// One model's value in the limits bucket, at a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitsEntry {
    pub model: String,
    pub value: Bytes,
    pub revision: u64,
    /// The key was deleted or purged: the model has no value.
    pub deleted: bool,
}

impl LimitsEntry {
    /// `None` for a key that names no model (not made by [`key_of`]).
    fn of(entry: kv::Entry) -> Option<Self> {
        Some(Self {
            model: model_of(&entry.key)?,
            deleted: matches!(
                entry.operation,
                kv::Operation::Delete | kv::Operation::Purge
            ),
            value: entry.value,
            revision: entry.revision,
        })
    }
}

/// The deployment's limits bucket, opened.
#[derive(Clone)]
pub struct LimitsBucket {
    kv: kv::Store,
    bucket: String,
}

impl std::fmt::Debug for LimitsBucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LimitsBucket")
            .field("bucket", &self.bucket)
            .finish()
    }
}

impl Bus {
    /// Opens the limits bucket (a coordinator creates it with the streams).
    pub async fn limits_bucket(&self) -> Result<LimitsBucket, BusError> {
        let bucket = self.subjects().limits_bucket();
        let kv = self
            .js()
            .get_key_value(&bucket)
            .await
            .map_err(|e| BusError::Request {
                action: format!("open the limits bucket {bucket}"),
                reason: e.to_string(),
            })?;
        Ok(LimitsBucket { kv, bucket })
    }
}

impl LimitsBucket {
    /// Every model's value, then every change, as they come (keys that name no model
    /// are skipped).
    pub async fn watch(
        &self,
    ) -> Result<BoxStream<'static, Result<LimitsEntry, BusError>>, BusError> {
        let bucket = self.bucket.clone();
        let entries = self.kv.watch_all().await.map_err(|e| BusError::Request {
            action: format!("watch the limits bucket {bucket}"),
            reason: e.to_string(),
        })?;
        Ok(entries
            .filter_map(move |entry| {
                let entry = match entry {
                    Ok(entry) => LimitsEntry::of(entry).map(Ok),
                    Err(e) => Some(Err(BusError::Request {
                        action: format!("watch the limits bucket {bucket}"),
                        reason: e.to_string(),
                    })),
                };
                std::future::ready(entry)
            })
            .boxed())
    }

    /// `model`'s value now; `None` when it has never had one.
    pub async fn get(&self, model: &str) -> Result<Option<LimitsEntry>, BusError> {
        let entry = self
            .kv
            .entry(key_of(model))
            .await
            .map_err(|e| BusError::Request {
                action: format!("read the budget of {model}"),
                reason: e.to_string(),
            })?;
        Ok(entry.and_then(LimitsEntry::of))
    }

    /// Sets `model`'s first value; its revision. Fails when it has one already.
    pub async fn create(&self, model: &str, value: Bytes) -> Result<u64, BusError> {
        self.kv
            .create(key_of(model), value)
            .await
            .map_err(|e| BusError::Request {
                action: format!("create the budget of {model}"),
                reason: e.to_string(),
            })
    }

    /// Replaces `model`'s value if it is still at `revision`; the new revision. Fails
    /// when another writer changed it first.
    pub async fn update(&self, model: &str, value: Bytes, revision: u64) -> Result<u64, BusError> {
        self.kv
            .update(key_of(model), value, revision)
            .await
            .map_err(|e| BusError::Request {
                action: format!("update the budget of {model}"),
                reason: e.to_string(),
            })
    }
}

/// The key of `model` in the bucket: letters, digits, `-`, `_` and `/` as they are,
/// every other byte as `=XX` (keys allow few characters, and a `.` would split one).
pub fn key_of(model: &str) -> String {
    let mut key = String::with_capacity(model.len());
    for byte in model.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'/') {
            key.push(char::from(byte));
        } else {
            key.push_str(&format!("={byte:02X}"));
        }
    }
    key
}

/// The model of a key made by [`key_of`]; `None` for a key it did not make.
pub fn model_of(key: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(key.len());
    let mut rest = key.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        if first == b'=' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(first);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_become_keys_and_back() {
        for model in ["gpt-4.1", "anthropic/claude-sonnet-4", "llama3:8b", "m"] {
            let key = key_of(model);
            assert!(
                key.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_/=".contains(&b)),
                "{key}"
            );
            assert_eq!(model_of(&key).as_deref(), Some(model));
        }
        assert_eq!(key_of("gpt-4.1"), "gpt-4=2E1");
    }
}
