//! The Responses API answer: output items, status and token counts, shared by whole
//! (non-streamed) answers and the stream assembler, whose closing event carries the
//! same response object.
//!
//! Output items are `message`s (text in `output_text` parts), `function_call`s and
//! kinds this client does not use (`reasoning`, built-in tools), which are skipped.

use serde::Deserialize;
use serde_json::Value;

use crate::error::DecodeError;
use crate::types::{ChatResponse, FinishReason, ToolCall, Usage};

/// A response object: the body of a non-streamed answer, and the `response` of the
/// lifecycle events of a streamed one.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Response {
    #[serde(default)]
    pub(super) model: Option<String>,
    /// `completed`, `incomplete`, `failed`, ...
    #[serde(default)]
    pub(super) status: Option<String>,
    #[serde(default)]
    pub(super) incomplete_details: Option<IncompleteDetails>,
    /// Why a `failed` response failed.
    #[serde(default)]
    pub(super) error: Option<Value>,
    #[serde(default)]
    pub(super) output: Vec<OutputItem>,
    #[serde(default)]
    pub(super) usage: Option<WireUsage>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct IncompleteDetails {
    /// `max_output_tokens` or `content_filter`.
    #[serde(default)]
    pub(super) reason: Option<String>,
}

/// One item of `output`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum OutputItem {
    Message {
        #[serde(default)]
        content: Vec<ContentPart>,
    },
    FunctionCall {
        /// The item's own id (`fc_...`), which streamed argument events name.
        #[serde(default)]
        id: Option<String>,
        /// The id a `function_call_output` answers (`call_...`).
        #[serde(default)]
        call_id: Option<String>,
        #[serde(default)]
        name: String,
        /// JSON text; empty while a streamed call has not got its arguments yet.
        #[serde(default)]
        arguments: Value,
    },
    /// `reasoning`, built-in tool calls and kinds added to the API later.
    #[serde(other)]
    Other,
}

/// A content part of a `message` item; refusals and annotations are not used.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum ContentPart {
    OutputText {
        #[serde(default)]
        text: String,
    },
    #[serde(other)]
    Other,
}

impl OutputItem {
    /// The text of a `message` item; `None` for other items.
    pub(super) fn message_text(&self) -> Option<String> {
        let Self::Message { content } = self else {
            return None;
        };
        Some(
            content
                .iter()
                .filter_map(|part| match part {
                    ContentPart::OutputText { text } => Some(text.as_str()),
                    ContentPart::Other => None,
                })
                .collect(),
        )
    }
}

/// Token counts as the API reports them.
#[derive(Debug, Default, Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    /// Reasoning tokens included: they are generated and billed as output.
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_tokens_details: Option<InputTokensDetails>,
}

#[derive(Debug, Default, Deserialize)]
struct InputTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(usage: WireUsage) -> Self {
        Self::with_cached(
            usage.input_tokens.unwrap_or(0),
            usage.output_tokens.unwrap_or(0),
            usage
                .input_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
        )
    }
}

impl Response {
    /// The whole answer; fails on a `failed` response.
    pub(super) fn into_chat_response(self) -> Result<ChatResponse, DecodeError> {
        if let Some(model) = &self.model {
            crate::spans::response_model(model);
        }
        if self.status.as_deref() == Some("failed") {
            return Err(DecodeError::ResponseFailed {
                message: error_message(self.error.as_ref().unwrap_or(&Value::Null)),
            });
        }
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        for (index, item) in self.output.into_iter().enumerate() {
            if let Some(part) = item.message_text() {
                text.push_str(&part);
            } else if let Some(call) = tool_call(index, item) {
                tool_calls.push(call?);
            }
        }
        Ok(ChatResponse {
            text,
            finish_reason: finish_reason(
                self.status.as_deref(),
                self.incomplete_details
                    .as_ref()
                    .and_then(|d| d.reason.as_deref()),
                !tool_calls.is_empty(),
            ),
            tool_calls,
            usage: self.usage.map(Usage::from).unwrap_or_default(),
            reasoning: Vec::new(),
        })
    }
}

/// The call of a `function_call` item at `index` of the output (`None` for other
/// items); fails on a call without a name.
pub(super) fn tool_call(index: usize, item: OutputItem) -> Option<Result<ToolCall, DecodeError>> {
    let OutputItem::FunctionCall {
        id,
        call_id,
        name,
        arguments,
    } = item
    else {
        return None;
    };
    if name.is_empty() {
        return Some(Err(DecodeError::NamelessFunctionCall { index }));
    }
    Some(Ok(ToolCall {
        id: call_id
            .or(id)
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| synthetic_call_id(index)),
        name,
        arguments: arguments_text(arguments),
    }))
}

/// Maps the response's status. An `incomplete` response was cut short (by the
/// output limit or a content filter), whatever it holds; a complete one that calls
/// tools is a tool-call turn.
pub(super) fn finish_reason(
    status: Option<&str>,
    incomplete_reason: Option<&str>,
    has_tool_calls: bool,
) -> FinishReason {
    match (status, incomplete_reason) {
        (Some("incomplete"), Some("max_output_tokens")) => FinishReason::Length,
        (Some("incomplete"), Some("content_filter")) => FinishReason::ContentFilter,
        (Some("incomplete"), reason) => {
            FinishReason::Other(reason.unwrap_or("incomplete").to_owned())
        }
        _ if has_tool_calls => FinishReason::ToolCalls,
        (Some("completed") | None, _) => FinishReason::Stop,
        (Some(other), _) => FinishReason::Other(other.to_owned()),
    }
}

/// `server_error: the model failed` from `{"code": ..., "message": ...}`, or the JSON
/// as sent when it has another shape.
pub(super) fn error_message(error: &Value) -> String {
    let code = error["code"].as_str().or(error["type"].as_str());
    match (code, error["message"].as_str()) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (None, Some(message)) => message.to_owned(),
        _ => error.to_string(),
    }
}

/// Id for a call the server sent without one; unique within the turn, which is all
/// the tool-result pairing needs.
pub(super) fn synthetic_call_id(index: usize) -> String {
    format!("call_{index}")
}

/// Arguments as JSON text. An object is re-serialized; none means an empty object.
pub(super) fn arguments_text(arguments: Value) -> String {
    match arguments {
        Value::String(text) if !text.is_empty() => text,
        Value::String(_) | Value::Null => "{}".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn decode(body: Value) -> Result<ChatResponse, DecodeError> {
        serde_json::from_value::<Response>(body)
            .expect("response decodes")
            .into_chat_response()
    }

    #[test]
    fn decodes_text_and_calls_skipping_reasoning_with_usage() {
        let answer = decode(json!({
            "id": "resp_1", "object": "response", "status": "completed", "model": "gpt-test",
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "let me ", "annotations": []},
                             {"type": "output_text", "text": "look", "annotations": []}]},
                {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "grep",
                 "arguments": "{\"q\":1}", "status": "completed"},
            ],
            "usage": {"input_tokens": 40, "input_tokens_details": {"cached_tokens": 32},
                      "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 4},
                      "total_tokens": 49}
        }))
        .expect("a whole answer");
        assert_eq!(answer.text, "let me look");
        assert_eq!(
            answer.tool_calls,
            [ToolCall {
                id: "call_a".into(),
                name: "grep".into(),
                arguments: "{\"q\":1}".into()
            }]
        );
        assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            answer.usage,
            Usage {
                cached_input_tokens: 32,
                ..Usage::tokens(40, 9)
            }
        );
    }

    #[test]
    fn an_answer_cut_by_the_output_limit_is_length() {
        let answer = decode(json!({
            "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "par"}]}]
        }))
        .expect("an incomplete answer is an answer");
        assert_eq!(answer.text, "par");
        assert_eq!(answer.finish_reason, FinishReason::Length);
        assert_eq!(answer.usage, Usage::default(), "no usage means zero");
    }

    #[test]
    fn a_failed_response_is_an_error_and_a_nameless_call_too() {
        let error = decode(json!({"status": "failed",
            "error": {"code": "server_error", "message": "the model failed"}, "output": []}))
        .expect_err("failed");
        assert_eq!(
            error.to_string(),
            "the response failed: server_error: the model failed"
        );
        let error = decode(
            json!({"output": [{"type": "function_call", "call_id": "c", "arguments": "{}"}]}),
        )
        .expect_err("nameless");
        assert_eq!(error.to_string(), "function call 0 has no name");
    }

    #[test]
    fn tolerates_missing_ids_and_object_arguments() {
        let answer = decode(json!({"output": [
            {"type": "function_call", "name": "ls", "arguments": {"path": "."}},
            {"type": "function_call", "id": "fc_2", "name": "ls"},
        ]}))
        .expect("an answer");
        assert_eq!(answer.tool_calls[0].id, "call_0");
        assert_eq!(answer.tool_calls[0].arguments, "{\"path\":\".\"}");
        assert_eq!(
            (
                answer.tool_calls[1].id.as_str(),
                answer.tool_calls[1].arguments.as_str()
            ),
            ("fc_2", "{}")
        );
    }

    #[test]
    fn maps_statuses() {
        assert_eq!(
            finish_reason(Some("completed"), None, false),
            FinishReason::Stop
        );
        assert_eq!(finish_reason(None, None, true), FinishReason::ToolCalls);
        assert_eq!(
            finish_reason(Some("incomplete"), Some("max_output_tokens"), true),
            FinishReason::Length
        );
        assert_eq!(
            finish_reason(Some("incomplete"), Some("content_filter"), false),
            FinishReason::ContentFilter
        );
        assert_eq!(
            finish_reason(Some("incomplete"), None, false),
            FinishReason::Other("incomplete".into())
        );
        assert_eq!(
            finish_reason(Some("cancelled"), None, false),
            FinishReason::Other("cancelled".into())
        );
    }
}
