//! A provider's prompt cache, simulated so that a test sees real hits and misses: a
//! request's prompt is a sequence of blocks (the tools, the system prompt, then each
//! message's content blocks, in the order the provider reads them), and a hit is a
//! prefix of whole blocks, byte for byte, that an earlier request stored.
//!
//! - Anthropic: a request stores the prefixes that end at its `cache_control`
//!   breakpoints; a lookup finds the longest stored prefix that ends at any block
//!   boundary up to its last breakpoint (the API checks earlier boundaries too). A
//!   request without breakpoints neither reads nor writes.
//! - OpenAI-compatible and Responses: a request with a `prompt_cache_key` stores every
//!   prefix and reads the longest stored one; without a key, nothing is cached. The
//!   blocks of a Responses request are its tools, its `instructions` and its `input`
//!   items.
//!
//! Tokens are bytes / 4 (the marker `cache_control` itself is not part of a block).

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

use super::WireFormat;

/// Input tokens of a request: all of them, those read from the cache, and those
/// written to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheUsage {
    pub input: u64,
    pub read: u64,
    pub written: u64,
}

#[derive(Debug, Default)]
pub(super) struct PromptCache {
    /// Hashes of the stored prefixes, with the cache key (OpenAI) they were stored under.
    stored: HashSet<(String, u64)>,
}

/// One block: its canonical bytes and whether it is a breakpoint.
struct Block {
    bytes: Vec<u8>,
    breakpoint: bool,
}

impl PromptCache {
    /// Looks `raw` up and stores what it asks to; its usage.
    pub(super) fn see(&mut self, format: WireFormat, raw: &Value) -> CacheUsage {
        let body_tokens = (raw.to_string().len() as u64).div_ceil(4);
        let (key, blocks, store_all) = match format {
            WireFormat::Anthropic => (String::new(), anthropic_blocks(raw), false),
            WireFormat::OpenAi | WireFormat::Responses => {
                let Some(key) = raw["prompt_cache_key"].as_str() else {
                    return CacheUsage {
                        input: body_tokens,
                        ..CacheUsage::default()
                    };
                };
                let blocks = if format == WireFormat::OpenAi {
                    openai_blocks(raw)
                } else {
                    responses_blocks(raw)
                };
                (key.to_owned(), blocks, true)
            }
        };
        let last = if store_all {
            blocks.len().checked_sub(1)
        } else {
            blocks.iter().rposition(|b| b.breakpoint)
        };
        let Some(last) = last else {
            return CacheUsage {
                input: body_tokens,
                ..CacheUsage::default()
            };
        };
        let mut hasher = DefaultHasher::new();
        let mut lengths = Vec::with_capacity(last + 1);
        let mut hashes = Vec::with_capacity(last + 1);
        let mut bytes = 0u64;
        for block in &blocks[..=last] {
            block.bytes.hash(&mut hasher);
            bytes += block.bytes.len() as u64;
            hashes.push(hasher.finish());
            lengths.push(bytes);
        }
        let hit = (0..=last)
            .rev()
            .find(|&i| self.stored.contains(&(key.clone(), hashes[i])));
        let read_bytes = hit.map_or(0, |i| lengths[i]);
        for (i, block) in blocks[..=last].iter().enumerate() {
            if store_all || block.breakpoint {
                self.stored.insert((key.clone(), hashes[i]));
            }
        }
        let read = read_bytes.div_ceil(4);
        let written = match format {
            // Anthropic writes the prefix up to the last breakpoint past what it read.
            WireFormat::Anthropic => (lengths[last] - read_bytes).div_ceil(4),
            WireFormat::OpenAi | WireFormat::Responses => 0,
        };
        CacheUsage {
            input: body_tokens.max(read + written),
            read,
            written,
        }
    }
}

fn canonical(value: &Value) -> Vec<u8> {
    let mut value = value.clone();
    if let Value::Object(map) = &mut value {
        map.remove("cache_control");
    }
    value.to_string().into_bytes()
}

fn block(value: &Value, prefix: &str) -> Block {
    let mut bytes = prefix.as_bytes().to_vec();
    bytes.extend(canonical(value));
    Block {
        bytes,
        breakpoint: value.get("cache_control").is_some(),
    }
}

fn anthropic_blocks(raw: &Value) -> Vec<Block> {
    let mut blocks = Vec::new();
    for tool in raw["tools"].as_array().into_iter().flatten() {
        blocks.push(block(tool, "tool:"));
    }
    match &raw["system"] {
        Value::String(text) => blocks.push(block(&Value::String(text.clone()), "system:")),
        Value::Array(parts) => blocks.extend(parts.iter().map(|p| block(p, "system:"))),
        _ => {}
    }
    for message in raw["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or_default();
        match &message["content"] {
            Value::Array(parts) => blocks.extend(parts.iter().map(|p| block(p, role))),
            other => blocks.push(block(other, role)),
        }
    }
    blocks
}

fn openai_blocks(raw: &Value) -> Vec<Block> {
    let tools = raw["tools"].as_array().into_iter().flatten();
    let messages = raw["messages"].as_array().into_iter().flatten();
    tools.chain(messages).map(|v| block(v, "")).collect()
}

fn responses_blocks(raw: &Value) -> Vec<Block> {
    let mut blocks: Vec<Block> = raw["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|tool| block(tool, "tool:"))
        .collect();
    if let Some(instructions) = raw.get("instructions") {
        blocks.push(block(instructions, "system:"));
    }
    match &raw["input"] {
        Value::Array(items) => blocks.extend(items.iter().map(|item| block(item, ""))),
        other => blocks.push(block(other, "user:")),
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(turns: usize, breakpoint: bool) -> Value {
        let mut messages =
            vec![json!({"role": "user", "content": [{"type": "text", "text": "x".repeat(400)}]})];
        for i in 0..turns {
            messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": format!("step {i}")}]}));
            messages.push(
                json!({"role": "user", "content": [{"type": "text", "text": format!("more {i}")}]}),
            );
        }
        if breakpoint {
            let last = messages
                .last_mut()
                .and_then(|m| m["content"].as_array_mut())
                .and_then(|c| c.last_mut());
            if let Some(last) = last {
                last["cache_control"] = json!({"type": "ephemeral"});
            }
        }
        let mut system = json!({"type": "text", "text": "be brief"});
        if breakpoint {
            system["cache_control"] = json!({"type": "ephemeral"});
        }
        json!({"model": "m", "system": [system], "messages": messages})
    }

    #[test]
    fn a_growing_conversation_reads_what_the_step_before_wrote() {
        let mut cache = PromptCache::default();
        let first = cache.see(WireFormat::Anthropic, &request(0, true));
        assert_eq!(first.read, 0);
        assert!(first.written > 100, "{first:?}");
        let second = cache.see(WireFormat::Anthropic, &request(1, true));
        assert!(second.read >= first.written, "{first:?} {second:?}");
        assert!(second.written > 0 && second.written < 20, "{second:?}");
    }

    #[test]
    fn a_changed_prefix_or_no_breakpoint_misses() {
        let mut cache = PromptCache::default();
        cache.see(WireFormat::Anthropic, &request(1, true));
        let mut changed = request(2, true);
        changed["system"][0]["text"] = json!("be verbose");
        assert_eq!(cache.see(WireFormat::Anthropic, &changed).read, 0);
        let mut plain = PromptCache::default();
        plain.see(WireFormat::Anthropic, &request(0, false));
        let none = plain.see(WireFormat::Anthropic, &request(1, false));
        assert_eq!((none.read, none.written), (0, 0));
    }

    fn responses_request(key: Option<&str>, turns: usize) -> Value {
        let mut input = vec![
            json!({"role": "user", "content": [{"type": "input_text", "text": "x".repeat(400)}]}),
        ];
        for i in 0..turns {
            input.push(json!({"type": "function_call", "call_id": format!("c{i}"), "name": "ls", "arguments": "{}"}));
            input.push(json!({"type": "function_call_output", "call_id": format!("c{i}"), "output": "a.txt"}));
        }
        let mut raw = json!({"model": "m", "instructions": "be brief", "input": input,
            "tools": [{"type": "function", "name": "ls", "parameters": {"type": "object"}}]});
        if let Some(key) = key {
            raw["prompt_cache_key"] = key.into();
        }
        raw
    }

    #[test]
    fn a_responses_conversation_with_a_key_reads_its_earlier_prefix() {
        let mut cache = PromptCache::default();
        let first = cache.see(WireFormat::Responses, &responses_request(Some("s1"), 0));
        assert_eq!((first.read, first.written), (0, 0));
        let second = cache.see(WireFormat::Responses, &responses_request(Some("s1"), 1));
        assert!(
            second.read > 100 && second.read < second.input,
            "{second:?}"
        );
        let other_key = cache.see(WireFormat::Responses, &responses_request(Some("s2"), 1));
        assert_eq!(other_key.read, 0);
        // New instructions: only the tools before them are read.
        let mut changed = responses_request(Some("s1"), 2);
        changed["instructions"] = json!("be verbose");
        let tools = format!("tool:{}", changed["tools"][0]).len() as u64;
        assert_eq!(
            cache.see(WireFormat::Responses, &changed).read,
            tools.div_ceil(4)
        );
        let keyless = cache.see(WireFormat::Responses, &responses_request(None, 1));
        assert_eq!(keyless.read, 0);
    }
}
