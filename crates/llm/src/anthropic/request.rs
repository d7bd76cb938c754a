//! The Messages API request body.
//!
//! The neutral conversation is reshaped to what the API accepts:
//!
//! - system messages, wherever they stand, are joined (blank line between) into the
//!   top-level `system`: the API has no system role inside `messages`;
//! - an assistant turn becomes `text` and `tool_use` blocks; `tool_use.input` must be
//!   an object, so arguments are parsed: empty arguments become `{}`, and arguments
//!   that are not a JSON object (a call cut off by `max_tokens`, or a malformed one
//!   from another model) become `{"_raw": "<the text>"}`, so that the model later sees
//!   what it actually sent next to the tool's error, instead of a silent `{}`;
//! - each tool result becomes a `tool_result` block of a user message;
//! - text blocks that are empty or only whitespace are dropped (the API rejects them),
//!   and so are messages left with no block;
//! - neighbouring messages of the same role are merged into one, so tool results of one
//!   turn (and a user message right after them) form a single user message, with the
//!   `tool_result` blocks first, as the API requires;
//! - `top_p` is sent only when `temperature` is not: current models reject the two
//!   together, and the API's advice is to set one of them.

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::error::RequestError;
use crate::types::{ChatRequest, Reasoning, Role, ToolSchema};

/// Key under which arguments that are not a JSON object are sent as text.
const RAW_ARGUMENTS_KEY: &str = "_raw";

/// The request body of `POST /v1/messages`.
#[derive(Debug, Serialize)]
pub(super) struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<Vec<Cached<SystemBlock>>>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Cached<WireTool<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    stream: bool,
    /// Extended thinking, with its token budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
}

#[derive(Debug, Serialize)]
struct Thinking {
    r#type: &'static str,
    budget_tokens: u32,
}

/// Room for the answer above a thinking budget: `max_tokens` must exceed it.
const ANSWER_ROOM_ABOVE_THINKING: u32 = 1024;

#[derive(Debug, Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Cached<Block<'a>>>,
}

/// A block, a tool or the system prompt, marked as the end of a prefix to cache
/// (`cache_control`) when it is one.
#[derive(Debug, Serialize)]
struct Cached<T> {
    #[serde(flatten)]
    item: T,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

impl<T> Cached<T> {
    fn plain(item: T) -> Self {
        Self {
            item,
            cache_control: None,
        }
    }
}

/// Anthropic's one kind of cache breakpoint.
#[derive(Debug, Clone, Copy, Serialize)]
struct CacheControl {
    r#type: &'static str,
}

const EPHEMERAL: CacheControl = CacheControl {
    r#type: "ephemeral",
};

#[derive(Debug, Serialize)]
struct SystemBlock {
    r#type: &'static str,
    text: String,
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        /// Optional in the API; an empty one is left out rather than sent as `""`.
        #[serde(skip_serializing_if = "str::is_empty")]
        content: &'a str,
    },
    /// The model's thinking before a turn, sent back as it came.
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a RawValue,
    input_schema: &'a RawValue,
}

/// Schema for a tool defined without one; the API requires an object schema.
static EMPTY_SCHEMA: std::sync::LazyLock<ToolSchema> =
    std::sync::LazyLock::new(|| ToolSchema::new(&json!({"type": "object", "properties": {}})));

impl<'a> MessagesRequest<'a> {
    /// Encodes `request`; `default_max_tokens` applies when the request sets none,
    /// since the API requires it. Fails on a tool result that names no call.
    pub(super) fn new(
        request: &'a ChatRequest,
        default_max_tokens: u32,
        stream: bool,
    ) -> Result<Self, RequestError> {
        let mut system = Vec::new();
        let mut messages: Vec<WireMessage<'a>> = Vec::new();
        for (i, message) in request.messages.iter().enumerate() {
            let (role, blocks) = match message.role {
                Role::System => {
                    if !message.content.trim().is_empty() {
                        system.push(message.content.as_str());
                    }
                    continue;
                }
                Role::User => ("user", text_block(&message.content).into_iter().collect()),
                Role::Assistant => {
                    // Its thinking first, as the model wrote it.
                    let mut blocks: Vec<Block<'a>> = message
                        .reasoning
                        .iter()
                        .map(|r| match r {
                            Reasoning::Thinking { text, signature } => Block::Thinking {
                                thinking: text,
                                signature,
                            },
                            Reasoning::Redacted { data } => Block::RedactedThinking { data },
                        })
                        .collect();
                    blocks.extend(text_block(&message.content));
                    blocks.extend(message.tool_calls.iter().map(|call| Block::ToolUse {
                        id: &call.id,
                        name: &call.name,
                        input: tool_input(&call.arguments),
                    }));
                    ("assistant", blocks)
                }
                Role::Tool => {
                    let id = message
                        .tool_call_id
                        .as_deref()
                        .filter(|id| !id.is_empty())
                        .ok_or(RequestError::ToolResultNamesNoCall { message: i })?;
                    let result = Block::ToolResult {
                        tool_use_id: id,
                        content: &message.content,
                    };
                    ("user", vec![result])
                }
            };
            if blocks.is_empty() {
                continue;
            }
            let blocks = blocks.into_iter().map(Cached::plain);
            match messages.last_mut() {
                Some(last) if last.role == role => last.content.extend(blocks),
                _ => messages.push(WireMessage {
                    role,
                    content: blocks.collect(),
                }),
            }
        }
        for message in &mut messages {
            // Stable: results keep their order, and so does the text after them.
            message
                .content
                .sort_by_key(|block| !matches!(block.item, Block::ToolResult { .. }));
        }
        // Caching: three breakpoints (of the four allowed), each ending a prefix that
        // the session's next request repeats: the tools, the system prompt, and the
        // conversation so far (its last block; the next request reads it from the
        // cache and writes its own turns after it).
        let cache = request.cache_key.is_some().then_some(EPHEMERAL);
        if let Some(last) = messages.last_mut().and_then(|m| m.content.last_mut()) {
            last.cache_control = cache;
        }
        let mut tools: Vec<Cached<WireTool<'a>>> = request
            .tools
            .iter()
            .map(|tool| {
                Cached::plain(WireTool {
                    name: &tool.name,
                    description: tool.description.raw(),
                    input_schema: if tool.parameters.is_null() {
                        EMPTY_SCHEMA.raw()
                    } else {
                        tool.parameters.raw()
                    },
                })
            })
            .collect();
        if let Some(last) = tools.last_mut() {
            last.cache_control = cache;
        }
        let thinking = request.thinking_budget.map(|budget_tokens| Thinking {
            r#type: "enabled",
            budget_tokens,
        });
        let max_tokens = request.max_tokens.unwrap_or(default_max_tokens);
        let max_tokens = match &thinking {
            Some(t) => max_tokens.max(t.budget_tokens + ANSWER_ROOM_ABOVE_THINKING),
            None => max_tokens,
        };
        Ok(Self {
            model: &request.model,
            max_tokens,
            system: (!system.is_empty()).then(|| {
                vec![Cached {
                    item: SystemBlock {
                        r#type: "text",
                        text: system.join("\n\n"),
                    },
                    cache_control: cache,
                }]
            }),
            messages,
            tools,
            // Thinking takes neither a temperature nor a top_p.
            temperature: request.temperature.filter(|_| thinking.is_none()),
            top_p: request
                .top_p
                .filter(|_| request.temperature.is_none() && thinking.is_none()),
            stream,
            thinking,
        })
    }
}

fn text_block(text: &str) -> Option<Block<'_>> {
    (!text.trim().is_empty()).then_some(Block::Text { text })
}

/// `tool_use.input` for the arguments text the model produced; see the module docs.
pub(super) fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(Map::new());
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(object @ Value::Object(_)) => object,
        _ => json!({ RAW_ARGUMENTS_KEY: arguments }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Message, ToolCall, ToolDef};

    fn encode(request: &ChatRequest) -> Value {
        serde_json::to_value(MessagesRequest::new(request, 4096, false).expect("request encodes"))
            .expect("request serializes")
    }

    fn call(id: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "grep".into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn a_thinking_budget_asks_for_thinking_and_sends_the_turns_thinking_back_first() {
        let mut turn = Message::assistant("", vec![call("c1", "{}")]);
        turn.reasoning = vec![
            crate::types::Reasoning::Thinking {
                text: "look first".into(),
                signature: "sig".into(),
            },
            crate::types::Reasoning::Redacted { data: "xyz".into() },
        ];
        let request = ChatRequest {
            model: "claude".into(),
            messages: vec![
                Message::user("look"),
                turn,
                Message::tool_result("c1", "found"),
            ],
            temperature: Some(0.2),
            top_p: Some(0.9),
            thinking_budget: Some(8000),
            ..ChatRequest::default()
        };
        let body = encode(&request);
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 8000})
        );
        assert_eq!(
            body["max_tokens"], 9024,
            "room for the answer above the budget"
        );
        assert!(body.get("temperature").is_none() && body.get("top_p").is_none());
        let blocks = &body["messages"][1]["content"];
        assert_eq!(
            blocks[0],
            json!({"type": "thinking", "thinking": "look first", "signature": "sig"})
        );
        assert_eq!(
            blocks[1],
            json!({"type": "redacted_thinking", "data": "xyz"})
        );
        assert_eq!(blocks[2]["type"], "tool_use");
    }

    #[test]
    fn a_cache_key_marks_the_tools_the_system_prompt_and_the_last_block() {
        let tool = ToolDef {
            name: "grep".into(),
            description: "search".into(),
            parameters: ToolSchema::new(&json!({"type": "object"})),
        };
        let mut request = ChatRequest {
            model: "claude".into(),
            messages: vec![
                Message::system("be brief"),
                Message::user("look"),
                Message::assistant("", vec![call("c1", "{}")]),
                Message::tool_result("c1", "found"),
            ],
            tools: vec![
                tool.clone(),
                ToolDef {
                    name: "read".into(),
                    ..tool
                },
            ],
            ..ChatRequest::default()
        };
        let plain = encode(&request);
        assert!(!plain.to_string().contains("cache_control"), "{plain}");
        request.cache_key = Some("session-1".into());
        let cached = encode(&request);
        let ephemeral = json!({"type": "ephemeral"});
        assert_eq!(cached["tools"][1]["cache_control"], ephemeral);
        assert!(cached["tools"][0].get("cache_control").is_none());
        assert_eq!(cached["system"][0]["cache_control"], ephemeral);
        assert_eq!(cached["system"][0]["text"], "be brief");
        let last = &cached["messages"][2]["content"][0];
        assert_eq!(last["type"], "tool_result");
        assert_eq!(last["cache_control"], ephemeral);
        assert_eq!(cached.to_string().matches("cache_control").count(), 3);
    }

    #[test]
    fn hoists_system_messages_and_maps_tool_history_to_blocks() {
        let request = ChatRequest {
            model: "claude".into(),
            messages: vec![
                Message::system("be brief"),
                Message::user("find main"),
                Message::assistant("looking", vec![call("t1", "{\"q\":\"main\"}")]),
                Message::tool_result("t1", "src/main.rs"),
                Message::system("stay on task"),
            ],
            tools: vec![ToolDef {
                name: "grep".into(),
                description: "search".into(),
                parameters: json!({"type": "object"}).into(),
            }],
            temperature: Some(0.5),
            ..Default::default()
        };
        let body = encode(&request);
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "be brief\n\nstay on task"}])
        );
        assert_eq!(body["max_tokens"], 4096);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "find main"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "looking"},
                    {"type": "tool_use", "id": "t1", "name": "grep", "input": {"q": "main"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "src/main.rs"}]},
            ])
        );
        assert_eq!(
            body["tools"],
            json!([{"name": "grep", "description": "search", "input_schema": {"type": "object"}}])
        );
        assert_eq!(body["temperature"], 0.5);
        assert!(body.get("top_p").is_none());
        assert_eq!(body["stream"], false);
    }

    #[test]
    fn merges_consecutive_tool_results_and_following_user_text() {
        let request = ChatRequest {
            model: "claude".into(),
            max_tokens: Some(100),
            messages: vec![
                Message::user("go"),
                Message::assistant("", vec![call("a", "{}"), call("b", "{}")]),
                Message::tool_result("a", "one"),
                Message::tool_result("b", ""),
                Message::user("Summarize the task tool output above and continue."),
            ],
            ..Default::default()
        };
        let body = encode(&request);
        assert_eq!(body["max_tokens"], 100);
        let messages = body["messages"].as_array().expect("messages");
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert_eq!(
            messages[1]["content"],
            json!([
                {"type": "tool_use", "id": "a", "name": "grep", "input": {}},
                {"type": "tool_use", "id": "b", "name": "grep", "input": {}}])
        );
        assert_eq!(
            messages[2]["content"],
            json!([
                {"type": "tool_result", "tool_use_id": "a", "content": "one"},
                {"type": "tool_result", "tool_use_id": "b"},
                {"type": "text", "text": "Summarize the task tool output above and continue."}])
        );
    }

    #[test]
    fn tool_results_come_first_even_after_user_text() {
        let request = ChatRequest {
            model: "claude".into(),
            messages: vec![
                Message::assistant("", vec![call("a", "{}")]),
                Message::user("also"),
                Message::tool_result("a", "done"),
            ],
            ..Default::default()
        };
        let body = encode(&request);
        assert_eq!(body["messages"][1]["content"][0]["type"], "tool_result");
        assert_eq!(body["messages"][1]["content"][1]["type"], "text");
    }

    #[test]
    fn drops_blank_text_and_the_messages_it_empties() {
        let request = ChatRequest {
            model: "claude".into(),
            messages: vec![
                Message::user("one"),
                Message::assistant("  ", Vec::new()),
                Message::user("two"),
            ],
            ..Default::default()
        };
        assert_eq!(
            encode(&request)["messages"],
            json!([{"role": "user", "content": [
                {"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}])
        );
    }

    #[test]
    fn arguments_that_are_not_an_object_are_sent_as_raw_text() {
        assert_eq!(tool_input(""), json!({}));
        assert_eq!(tool_input("{\"a\":1}"), json!({"a": 1}));
        assert_eq!(tool_input("{\"a\":"), json!({"_raw": "{\"a\":"}), "cut off");
        assert_eq!(tool_input("[1]"), json!({"_raw": "[1]"}), "not an object");
    }

    #[test]
    fn a_tool_result_without_a_call_id_is_refused() {
        let mut result = Message::tool_result("", "x");
        result.tool_call_id = None;
        let request = ChatRequest {
            model: "claude".into(),
            messages: vec![result],
            ..Default::default()
        };
        let error = MessagesRequest::new(&request, 1, false).expect_err("no id");
        assert!(error.to_string().contains("message 0"), "{error}");
    }

    #[test]
    fn top_p_gives_way_to_temperature() {
        let both = ChatRequest {
            temperature: Some(0.2),
            top_p: Some(0.9),
            ..Default::default()
        };
        let body = encode(&both);
        assert_eq!(body["temperature"], json!(0.2_f32));
        assert!(body.get("top_p").is_none());
        let only_top_p = ChatRequest {
            top_p: Some(0.5),
            ..Default::default()
        };
        assert_eq!(encode(&only_top_p)["top_p"], 0.5);
    }

    #[test]
    fn a_tool_without_a_schema_gets_an_empty_object_schema() {
        let request = ChatRequest {
            model: "claude".into(),
            tools: vec![ToolDef {
                name: "now".into(),
                description: "the time".into(),
                parameters: Value::Null.into(),
            }],
            ..Default::default()
        };
        assert_eq!(
            encode(&request)["tools"][0]["input_schema"],
            json!({"type": "object", "properties": {}})
        );
    }
}
