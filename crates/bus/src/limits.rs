//! The key-value bucket where a deployment keeps its models' rate budgets, one key
//! per model, shared by every worker (see `taskwire_llm::limits`). The coordinator
//! creates it with the streams; workers read, watch and compare-and-set its keys.

use async_nats::jetstream::stream;

use crate::Subjects;

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
