//! The request body of `POST /responses`, and how the neutral conversation is reshaped
//! into it.
//!
//! System messages become the top-level `instructions`. The rest of the conversation
//! is the `input` list of items: a message item per user or assistant text, a
//! `function_call` item per tool call of an assistant turn, and a
//! `function_call_output` item per tool result, paired with its call by `call_id`.
//! Tools are flat (`{"type": "function", "name": ...}`), not nested under `function`
//! as in chat completions.
//!
//! Requests are sent with `store: false`: the whole conversation travels with every
//! request, so nothing needs to be kept on the server.

use serde::Serialize;
use serde_json::value::RawValue;

use crate::error::RequestError;
use crate::types::{ChatRequest, Message, Role, ToolDef};

/// The request body of `POST /responses`.
#[derive(Debug, Serialize)]
pub(super) struct Request<'a> {
    model: &'a str,
    /// The system messages, joined with blank lines; none when there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<String>,
    input: Vec<InputItem<'a>>,
    /// Not sent when no tools are offered, as with chat completions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    stream: bool,
    /// The conversation is sent whole each time; the server need not keep it.
    store: bool,
    /// Routes the requests of one session to the same prompt cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    /// How hard a reasoning model thinks (`ChatRequest::reasoning_effort`).
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning<'a>>,
}

#[derive(Debug, Serialize)]
struct Reasoning<'a> {
    effort: &'a str,
}

/// One item of `input`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InputItem<'a> {
    /// User text (`input_text`) or earlier assistant text (`output_text`).
    Message {
        role: &'static str,
        content: [Part<'a>; 1],
    },
    /// A tool call the assistant made in an earlier turn.
    FunctionCall {
        call_id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    /// A tool's result, answering the call of the same `call_id`.
    FunctionCallOutput { call_id: &'a str, output: &'a str },
}

/// A text content part of a message item.
#[derive(Debug, Serialize)]
struct Part<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    description: &'a RawValue,
    parameters: &'a RawValue,
    /// The API defaults to strict schemas, which require every property and
    /// `additionalProperties: false`; tools' schemas are not written for that.
    strict: bool,
}

impl<'a> Request<'a> {
    /// The body for `request`; fails on a tool result that names no call, which the
    /// API could not pair with one.
    pub(super) fn new(request: &'a ChatRequest, stream: bool) -> Result<Self, RequestError> {
        let system: Vec<&str> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| m.content.as_str())
            .collect();
        let mut input = Vec::with_capacity(request.messages.len());
        for (i, message) in request.messages.iter().enumerate() {
            push_items(&mut input, i, message)?;
        }
        Ok(Self {
            model: &request.model,
            instructions: (!system.is_empty()).then(|| system.join("\n\n")),
            input,
            tools: request.tools.iter().map(WireTool::from).collect(),
            temperature: request.temperature,
            top_p: request.top_p,
            max_output_tokens: request.max_tokens,
            stream,
            store: false,
            prompt_cache_key: request.cache_key.as_deref(),
            reasoning: request
                .reasoning_effort
                .as_deref()
                .map(|effort| Reasoning { effort }),
        })
    }
}

/// The items of message `index`: none for a system message (it is in
/// `instructions`).
fn push_items<'a>(
    input: &mut Vec<InputItem<'a>>,
    index: usize,
    message: &'a Message,
) -> Result<(), RequestError> {
    let text = |role, kind| InputItem::Message {
        role,
        content: [Part {
            kind,
            text: &message.content,
        }],
    };
    match message.role {
        Role::System => {}
        Role::User => input.push(text("user", "input_text")),
        Role::Assistant => {
            // A turn that only calls tools has no text to repeat.
            if !message.content.is_empty() {
                input.push(text("assistant", "output_text"));
            }
            input.extend(
                message
                    .tool_calls
                    .iter()
                    .map(|call| InputItem::FunctionCall {
                        call_id: &call.id,
                        name: &call.name,
                        arguments: &call.arguments,
                    }),
            );
        }
        Role::Tool => {
            let call_id = message
                .tool_call_id
                .as_deref()
                .ok_or(RequestError::ToolResultWithoutCallId { message: index })?;
            input.push(InputItem::FunctionCallOutput {
                call_id,
                output: &message.content,
            });
        }
    }
    Ok(())
}

impl<'a> From<&'a ToolDef> for WireTool<'a> {
    fn from(tool: &'a ToolDef) -> Self {
        Self {
            kind: "function",
            name: &tool.name,
            description: tool.description.raw(),
            parameters: tool.parameters.raw(),
            strict: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::types::ToolCall;

    fn encode(request: &ChatRequest, stream: bool) -> Value {
        serde_json::to_value(Request::new(request, stream).expect("request encodes"))
            .expect("request serializes")
    }

    #[test]
    fn a_reasoning_effort_is_sent_as_reasoning_effort() {
        let request = ChatRequest {
            model: "o4-mini".into(),
            messages: vec![crate::types::Message::user("think")],
            reasoning_effort: Some("high".into()),
            ..ChatRequest::default()
        };
        let body = encode(&request, false);
        assert_eq!(body["reasoning"], serde_json::json!({"effort": "high"}));
    }

    #[test]
    fn encodes_tool_history_as_items_and_system_as_instructions() {
        let request = ChatRequest {
            model: "gpt-test".into(),
            messages: vec![
                Message::system("be brief"),
                Message::system("use tools"),
                Message::user("find main"),
                Message::assistant(
                    "looking",
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
            max_tokens: Some(256),
            cache_key: Some("session-1".into()),
            ..Default::default()
        };
        let body = encode(&request, false);
        assert_eq!(body["instructions"], "be brief\n\nuse tools");
        assert_eq!(
            body["input"],
            json!([
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "find main"}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "looking"}]},
                {"type": "function_call", "call_id": "c1", "name": "grep", "arguments": "{\"q\":\"main\"}"},
                {"type": "function_call_output", "call_id": "c1", "output": "src/main.rs"},
            ])
        );
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "name": "grep", "description": "search",
                    "parameters": {"type": "object"}, "strict": false}])
        );
        assert_eq!(body["temperature"], 0.5);
        assert_eq!(body["max_output_tokens"], 256);
        assert_eq!(body["prompt_cache_key"], "session-1");
        assert_eq!(body["store"], false);
        assert!(
            body.get("reasoning").is_none(),
            "no effort asked: none sent"
        );
        assert_eq!(body["stream"], false);
        assert!(body.get("top_p").is_none());
        assert!(body.get("max_tokens").is_none() && body.get("messages").is_none());
    }

    #[test]
    fn a_turn_that_only_calls_tools_has_no_message_item_and_no_tools_means_no_key() {
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![
                Message::user("hi"),
                Message::assistant(
                    "",
                    vec![ToolCall {
                        id: "c1".into(),
                        name: "ls".into(),
                        arguments: "{}".into(),
                    }],
                ),
                Message::tool_result("c1", "a.txt"),
            ],
            ..Default::default()
        };
        let body = encode(&request, true);
        let kinds: Vec<&str> = body["input"]
            .as_array()
            .expect("input is a list")
            .iter()
            .map(|item| item["type"].as_str().expect("typed item"))
            .collect();
        assert_eq!(kinds, ["message", "function_call", "function_call_output"]);
        assert!(body.get("instructions").is_none());
        assert!(body.get("tools").is_none());
        assert!(body.get("prompt_cache_key").is_none());
        assert_eq!(body["stream"], true);
    }

    #[test]
    fn a_tool_result_without_a_call_id_is_refused() {
        let mut result = Message::tool_result("c1", "x");
        result.tool_call_id = None;
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![Message::user("hi"), result],
            ..Default::default()
        };
        let error = Request::new(&request, false).expect_err("unpaired result");
        assert_eq!(
            error.to_string(),
            "message 1: a tool result has no tool_call_id"
        );
    }
}
