//! The chat-completions JSON: request encoding and response decoding.
//!
//! Decoding is lenient where OpenAI-compatible servers differ (missing ids, `null`
//! fields, arguments sent as an object) and strict only where the answer would be
//! meaningless (no choices, a tool call without a name).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::DecodeError;
use crate::types::{
    ChatRequest, ChatResponse, FinishReason, Message, Role, ToolCall, ToolDef, Usage,
};

/// The request body of `POST /chat/completions`.
#[derive(Debug, Serialize)]
pub(super) struct Request<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    /// Servers differ on an empty `tools` array (some reject it), so none is sent.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    /// Routes the requests of one session to the same cache (OpenAI's prompt
    /// caching); servers that do not know it ignore it.
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Debug, Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    /// `null` for an assistant turn that only calls tools, as the API specifies.
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Debug, Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Debug, Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    /// Encoded when the tool was defined.
    description: &'a RawValue,
    parameters: &'a RawValue,
}

impl<'a> Request<'a> {
    pub(super) fn new(request: &'a ChatRequest, stream: bool) -> Self {
        Self {
            model: &request.model,
            messages: request.messages.iter().map(WireMessage::from).collect(),
            tools: request.tools.iter().map(WireTool::from).collect(),
            temperature: request.temperature,
            top_p: request.top_p,
            max_tokens: request.max_tokens,
            stream,
            // Without it streamed answers carry no token counts.
            stream_options: stream.then_some(StreamOptions {
                include_usage: true,
            }),
            prompt_cache_key: request.cache_key.as_deref(),
            reasoning_effort: request.reasoning_effort.as_deref(),
        }
    }
}

impl<'a> From<&'a Message> for WireMessage<'a> {
    fn from(message: &'a Message) -> Self {
        let role = match message.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        let content = if message.role == Role::Assistant
            && message.content.is_empty()
            && !message.tool_calls.is_empty()
        {
            None
        } else {
            Some(message.content.as_str())
        };
        Self {
            role,
            content,
            tool_calls: message
                .tool_calls
                .iter()
                .map(|call| WireToolCall {
                    id: &call.id,
                    kind: "function",
                    function: WireFunctionCall {
                        name: &call.name,
                        arguments: &call.arguments,
                    },
                })
                .collect(),
            tool_call_id: message.tool_call_id.as_deref(),
        }
    }
}

impl<'a> From<&'a ToolDef> for WireTool<'a> {
    fn from(tool: &'a ToolDef) -> Self {
        Self {
            kind: "function",
            function: WireFunction {
                name: &tool.name,
                description: tool.description.raw(),
                parameters: tool.parameters.raw(),
            },
        }
    }
}

/// Token counts as the API reports them.
#[derive(Debug, Default, Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

/// The breakdown of the prompt's tokens (OpenAI and compatible gateways).
#[derive(Debug, Default, Deserialize)]
pub(super) struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(usage: WireUsage) -> Self {
        Self::with_cached(
            usage.prompt_tokens.unwrap_or(0),
            usage.completion_tokens.unwrap_or(0),
            usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
        )
    }
}

/// The body of a non-streamed answer.
#[derive(Debug, Deserialize)]
pub(super) struct Response {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    message: Option<ResponseMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct ResponseMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ResponseToolCall>>,
}

#[derive(Debug, Deserialize)]
struct ResponseToolCall {
    #[serde(default)]
    id: Option<String>,
    function: ResponseFunction,
}

#[derive(Debug, Deserialize)]
struct ResponseFunction {
    name: String,
    #[serde(default)]
    arguments: Value,
}

impl Response {
    /// The answer of the first choice.
    pub(super) fn into_chat_response(self) -> Result<ChatResponse, DecodeError> {
        if let Some(model) = &self.model {
            crate::spans::response_model(model);
        }
        let choice = self
            .choices
            .into_iter()
            .next()
            .ok_or(DecodeError::NoChoices)?;
        let message = choice.message.unwrap_or_default();
        let tool_calls: Vec<ToolCall> = message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(index, call)| ToolCall {
                id: call
                    .id
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| synthetic_call_id(index)),
                name: call.function.name,
                arguments: arguments_text(call.function.arguments),
            })
            .collect();
        Ok(ChatResponse {
            text: message.content.unwrap_or_default(),
            finish_reason: finish_reason(choice.finish_reason.as_deref(), !tool_calls.is_empty()),
            tool_calls,
            usage: self.usage.map(Usage::from).unwrap_or_default(),
            reasoning: Vec::new(),
        })
    }
}

/// One event of a streamed answer.
#[derive(Debug, Deserialize)]
pub(super) struct Chunk {
    /// The model that answered, as the server names it.
    #[serde(default)]
    pub(super) model: Option<String>,
    #[serde(default)]
    pub(super) choices: Vec<ChunkChoice>,
    #[serde(default)]
    pub(super) usage: Option<WireUsage>,
    /// Some servers report failures as an event with an `error` object mid-stream.
    #[serde(default)]
    pub(super) error: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ChunkChoice {
    #[serde(default)]
    pub(super) index: u32,
    #[serde(default)]
    pub(super) delta: Option<Delta>,
    #[serde(default)]
    pub(super) finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Delta {
    #[serde(default)]
    pub(super) content: Option<String>,
    #[serde(default)]
    pub(super) tool_calls: Option<Vec<ToolCallChunk>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ToolCallChunk {
    #[serde(default)]
    pub(super) index: Option<usize>,
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(default)]
    pub(super) function: Option<FunctionChunk>,
}

#[derive(Debug, Deserialize)]
pub(super) struct FunctionChunk {
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) arguments: Option<String>,
}

/// Maps the API's finish reason. Some servers (Ollama, older llama.cpp) say `stop`
/// for a turn that calls tools; the calls are what the session loop acts on, so the
/// reason follows them.
pub(super) fn finish_reason(reason: Option<&str>, has_tool_calls: bool) -> FinishReason {
    match reason {
        Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
        Some("stop") | None if has_tool_calls => FinishReason::ToolCalls,
        Some("stop") | None => FinishReason::Stop,
        Some("length") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_owned()),
    }
}

/// Id for a call the server sent without one; unique within the turn, which is all
/// the tool-result pairing needs.
pub(super) fn synthetic_call_id(index: usize) -> String {
    format!("call_{index}")
}

/// Arguments as JSON text. Servers that send an object instead of a string get it
/// re-serialized; a call with no arguments means an empty object.
fn arguments_text(arguments: Value) -> String {
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

    fn encode(request: &ChatRequest, stream: bool) -> Value {
        serde_json::to_value(Request::new(request, stream)).expect("request serializes")
    }

    #[test]
    fn encodes_tool_history_in_the_function_shape() {
        let request = ChatRequest {
            model: "qwen".into(),
            messages: vec![
                Message::system("be brief"),
                Message::user("find main"),
                Message::assistant(
                    "",
                    vec![ToolCall {
                        id: "c1".into(),
                        name: "grep".into(),
                        arguments: "{\"q\":\"main\"}".into(),
                    }],
                ),
                Message::tool_result("c1", "src/main.rs"),
            ],
            tools: vec![ToolDef {
                name: "grep".into(),
                description: "search".into(),
                parameters: json!({"type": "object"}).into(),
            }],
            temperature: Some(0.5),
            top_p: None,
            max_tokens: Some(256),
            cache_key: None,
            reasoning_effort: None,
            priority: 0,
            thinking_budget: None,
        };
        let body = encode(&request, false);
        assert_eq!(
            body["messages"][2],
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{\"q\":\"main\"}"}}]})
        );
        assert_eq!(
            body["messages"][3],
            json!({"role": "tool", "content": "src/main.rs", "tool_call_id": "c1"})
        );
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {"name": "grep", "description": "search", "parameters": {"type": "object"}}}])
        );
        assert_eq!(body["temperature"], 0.5);
        assert_eq!(body["max_tokens"], 256);
        assert!(body.get("top_p").is_none());
        assert_eq!(body["stream"], false);
        assert!(body.get("stream_options").is_none());
    }

    #[test]
    fn omits_tools_when_none_are_offered_and_asks_for_usage_when_streaming() {
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![Message::user("hi")],
            ..Default::default()
        };
        let body = encode(&request, true);
        assert!(body.get("tools").is_none());
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(
            body["messages"][0],
            json!({"role": "user", "content": "hi"})
        );
    }

    #[test]
    fn decodes_a_tool_call_answer_with_usage() {
        let response: Response = serde_json::from_value(json!({
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": "c9", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15,
                      "prompt_tokens_details": {"cached_tokens": 8}}
        }))
        .expect("decodes");
        let answer = response.into_chat_response().expect("has a choice");
        assert_eq!(answer.text, "");
        assert_eq!(
            answer.tool_calls,
            vec![ToolCall {
                id: "c9".into(),
                name: "ls".into(),
                arguments: "{}".into()
            }]
        );
        assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            answer.usage,
            Usage {
                cached_input_tokens: 8,
                ..Usage::tokens(12, 3)
            }
        );
    }

    #[test]
    fn tolerates_object_arguments_and_missing_ids() {
        let response: Response = serde_json::from_value(json!({
            "choices": [{"finish_reason": "stop", "message": {"content": "",
                "tool_calls": [{"function": {"name": "ls", "arguments": {"path": "."}}}]}}]
        }))
        .expect("decodes");
        let answer = response.into_chat_response().expect("has a choice");
        assert_eq!(answer.tool_calls[0].id, "call_0");
        assert_eq!(answer.tool_calls[0].arguments, "{\"path\":\".\"}");
        assert_eq!(
            answer.finish_reason,
            FinishReason::ToolCalls,
            "stop with tool calls means tool calls"
        );
        assert_eq!(answer.usage, Usage::default());
    }

    #[test]
    fn an_answer_without_choices_is_an_error() {
        let response: Response = serde_json::from_value(json!({"choices": []})).expect("decodes");
        assert!(response.into_chat_response().is_err());
    }

    #[test]
    fn maps_finish_reasons() {
        assert_eq!(finish_reason(Some("stop"), false), FinishReason::Stop);
        assert_eq!(finish_reason(Some("length"), false), FinishReason::Length);
        assert_eq!(
            finish_reason(Some("content_filter"), false),
            FinishReason::ContentFilter
        );
        assert_eq!(
            finish_reason(Some("eos"), false),
            FinishReason::Other("eos".into())
        );
        assert_eq!(finish_reason(None, true), FinishReason::ToolCalls);
    }
}
