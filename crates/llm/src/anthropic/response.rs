//! The Messages API answer: content blocks, stop reasons and token counts, shared by
//! whole (non-streamed) answers and the stream assembler.

use serde::Deserialize;
use serde_json::Value;

use crate::types::{ChatResponse, FinishReason, Reasoning, ToolCall, Usage};

/// Token counts as the API reports them. Every field is optional because streamed
/// `message_delta` events carry only the counts that changed.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Takes the counts `later` reports; streamed counts are cumulative, so a later
    /// one replaces an earlier one.
    pub(super) fn update(&mut self, later: WireUsage) {
        self.input_tokens = later.input_tokens.or(self.input_tokens);
        self.output_tokens = later.output_tokens.or(self.output_tokens);
        self.cache_creation_input_tokens = later
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
        self.cache_read_input_tokens = later
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
    }
}

impl From<WireUsage> for Usage {
    /// The API counts cached prompt tokens apart from `input_tokens`; all of them were
    /// input to this call, so they are added up.
    fn from(usage: WireUsage) -> Self {
        Self {
            input_tokens: usage.input_tokens.unwrap_or(0)
                + usage.cache_creation_input_tokens.unwrap_or(0)
                + usage.cache_read_input_tokens.unwrap_or(0),
            output_tokens: usage.output_tokens.unwrap_or(0),
            cached_input_tokens: usage.cache_read_input_tokens.unwrap_or(0),
            cache_write_input_tokens: usage.cache_creation_input_tokens.unwrap_or(0),
            ..Self::default()
        }
    }
}

/// The body of a non-streamed answer.
#[derive(Debug, Deserialize)]
pub(super) struct Response {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    content: Vec<ContentBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: WireUsage,
}

/// A block of an answer, whole or (in a stream's `content_block_start`) as it begins;
/// kinds this client does not use (thinking, server tools) are skipped.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum ContentBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    #[serde(other)]
    Other,
}

impl Response {
    pub(super) fn into_chat_response(self) -> ChatResponse {
        if let Some(model) = &self.model {
            crate::spans::response_model(model);
        }
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        let mut reasoning = Vec::new();
        for block in self.content {
            match block {
                ContentBlock::Text { text: piece } => text.push_str(&piece),
                ContentBlock::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments: input_text(input),
                }),
                ContentBlock::Thinking {
                    thinking,
                    signature,
                } => reasoning.push(Reasoning::Thinking {
                    text: thinking,
                    signature,
                }),
                ContentBlock::RedactedThinking { data } => {
                    reasoning.push(Reasoning::Redacted { data });
                }
                ContentBlock::Other => {}
            }
        }
        ChatResponse {
            text,
            finish_reason: finish_reason(self.stop_reason.as_deref(), !tool_calls.is_empty()),
            tool_calls,
            usage: self.usage.into(),
            reasoning,
        }
    }
}

/// Arguments text of a `tool_use.input`; no input means an empty object.
pub(super) fn input_text(input: Value) -> String {
    match input {
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    }
}

/// Maps the API's `stop_reason`. A turn with tool calls that ended otherwise than by
/// `max_tokens` is treated as calling tools: the calls are what the session acts on.
pub(super) fn finish_reason(reason: Option<&str>, has_tool_calls: bool) -> FinishReason {
    match reason {
        Some("tool_use") => FinishReason::ToolCalls,
        Some("end_turn" | "stop_sequence") | None if has_tool_calls => FinishReason::ToolCalls,
        Some("end_turn" | "stop_sequence") | None => FinishReason::Stop,
        Some("max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
        Some("refusal") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn decodes_text_and_tool_use_blocks_with_cached_input_counted() {
        let response: Response = serde_json::from_value(json!({
            "id": "msg_1", "type": "message", "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"q": "x"}}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 12, "cache_read_input_tokens": 100,
                      "cache_creation_input_tokens": null, "output_tokens": 3}
        }))
        .expect("decodes");
        let answer = response.into_chat_response();
        assert_eq!(answer.text, "let me look");
        assert_eq!(
            answer.tool_calls,
            vec![ToolCall {
                id: "toolu_1".into(),
                name: "grep".into(),
                arguments: "{\"q\":\"x\"}".into()
            }]
        );
        assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            answer.usage,
            Usage {
                cached_input_tokens: 100,
                ..Usage::tokens(112, 3)
            }
        );
    }

    #[test]
    fn maps_stop_reasons() {
        assert_eq!(finish_reason(Some("end_turn"), false), FinishReason::Stop);
        assert_eq!(
            finish_reason(Some("stop_sequence"), false),
            FinishReason::Stop
        );
        assert_eq!(
            finish_reason(Some("tool_use"), true),
            FinishReason::ToolCalls
        );
        assert_eq!(
            finish_reason(Some("end_turn"), true),
            FinishReason::ToolCalls
        );
        assert_eq!(
            finish_reason(Some("max_tokens"), true),
            FinishReason::Length
        );
        assert_eq!(
            finish_reason(Some("refusal"), false),
            FinishReason::ContentFilter
        );
        assert_eq!(
            finish_reason(Some("pause_turn"), false),
            FinishReason::Other("pause_turn".into())
        );
    }
}
