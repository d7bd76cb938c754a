//! Assembles a streamed Responses answer from its events.
//!
//! Events are told apart by their `event:` name (the data's `type` when a server
//! sends no name; the two always match). The stream opens with `response.created`;
//! each output item is announced by `response.output_item.added` and closed by
//! `response.output_item.done`, which holds it whole. Text arrives as
//! `response.output_text.delta`s; a function call's arguments as
//! `response.function_call_arguments.delta`s, naming the item by `output_index` and
//! `item_id`, then once whole in `response.function_call_arguments.done`. The stream
//! ends with `response.completed` or `response.incomplete` (cut by the output limit),
//! both carrying the whole response object with status and usage; it fails with
//! `response.failed` or an `error` event. Other events (content parts, reasoning,
//! built-in tools, kinds added to the API later) are skipped.
//!
//! Whole values replace assembled pieces: a `.done` event's arguments, an item's
//! `output_item.done`, and the function calls of the closing response's `output`.
//! Text the closing response holds is used only for message items that streamed none.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::response::{self, OutputItem, Response};
use crate::error::DecodeError;
use crate::transport::{Decoder, EventError, Pushed};
use crate::types::{ChatResponse, ToolCall, Usage};

/// The answer so far.
#[derive(Debug, Default)]
pub(super) struct StreamAssembler {
    text: String,
    /// Output indexes of the message items whose text has been taken.
    text_taken: BTreeSet<usize>,
    /// Function calls by output index, which orders them.
    calls: BTreeMap<usize, PartialCall>,
    /// Output index by item id, for argument events that name only the item.
    items: HashMap<String, usize>,
    usage: Option<Usage>,
    status: Option<String>,
    incomplete_reason: Option<String>,
    /// The closing event arrived.
    ended: bool,
}

#[derive(Debug, Default)]
struct PartialCall {
    call_id: Option<String>,
    name: String,
    arguments: String,
}

/// A text delta.
#[derive(Debug, Deserialize)]
struct TextDelta {
    /// Always sent; a server that leaves it out has one message item.
    #[serde(default)]
    output_index: usize,
    #[serde(default)]
    delta: String,
}

/// `response.output_item.added` and `.done`.
#[derive(Debug, Deserialize)]
struct ItemEvent {
    output_index: usize,
    item: OutputItem,
}

/// `response.function_call_arguments.delta` (`delta`) and `.done` (`arguments`).
#[derive(Debug, Deserialize)]
struct ArgumentsEvent {
    #[serde(default)]
    output_index: Option<usize>,
    #[serde(default)]
    item_id: Option<String>,
    #[serde(default)]
    delta: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// The lifecycle events, which carry the response object.
#[derive(Debug, Deserialize)]
struct ResponseEvent {
    #[serde(default)]
    response: Response,
}

/// The `type` of an event's data, for servers that send no `event:` name.
#[derive(Debug, Deserialize)]
struct Kind {
    #[serde(rename = "type")]
    kind: String,
}

fn parse<T: DeserializeOwned>(kind: &str, data: &str) -> Result<T, DecodeError> {
    serde_json::from_str(data).map_err(|source| DecodeError::EventOfKind {
        kind: kind.to_owned(),
        source,
    })
}

impl StreamAssembler {
    /// Folds in the event `kind` with data `data`.
    fn push(&mut self, kind: &str, data: &str) -> Result<Pushed, EventError> {
        match kind {
            "response.output_text.delta" => {
                let event: TextDelta = parse(kind, data)?;
                self.text_taken.insert(event.output_index);
                Ok(self.push_text(event.delta))
            }
            "response.output_item.added" | "response.output_item.done" => {
                let event: ItemEvent = parse(kind, data)?;
                Ok(self.push_item(event.output_index, event.item))
            }
            "response.function_call_arguments.delta" | "response.function_call_arguments.done" => {
                let event: ArgumentsEvent = parse(kind, data)?;
                let index = event
                    .output_index
                    .or_else(|| {
                        event
                            .item_id
                            .as_ref()
                            .and_then(|id| self.items.get(id).copied())
                    })
                    .ok_or_else(|| DecodeError::ArgumentsForUnknownItem {
                        kind: kind.to_owned(),
                    })?;
                let call = self.calls.entry(index).or_default();
                if let Some(whole) = event.arguments {
                    call.arguments = whole;
                } else if let Some(delta) = event.delta {
                    call.arguments.push_str(&delta);
                }
                Ok(Pushed::Nothing)
            }
            "response.completed" | "response.incomplete" => {
                let event: ResponseEvent = parse(kind, data)?;
                self.end(event.response);
                Ok(Pushed::End)
            }
            "response.failed" => {
                let event: ResponseEvent = parse(kind, data)?;
                let error = event.response.error.unwrap_or(Value::Null);
                Err(EventError::Remote(response::error_message(&error)))
            }
            "error" => {
                let error: Value = parse(kind, data)?;
                // The error's fields are the event's own, or under `error`.
                let error = error.get("error").unwrap_or(&error);
                Err(EventError::Remote(response::error_message(error)))
            }
            _ => Ok(Pushed::Nothing),
        }
    }

    fn push_text(&mut self, text: String) -> Pushed {
        if text.is_empty() {
            return Pushed::Nothing;
        }
        self.text.push_str(&text);
        Pushed::Text(text)
    }

    /// An item announced or done: a function call's name and id (and, done, its whole
    /// arguments); a done message's text when none of it was streamed.
    fn push_item(&mut self, index: usize, item: OutputItem) -> Pushed {
        match item {
            OutputItem::FunctionCall {
                id,
                call_id,
                name,
                arguments,
            } => {
                if let Some(id) = id {
                    self.items.insert(id, index);
                }
                let call = self.calls.entry(index).or_default();
                if call_id.is_some() {
                    call.call_id = call_id;
                }
                if !name.is_empty() {
                    call.name = name;
                }
                // Empty when announced; whole when done.
                match arguments {
                    Value::Null => {}
                    Value::String(text) if text.is_empty() => {}
                    whole => call.arguments = response::arguments_text(whole),
                }
                Pushed::Nothing
            }
            message @ OutputItem::Message { .. } => match message.message_text() {
                // `added` holds no text yet; only a `done` with text takes the index.
                Some(text) if !text.is_empty() && self.text_taken.insert(index) => {
                    self.push_text(text)
                }
                _ => Pushed::Nothing,
            },
            OutputItem::Other => Pushed::Nothing,
        }
    }

    /// The closing response: status, usage, and what of its output the stream missed.
    fn end(&mut self, response: Response) {
        self.ended = true;
        if let Some(model) = &response.model {
            crate::spans::response_model(model);
        }
        self.status = response.status;
        self.incomplete_reason = response.incomplete_details.and_then(|d| d.reason);
        self.usage = response.usage.map(Usage::from);
        for (index, item) in response.output.into_iter().enumerate() {
            // Past the end nothing is forwarded; the answer holds it.
            let _ = self.push_item(index, item);
        }
    }
}

impl Decoder for StreamAssembler {
    fn decode_body(body: &[u8]) -> Result<ChatResponse, DecodeError> {
        serde_json::from_slice::<Response>(body)
            .map_err(DecodeError::Body)
            .and_then(Response::into_chat_response)
    }

    fn push_event(&mut self, event: &str, data: &str) -> Result<Pushed, EventError> {
        if data.is_empty() {
            return Ok(Pushed::Nothing);
        }
        if event != "message" {
            return self.push(event, data);
        }
        let kind: Kind = serde_json::from_str(data).map_err(|source| DecodeError::Event {
            data: data.to_owned(),
            source,
        })?;
        self.push(&kind.kind, data)
    }

    /// Only with `response.completed` or `response.incomplete`.
    fn is_complete(&self) -> bool {
        self.ended
    }

    /// Fails on a function call that never got a name.
    fn finish(self) -> Result<ChatResponse, DecodeError> {
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, call)| {
                if call.name.is_empty() {
                    return Err(DecodeError::NamelessStreamedFunctionCall { index });
                }
                Ok(ToolCall {
                    id: call
                        .call_id
                        .filter(|id| !id.is_empty())
                        .unwrap_or_else(|| response::synthetic_call_id(index)),
                    name: call.name,
                    arguments: response::arguments_text(Value::String(call.arguments)),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ChatResponse {
            text: self.text,
            finish_reason: response::finish_reason(
                self.status.as_deref(),
                self.incomplete_reason.as_deref(),
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
    use serde_json::json;

    use super::*;
    use crate::types::FinishReason;

    /// Pushes `event` under its `type` as the `event:` name.
    fn push(a: &mut StreamAssembler, event: Value) -> Result<Pushed, EventError> {
        let name = event["type"].as_str().unwrap_or("message").to_owned();
        a.push_event(&name, &event.to_string())
    }

    /// The server's message of a remote error.
    fn remote(pushed: Result<Pushed, EventError>) -> String {
        match pushed {
            Err(EventError::Remote(message)) => message,
            other => panic!("expected a remote error, got {other:?}"),
        }
    }

    fn ok(a: &mut StreamAssembler, event: Value) -> Pushed {
        push(a, event).expect("event folds in")
    }

    fn text(index: usize, delta: &str) -> Value {
        json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": index,
               "content_index": 0, "delta": delta})
    }

    fn call_item(kind: &str, index: usize, id: &str, name: &str, arguments: &str) -> Value {
        json!({"type": kind, "output_index": index, "item": {"type": "function_call",
               "id": format!("fc_{id}"), "call_id": id, "name": name, "arguments": arguments}})
    }

    fn args(index: Option<usize>, item: &str, delta: &str) -> Value {
        let mut event = json!({"type": "response.function_call_arguments.delta",
                               "item_id": format!("fc_{item}"), "delta": delta});
        if let Some(index) = index {
            event["output_index"] = index.into();
        }
        event
    }

    fn completed(response: Value) -> Value {
        json!({"type": "response.completed", "response": response})
    }

    #[test]
    fn forwards_text_deltas_and_takes_usage_from_the_closing_event() {
        let mut a = StreamAssembler::default();
        ok(
            &mut a,
            json!({"type": "response.created", "response": {"status": "in_progress", "output": [], "usage": null}}),
        );
        ok(
            &mut a,
            json!({"type": "response.output_item.added", "output_index": 0,
                   "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}}),
        );
        assert_eq!(ok(&mut a, text(0, "Hel")), Pushed::Text("Hel".into()));
        assert_eq!(ok(&mut a, text(0, "lo")), Pushed::Text("lo".into()));
        assert_eq!(ok(&mut a, text(0, "")), Pushed::Nothing);
        assert_eq!(
            ok(
                &mut a,
                json!({"type": "response.output_item.done", "output_index": 0,
                   "item": {"type": "message", "content": [{"type": "output_text", "text": "Hello"}]}})
            ),
            Pushed::Nothing,
            "text already streamed is not repeated"
        );
        assert!(!a.is_complete());
        let end = completed(json!({"status": "completed", "model": "gpt-test",
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "Hello"}]}],
            "usage": {"input_tokens": 9, "output_tokens": 2, "input_tokens_details": {"cached_tokens": 4}}}));
        assert_eq!(ok(&mut a, end), Pushed::End);
        assert!(a.is_complete());
        let answer = a.finish().expect("complete");
        assert_eq!(answer.text, "Hello");
        assert_eq!(answer.finish_reason, FinishReason::Stop);
        assert_eq!(
            answer.usage,
            Usage {
                cached_input_tokens: 4,
                ..Usage::tokens(9, 2)
            }
        );
    }

    #[test]
    fn assembles_interleaved_calls_by_output_index_or_item_id() {
        let mut a = StreamAssembler::default();
        ok(
            &mut a,
            call_item("response.output_item.added", 0, "a", "grep", ""),
        );
        ok(&mut a, args(Some(0), "a", "{\"pat"));
        ok(
            &mut a,
            call_item("response.output_item.added", 1, "b", "ls", ""),
        );
        ok(&mut a, args(None, "b", "{"));
        ok(&mut a, args(None, "a", "tern\":\"x\"}"));
        ok(&mut a, args(Some(1), "b", "}"));
        ok(&mut a, completed(json!({"status": "completed"})));
        let answer = a.finish().expect("complete");
        assert_eq!(
            answer.tool_calls,
            [
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
        assert_eq!(answer.usage, Usage::default(), "no usage means zero");
    }

    #[test]
    fn whole_arguments_replace_the_pieces() {
        let mut a = StreamAssembler::default();
        ok(
            &mut a,
            call_item("response.output_item.added", 2, "c", "grep", ""),
        );
        ok(&mut a, args(Some(2), "c", "{\"q\":"));
        ok(
            &mut a,
            json!({"type": "response.function_call_arguments.done", "item_id": "fc_c",
                   "output_index": 2, "arguments": "{\"q\":1}"}),
        );
        assert_eq!(a.calls[&2].arguments, "{\"q\":1}");
        ok(
            &mut a,
            call_item("response.output_item.done", 2, "c", "grep", "{\"q\":2}"),
        );
        ok(&mut a, completed(json!({"status": "completed"})));
        assert_eq!(
            a.finish().expect("complete").tool_calls[0].arguments,
            "{\"q\":2}"
        );
    }

    #[test]
    fn the_closing_response_fills_in_what_was_not_streamed() {
        let mut a = StreamAssembler::default();
        let end = completed(json!({"status": "completed", "output": [
            {"type": "reasoning", "id": "rs_1"},
            {"type": "message", "content": [{"type": "output_text", "text": "checking"}]},
            {"type": "function_call", "call_id": "c9", "name": "ls", "arguments": "{\"p\":1}"},
        ]}));
        assert_eq!(ok(&mut a, end), Pushed::End);
        let answer = a.finish().expect("complete");
        assert_eq!(answer.text, "checking");
        assert_eq!(
            answer.tool_calls,
            [ToolCall {
                id: "c9".into(),
                name: "ls".into(),
                arguments: "{\"p\":1}".into()
            }]
        );
    }

    #[test]
    fn a_done_message_without_streamed_text_is_forwarded_once() {
        let mut a = StreamAssembler::default();
        let done = json!({"type": "response.output_item.done", "output_index": 0,
            "item": {"type": "message", "content": [{"type": "output_text", "text": "whole"}]}});
        assert_eq!(ok(&mut a, done), Pushed::Text("whole".into()));
        ok(
            &mut a,
            completed(json!({"output": [{"type": "message",
                "content": [{"type": "output_text", "text": "whole"}]}]})),
        );
        assert_eq!(a.finish().expect("complete").text, "whole");
    }

    #[test]
    fn incomplete_ends_the_stream_as_length() {
        let mut a = StreamAssembler::default();
        ok(&mut a, text(0, "partial"));
        let end = json!({"type": "response.incomplete", "response": {"status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "usage": {"input_tokens": 5, "output_tokens": 16}}});
        assert_eq!(ok(&mut a, end), Pushed::End);
        assert!(a.is_complete());
        let answer = a.finish().expect("complete");
        assert_eq!(answer.finish_reason, FinishReason::Length);
        assert_eq!(answer.usage, Usage::tokens(5, 16));
    }

    #[test]
    fn failed_and_error_events_are_remote_errors() {
        let mut a = StreamAssembler::default();
        let failed = json!({"type": "response.failed", "response": {"status": "failed",
            "error": {"code": "server_error", "message": "the model failed"}}});
        assert_eq!(
            remote(push(&mut a, failed)),
            "server_error: the model failed"
        );
        let error = json!({"type": "error", "code": "rate_limit_exceeded",
                           "message": "slow down", "param": null});
        assert_eq!(
            remote(push(&mut a, error)),
            "rate_limit_exceeded: slow down"
        );
        let nested = json!({"type": "error", "error": {"type": "server_error", "message": "oops"}});
        assert_eq!(remote(push(&mut a, nested)), "server_error: oops");
        assert!(!a.is_complete());
    }

    #[test]
    fn events_without_a_name_are_told_apart_by_type_and_unknown_ones_skipped() {
        let mut a = StreamAssembler::default();
        assert_eq!(
            a.push_event("message", &text(0, "hi").to_string())
                .expect("a text delta"),
            Pushed::Text("hi".into())
        );
        let unknown = json!({"type": "response.reasoning_summary_text.delta", "delta": {"odd": 1}});
        assert_eq!(ok(&mut a, unknown), Pushed::Nothing);
        assert_eq!(
            a.push_event("response.in_progress", "")
                .expect("an empty event"),
            Pushed::Nothing
        );
        assert!(matches!(
            a.push_event("message", "not json"),
            Err(EventError::Decode(_))
        ));
        assert!(matches!(
            push(&mut a, args(None, "unknown", "{")),
            Err(EventError::Decode(_))
        ));
    }

    #[test]
    fn a_call_without_a_name_fails_and_a_missing_call_id_is_synthesized() {
        let mut a = StreamAssembler::default();
        ok(&mut a, args(Some(3), "x", "{}"));
        ok(&mut a, completed(json!({"status": "completed"})));
        assert_eq!(
            a.finish().expect_err("nameless").to_string(),
            "streamed function call 3 has no name"
        );

        let mut a = StreamAssembler::default();
        ok(
            &mut a,
            json!({"type": "response.output_item.added", "output_index": 3,
                   "item": {"type": "function_call", "name": "ls", "arguments": ""}}),
        );
        ok(&mut a, completed(json!({"status": "completed"})));
        let call = &a.finish().expect("complete").tool_calls[0];
        assert_eq!(
            (call.id.as_str(), call.arguments.as_str()),
            ("call_3", "{}")
        );
    }
}
