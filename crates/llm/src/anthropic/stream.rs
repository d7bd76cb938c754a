//! Assembles a streamed Messages answer from its events.
//!
//! The documented order is `message_start` (input token counts), then per content
//! block `content_block_start` / `content_block_delta`* / `content_block_stop`, then
//! `message_delta` (stop reason, cumulative output tokens) and `message_stop`; `ping`
//! may come anywhere and `error` ends a failed stream. Text arrives as `text_delta`s;
//! a tool call as a `tool_use` block start with its id and name, then `partial_json`
//! pieces of its input, concatenated in arrival order. Events are told apart by the
//! `type` in their data, which always matches the `event:` name; kinds added to the
//! API later are skipped, as its versioning policy asks of clients.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::response::{self, ContentBlock, WireUsage};
use crate::error::DecodeError;
use crate::transport::{Decoder, EventError, Pushed};
use crate::types::{ChatResponse, Reasoning, ToolCall};

/// The answer so far.
#[derive(Debug, Default)]
pub(super) struct StreamAssembler {
    text: String,
    /// `tool_use` blocks by their index, which orders them.
    calls: BTreeMap<usize, PartialCall>,
    /// Thinking blocks by their index: `(thinking, signature)`, or a redacted one.
    reasoning: BTreeMap<usize, Reasoning>,
    usage: WireUsage,
    stop_reason: Option<String>,
    stopped: bool,
}

#[derive(Debug)]
struct PartialCall {
    id: String,
    name: String,
    /// The input given with the block start; `{}` when it is streamed.
    start_input: Value,
    partial_json: String,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: MessageStart,
    },
    ContentBlockStart {
        index: usize,
        content_block: ContentBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        #[serde(default)]
        error: Value,
    },
    /// `ping`, `content_block_stop` and kinds this client does not know.
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct MessageStart {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    /// Citation deltas and kinds added later.
    #[serde(other)]
    Other,
}

#[derive(Debug, Default, Deserialize)]
struct MessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

impl StreamAssembler {
    fn push(&mut self, event: Event) -> Result<Pushed, EventError> {
        match event {
            Event::MessageStart { message } => {
                if let Some(model) = &message.model {
                    crate::spans::response_model(model);
                }
                if let Some(usage) = message.usage {
                    self.usage.update(usage);
                }
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => match content_block {
                ContentBlock::Text { text } => return Ok(self.push_text(text)),
                ContentBlock::ToolUse { id, name, input } => {
                    self.calls.insert(
                        index,
                        PartialCall {
                            id,
                            name,
                            start_input: input,
                            partial_json: String::new(),
                        },
                    );
                }
                ContentBlock::Thinking {
                    thinking,
                    signature,
                } => {
                    self.reasoning.insert(
                        index,
                        Reasoning::Thinking {
                            text: thinking,
                            signature,
                        },
                    );
                }
                ContentBlock::RedactedThinking { data } => {
                    self.reasoning.insert(index, Reasoning::Redacted { data });
                }
                ContentBlock::Other => {}
            },
            Event::ContentBlockDelta { index, delta } => match delta {
                BlockDelta::TextDelta { text } => return Ok(self.push_text(text)),
                BlockDelta::InputJsonDelta { partial_json } => {
                    let call = self
                        .calls
                        .get_mut(&index)
                        .ok_or(DecodeError::InputForUnknownBlock { index })?;
                    call.partial_json.push_str(&partial_json);
                }
                BlockDelta::ThinkingDelta { thinking } => {
                    if let Some(Reasoning::Thinking { text, .. }) = self.reasoning.get_mut(&index) {
                        text.push_str(&thinking);
                    }
                }
                BlockDelta::SignatureDelta { signature } => {
                    if let Some(Reasoning::Thinking { signature: s, .. }) =
                        self.reasoning.get_mut(&index)
                    {
                        s.push_str(&signature);
                    }
                }
                BlockDelta::Other => {}
            },
            Event::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if let Some(usage) = usage {
                    self.usage.update(usage);
                }
            }
            Event::MessageStop => {
                self.stopped = true;
                return Ok(Pushed::End);
            }
            Event::Error { error } => return Err(EventError::Remote(error_message(&error))),
            Event::Other => {}
        }
        Ok(Pushed::Nothing)
    }

    fn push_text(&mut self, text: String) -> Pushed {
        if text.is_empty() {
            return Pushed::Nothing;
        }
        self.text.push_str(&text);
        Pushed::Text(text)
    }
}

/// `overloaded_error: Overloaded` from `{"type": "overloaded_error", "message": ...}`,
/// or the JSON as sent when it has another shape.
fn error_message(error: &Value) -> String {
    match (error["type"].as_str(), error["message"].as_str()) {
        (Some(kind), Some(message)) => format!("{kind}: {message}"),
        (None, Some(message)) => message.to_owned(),
        _ => error.to_string(),
    }
}

impl Decoder for StreamAssembler {
    fn decode_body(body: &[u8]) -> Result<ChatResponse, DecodeError> {
        serde_json::from_slice::<response::Response>(body)
            .map(response::Response::into_chat_response)
            .map_err(DecodeError::Body)
    }

    fn push_event(&mut self, _event: &str, data: &str) -> Result<Pushed, EventError> {
        if data.is_empty() {
            return Ok(Pushed::Nothing);
        }
        let event: Event = serde_json::from_str(data).map_err(|source| DecodeError::Event {
            data: data.to_owned(),
            source,
        })?;
        self.push(event)
    }

    /// With `message_stop`, or at least the `message_delta` that carries the stop
    /// reason: everything after it is bookkeeping.
    fn is_complete(&self) -> bool {
        self.stopped || self.stop_reason.is_some()
    }

    fn finish(self) -> Result<ChatResponse, DecodeError> {
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_values()
            .map(|call| ToolCall {
                id: call.id,
                name: call.name,
                arguments: if call.partial_json.is_empty() {
                    response::input_text(call.start_input)
                } else {
                    call.partial_json
                },
            })
            .collect();
        Ok(ChatResponse {
            text: self.text,
            finish_reason: response::finish_reason(
                self.stop_reason.as_deref(),
                !tool_calls.is_empty(),
            ),
            tool_calls,
            usage: self.usage.into(),
            reasoning: self.reasoning.into_values().collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::types::{FinishReason, Usage};

    fn push(a: &mut StreamAssembler, event: Value) -> Result<Pushed, EventError> {
        let name = event["type"].as_str().unwrap_or("message").to_owned();
        a.push_event(&name, &event.to_string())
    }

    fn ok(a: &mut StreamAssembler, event: Value) -> Pushed {
        push(a, event).expect("event folds in")
    }

    fn start(input_tokens: u64) -> Value {
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": "claude", "stop_reason": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1}}})
    }

    fn delta(index: usize, delta: Value) -> Value {
        json!({"type": "content_block_delta", "index": index, "delta": delta})
    }

    #[test]
    fn assembles_text_and_a_tool_call_with_usage() {
        let mut a = StreamAssembler::default();
        ok(&mut a, start(25));
        ok(&mut a, json!({"type": "ping"}));
        ok(
            &mut a,
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        );
        assert_eq!(
            ok(
                &mut a,
                delta(0, json!({"type": "text_delta", "text": "Let "}))
            ),
            Pushed::Text("Let ".into())
        );
        ok(
            &mut a,
            delta(0, json!({"type": "text_delta", "text": "me"})),
        );
        ok(&mut a, json!({"type": "content_block_stop", "index": 0}));
        ok(
            &mut a,
            json!({"type": "content_block_start", "index": 1, "content_block":
                {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {}}}),
        );
        for piece in ["", "{\"pat", "tern\": \"x\"}"] {
            assert_eq!(
                ok(
                    &mut a,
                    delta(
                        1,
                        json!({"type": "input_json_delta", "partial_json": piece})
                    )
                ),
                Pushed::Nothing
            );
        }
        ok(&mut a, json!({"type": "content_block_stop", "index": 1}));
        assert!(!a.is_complete());
        ok(
            &mut a,
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                   "usage": {"output_tokens": 17}}),
        );
        assert!(a.is_complete());
        assert_eq!(ok(&mut a, json!({"type": "message_stop"})), Pushed::End);
        let answer = a.finish().expect("complete");
        assert_eq!(answer.text, "Let me");
        assert_eq!(
            answer.tool_calls,
            vec![ToolCall {
                id: "toolu_1".into(),
                name: "grep".into(),
                arguments: "{\"pattern\": \"x\"}".into()
            }]
        );
        assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
        assert_eq!(answer.usage, Usage::tokens(25, 17));
    }

    #[test]
    fn a_tool_call_without_input_deltas_keeps_its_start_input() {
        let mut a = StreamAssembler::default();
        ok(
            &mut a,
            json!({"type": "content_block_start", "index": 0, "content_block":
                {"type": "tool_use", "id": "t", "name": "now", "input": {}}}),
        );
        ok(
            &mut a,
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}}),
        );
        assert_eq!(a.finish().expect("complete").tool_calls[0].arguments, "{}");
    }

    #[test]
    fn an_error_event_is_a_remote_error() {
        let mut a = StreamAssembler::default();
        ok(&mut a, start(1));
        let error = push(
            &mut a,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        );
        assert!(
            matches!(&error, Err(EventError::Remote(m)) if m == "overloaded_error: Overloaded"),
            "{error:?}"
        );
    }

    #[test]
    fn unknown_events_and_blocks_are_skipped() {
        let mut a = StreamAssembler::default();
        ok(&mut a, json!({"type": "some_future_event", "x": 1}));
        ok(
            &mut a,
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        );
        assert_eq!(
            ok(
                &mut a,
                delta(0, json!({"type": "thinking_delta", "thinking": "hmm"}))
            ),
            Pushed::Nothing
        );
        assert_eq!(a.text, "");
    }

    #[test]
    fn input_for_a_block_that_is_not_a_tool_call_is_a_decode_error() {
        let mut a = StreamAssembler::default();
        let error = push(
            &mut a,
            delta(4, json!({"type": "input_json_delta", "partial_json": "{}"})),
        );
        assert!(
            matches!(
                &error,
                Err(EventError::Decode(e @ DecodeError::InputForUnknownBlock { index: 4 }))
                    if e.to_string().contains("content block 4")
            ),
            "{error:?}"
        );
    }

    #[test]
    fn a_stream_cut_before_the_stop_reason_is_incomplete() {
        let mut a = StreamAssembler::default();
        ok(&mut a, start(1));
        ok(
            &mut a,
            delta(0, json!({"type": "text_delta", "text": "partial"})),
        );
        assert!(!a.is_complete());
        assert!(push(&mut a, json!("not an object")).is_err());
    }
}
