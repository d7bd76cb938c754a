//! Assembles a streamed answer from its chunks.
//!
//! Text arrives as content deltas. A tool call arrives as a first chunk with its
//! `index`, `id` and function name, then fragments of the `arguments` string under the
//! same `index`; fragments are concatenated in arrival order. Usage arrives in a chunk
//! of its own, usually the last before `[DONE]`. Event names are not used: every
//! event is a `data:` line holding a chunk, or the `[DONE]` sentinel.

use std::collections::BTreeMap;

use super::wire::{self, Chunk, ToolCallChunk};
use crate::error::DecodeError;
use crate::transport::{Decoder, EventError, Pushed};
use crate::types::{ChatResponse, ToolCall, Usage};

/// The answer so far.
#[derive(Debug, Default)]
pub(super) struct StreamAssembler {
    text: String,
    /// By the `index` the server gave each call, which orders them.
    calls: BTreeMap<usize, PartialCall>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    done: bool,
    /// The answering model was recorded (every chunk names it).
    model_seen: bool,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

impl StreamAssembler {
    /// Folds one chunk in; returns the assistant text it carried, if any.
    pub(super) fn push(&mut self, chunk: Chunk) -> Option<String> {
        if let Some(model) = chunk.model.as_deref().filter(|_| !self.model_seen) {
            self.model_seen = true;
            crate::spans::response_model(model);
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        let mut text = None;
        // One answer is asked for (n = 1); other choices would be a server bug.
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(content) = delta.content.filter(|c| !c.is_empty()) {
                self.text.push_str(&content);
                text.get_or_insert_with(String::new).push_str(&content);
            }
            for call in delta.tool_calls.unwrap_or_default() {
                self.push_call(call);
            }
        }
        text
    }

    fn push_call(&mut self, chunk: ToolCallChunk) {
        let index = chunk
            .index
            .unwrap_or_else(|| self.index_without_one(chunk.id.as_deref()));
        let call = self.calls.entry(index).or_default();
        if call.id.is_none() {
            call.id = chunk.id.filter(|id| !id.is_empty());
        }
        let Some(function) = chunk.function else {
            return;
        };
        if let Some(name) = function.name.filter(|n| !n.is_empty()) {
            // Most servers send the name once; some repeat it in every chunk, and a
            // few split it. Repeats are dropped, pieces appended.
            if call.name != name {
                call.name.push_str(&name);
            }
        }
        if let Some(arguments) = function.arguments {
            call.arguments.push_str(&arguments);
        }
    }

    /// Servers that omit `index` send one call at a time: a chunk with a new id starts
    /// the next call, any other chunk continues the last one.
    fn index_without_one(&self, id: Option<&str>) -> usize {
        let last = self.calls.iter().next_back();
        match (last, id) {
            (None, _) => 0,
            (Some((&index, call)), Some(id)) if call.id.as_deref() != Some(id) => index + 1,
            (Some((&index, _)), _) => index,
        }
    }
}

impl Decoder for StreamAssembler {
    fn decode_body(body: &[u8]) -> Result<ChatResponse, DecodeError> {
        serde_json::from_slice::<wire::Response>(body)
            .map_err(DecodeError::Body)
            .and_then(wire::Response::into_chat_response)
    }

    fn push_event(&mut self, _event: &str, data: &str) -> Result<Pushed, EventError> {
        if data == "[DONE]" {
            self.done = true;
            return Ok(Pushed::End);
        }
        if data.is_empty() {
            return Ok(Pushed::Nothing);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|source| DecodeError::Chunk {
            data: data.to_owned(),
            source,
        })?;
        if let Some(error) = &chunk.error {
            return Err(EventError::Remote(error.to_string()));
        }
        Ok(self.push(chunk).map_or(Pushed::Nothing, Pushed::Text))
    }

    /// With `[DONE]`, or at least a finish reason (some servers close the stream
    /// without the sentinel).
    fn is_complete(&self) -> bool {
        self.done || self.finish_reason.is_some()
    }

    /// Fails on a tool call that never got a name.
    fn finish(self) -> Result<ChatResponse, DecodeError> {
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, call)| {
                if call.name.is_empty() {
                    return Err(DecodeError::NamelessStreamedToolCall { index });
                }
                Ok(ToolCall {
                    id: call.id.unwrap_or_else(|| wire::synthetic_call_id(index)),
                    name: call.name,
                    // A call with no arguments means an empty object, as unstreamed.
                    arguments: if call.arguments.is_empty() {
                        "{}".to_owned()
                    } else {
                        call.arguments
                    },
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ChatResponse {
            text: self.text,
            finish_reason: wire::finish_reason(
                self.finish_reason.as_deref(),
                !tool_calls.is_empty(),
            ),
            tool_calls,
            usage: self.usage.unwrap_or_default(),
            reasoning: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::types::FinishReason;

    fn push(assembler: &mut StreamAssembler, chunk: Value) -> Option<String> {
        assembler.push(serde_json::from_value(chunk).expect("chunk decodes"))
    }

    fn delta(delta: Value) -> Value {
        json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
    }

    #[test]
    fn concatenates_text_deltas_and_returns_each_piece() {
        let mut a = StreamAssembler::default();
        assert_eq!(
            push(&mut a, delta(json!({"role": "assistant", "content": ""}))),
            None
        );
        assert_eq!(
            push(&mut a, delta(json!({"content": "Hel"}))).as_deref(),
            Some("Hel")
        );
        assert_eq!(
            push(&mut a, delta(json!({"content": "lo"}))).as_deref(),
            Some("lo")
        );
        push(
            &mut a,
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        );
        push(
            &mut a,
            json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}),
        );
        assert_eq!(
            a.push_event("message", "[DONE]").expect("done"),
            Pushed::End
        );
        let answer = a.finish().expect("complete");
        assert_eq!(answer.text, "Hello");
        assert_eq!(answer.finish_reason, FinishReason::Stop);
        assert_eq!(answer.usage, Usage::tokens(9, 2));
    }

    #[test]
    fn assembles_interleaved_tool_calls_by_index() {
        let mut a = StreamAssembler::default();
        let call = |c: Value| delta(json!({"tool_calls": [c]}));
        push(
            &mut a,
            call(
                json!({"index": 0, "id": "a", "type": "function", "function": {"name": "grep", "arguments": ""}}),
            ),
        );
        push(
            &mut a,
            call(json!({"index": 0, "function": {"arguments": "{\"pat"}})),
        );
        push(
            &mut a,
            call(
                json!({"index": 1, "id": "b", "type": "function", "function": {"name": "ls", "arguments": "{"}}),
            ),
        );
        push(
            &mut a,
            call(json!({"index": 0, "function": {"arguments": "tern\":\"x\"}"}})),
        );
        push(
            &mut a,
            call(json!({"index": 1, "function": {"arguments": "}"}})),
        );
        push(
            &mut a,
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        );
        let answer = a.finish().expect("complete");
        assert_eq!(
            answer.tool_calls,
            vec![
                ToolCall {
                    id: "a".into(),
                    name: "grep".into(),
                    arguments: "{\"pattern\":\"x\"}".into()
                },
                ToolCall {
                    id: "b".into(),
                    name: "ls".into(),
                    arguments: "{}".into()
                },
            ]
        );
        assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
        assert_eq!(answer.usage, Usage::default(), "no usage chunk means zero");
    }

    #[test]
    fn repeated_names_are_not_doubled() {
        let mut a = StreamAssembler::default();
        let call = |c: Value| delta(json!({"tool_calls": [c]}));
        push(
            &mut a,
            call(json!({"index": 0, "id": "a", "function": {"name": "grep", "arguments": "{}"}})),
        );
        push(
            &mut a,
            call(json!({"index": 0, "id": "a", "function": {"name": "grep", "arguments": ""}})),
        );
        assert_eq!(a.finish().expect("complete").tool_calls[0].name, "grep");
    }

    #[test]
    fn calls_without_index_are_told_apart_by_id() {
        let mut a = StreamAssembler::default();
        let call = |c: Value| delta(json!({"tool_calls": [c]}));
        push(
            &mut a,
            call(json!({"id": "a", "function": {"name": "grep", "arguments": "{\"q\":"}})),
        );
        push(&mut a, call(json!({"function": {"arguments": "1}"}})));
        push(&mut a, call(json!({"id": "b", "function": {"name": "ls"}})));
        let calls = a.finish().expect("complete").tool_calls;
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].arguments, "{\"q\":1}");
        assert_eq!(
            (calls[1].id.as_str(), calls[1].arguments.as_str()),
            ("b", "{}")
        );
    }

    #[test]
    fn a_call_without_a_name_fails_and_a_missing_id_is_synthesized() {
        let mut a = StreamAssembler::default();
        push(
            &mut a,
            delta(json!({"tool_calls": [{"index": 3, "function": {"arguments": "{}"}}]})),
        );
        assert_eq!(
            a.finish().expect_err("nameless call").to_string(),
            "streamed tool call 3 has no function name"
        );

        let mut a = StreamAssembler::default();
        push(
            &mut a,
            delta(json!({"tool_calls": [{"index": 3, "function": {"name": "ls"}}]})),
        );
        assert_eq!(a.finish().expect("complete").tool_calls[0].id, "call_3");
    }

    #[test]
    fn completeness_needs_done_or_a_finish_reason() {
        let mut a = StreamAssembler::default();
        push(&mut a, delta(json!({"content": "partial"})));
        assert!(!a.is_complete());
        push(
            &mut a,
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
        );
        assert!(a.is_complete());
        assert_eq!(
            a.finish().expect("complete").finish_reason,
            FinishReason::Length
        );
    }
}
