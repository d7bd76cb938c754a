//! The OpenAI Responses wire format of the scripted model.
//!
//! Requests carry the system prompt as `instructions` and the conversation as `input`
//! items: messages (`input_text` parts for the user, `output_text` for the assistant),
//! `function_call`s and `function_call_output`s. They are flattened to the neutral
//! [`SeenMessage`] shape: `instructions` becomes a `system` message first, the
//! function calls of a turn join the assistant message before them (or start one),
//! and each output becomes a `tool` message. Parsing rejects what the real API
//! answers 400 to: chat-completions fields (`messages`, `max_tokens`), tools nested
//! under `function`, parts of the wrong direction, an output that answers no earlier
//! call, and a call that no output answers.
//!
//! Streamed answers follow the documented event order: `response.created`,
//! `response.in_progress`, per output item `response.output_item.added`, its deltas
//! (`response.output_text.delta` inside a content part, or
//! `response.function_call_arguments.delta`), their `.done` and
//! `response.output_item.done`, then `response.completed` (or `response.incomplete`
//! when cut by the output limit) carrying the whole response with its usage.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Value, json};

use super::error::{InvalidRequest, Place};
use super::reply::{Answer, Frame, ScriptedToolCall, split_pieces};
use super::{SeenMessage, SeenRequest, WireFormat};

/// How many events streamed text and each call's arguments are split into.
const PIECES: usize = 3;

/// The id of the scripted answer's message item.
const MESSAGE_ID: &str = "msg_scripted";

pub(super) fn parse(
    raw: Value,
    headers: BTreeMap<String, String>,
) -> Result<SeenRequest, InvalidRequest> {
    let model = raw["model"]
        .as_str()
        .ok_or("`model` must be a string")?
        .to_owned();
    for key in ["messages", "max_tokens"] {
        if raw.get(key).is_some() {
            return Err(InvalidRequest::ChatCompletionsField(key));
        }
    }
    let mut messages = Vec::new();
    match &raw["instructions"] {
        Value::Null => {}
        Value::String(text) => messages.push(message("system", text.clone())),
        _ => return Err("`instructions` must be a string".into()),
    }
    match &raw["input"] {
        Value::String(text) => messages.push(message("user", text.clone())),
        Value::Array(items) => {
            let mut calls = Calls::default();
            for (i, item) in items.iter().enumerate() {
                push_item(&mut messages, &mut calls, item)
                    .map_err(InvalidRequest::at(Place::Input(i)))?;
            }
            if let Some(id) = calls.unanswered.first() {
                return Err(InvalidRequest::CallNotAnswered(id.clone()));
            }
        }
        _ => return Err("`input` must be a string or an array of items".into()),
    }
    let tools = match &raw["tools"] {
        Value::Null => Vec::new(),
        Value::Array(tools) => tools
            .iter()
            .enumerate()
            .map(|(i, t)| parse_tool(t).map_err(InvalidRequest::at(Place::Tool(i))))
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err("`tools` must be an array".into()),
    };
    let stream = raw["stream"].as_bool().unwrap_or(false);
    Ok(SeenRequest {
        format: WireFormat::Responses,
        model,
        messages,
        tools,
        stream,
        // Usage is always in the closing event.
        include_usage: true,
        headers,
        raw,
    })
}

fn message(role: &str, content: String) -> SeenMessage {
    SeenMessage {
        role: role.to_owned(),
        content,
        tool_calls: Vec::new(),
        tool_call_id: None,
    }
}

/// The function calls of the input so far.
#[derive(Default)]
struct Calls {
    asked: HashSet<String>,
    /// In the order asked.
    unanswered: Vec<String>,
}

fn push_item(
    out: &mut Vec<SeenMessage>,
    calls: &mut Calls,
    item: &Value,
) -> Result<(), InvalidRequest> {
    match item["type"].as_str() {
        // The short form of a message has no `type`.
        Some("message") | None => {
            let role = item["role"].as_str().ok_or("`role` must be a string")?;
            if !matches!(role, "system" | "developer" | "user" | "assistant") {
                return Err(InvalidRequest::UnknownRole(role.to_owned()));
            }
            out.push(message(role, text_of(role, &item["content"])?));
        }
        Some("function_call") => {
            let field = |key: &'static str| {
                item[key]
                    .as_str()
                    .ok_or(InvalidRequest::FunctionCallField(key))
            };
            let call_id = field("call_id")?;
            let name = field("name")?;
            let arguments = item["arguments"]
                .as_str()
                .ok_or("function_call `arguments` must be a string of json")?;
            if !calls.asked.insert(call_id.to_owned()) {
                return Err(InvalidRequest::DuplicateCall(call_id.to_owned()));
            }
            calls.unanswered.push(call_id.to_owned());
            let call = (call_id.to_owned(), name.to_owned(), arguments.to_owned());
            // The calls of one turn follow its text, if any, and each other.
            match out.last_mut() {
                Some(last) if last.role == "assistant" => last.tool_calls.push(call),
                _ => out.push(SeenMessage {
                    tool_calls: vec![call],
                    ..message("assistant", String::new())
                }),
            }
        }
        Some("function_call_output") => {
            let call_id = item["call_id"]
                .as_str()
                .ok_or("function_call_output `call_id` must be a string")?;
            if !calls.asked.contains(call_id) {
                return Err(InvalidRequest::OutputAnswersNoCall(call_id.to_owned()));
            }
            calls.unanswered.retain(|id| id != call_id);
            let output = match &item["output"] {
                Value::String(text) => text.clone(),
                parts @ Value::Array(_) => text_of("user", parts)?,
                _ => return Err("function_call_output `output` must be a string or parts".into()),
            };
            out.push(SeenMessage {
                tool_call_id: Some(call_id.to_owned()),
                ..message("tool", output)
            });
        }
        // Reasoning a model produced earlier may be passed back; it holds no text.
        Some("reasoning") => {}
        Some(other) => return Err(InvalidRequest::UnknownItemType(other.to_owned())),
    }
    Ok(())
}

/// Text of a message's content: a string, or its text parts, which must be of the
/// message's direction (`output_text` for the assistant, `input_text` otherwise).
fn text_of(role: &str, content: &Value) -> Result<String, InvalidRequest> {
    let parts = match content {
        Value::String(text) => return Ok(text.clone()),
        Value::Array(parts) => parts,
        _ => return Err("`content` must be a string or an array of parts".into()),
    };
    let allowed: &'static [&'static str] = if role == "assistant" {
        &["output_text", "refusal"]
    } else {
        &["input_text", "input_image", "input_file"]
    };
    let mut text = String::new();
    for part in parts {
        let kind = part["type"].as_str().ok_or("a part needs a `type`")?;
        if !allowed.contains(&kind) {
            return Err(InvalidRequest::PartType {
                kind: kind.to_owned(),
                role: role.to_owned(),
                allowed,
            });
        }
        if let Some(part_text) = part["text"].as_str() {
            text.push_str(part_text);
        }
    }
    Ok(text)
}

fn parse_tool(tool: &Value) -> Result<String, InvalidRequest> {
    if tool["type"] != "function" {
        return Err("`type` must be \"function\"".into());
    }
    let name = tool["name"]
        .as_str()
        .ok_or("`name` must be a string (Responses tools are flat, not nested under `function`)")?;
    if !tool["parameters"].is_object() {
        return Err(InvalidRequest::ToolSchema {
            name: name.to_owned(),
            field: "parameters",
        });
    }
    Ok(name.to_owned())
}

/// The response's status and, when cut short, why.
fn status(answer: &Answer<'_>) -> (&'static str, Option<&'static str>) {
    match answer.finish_reason {
        "length" => ("incomplete", Some("max_output_tokens")),
        "content_filter" => ("incomplete", Some("content_filter")),
        _ => ("completed", None),
    }
}

fn usage_json(answer: &Answer<'_>) -> Value {
    let (input, output) = answer.usage;
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": answer.cache.0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + output,
    })
}

fn message_item(text: &str, status: &str) -> Value {
    let content = if text.is_empty() {
        json!([])
    } else {
        json!([{"type": "output_text", "text": text, "annotations": []}])
    };
    json!({"type": "message", "id": MESSAGE_ID, "status": status, "role": "assistant", "content": content})
}

fn call_item_id(index: usize) -> String {
    format!("fc_scripted_{index}")
}

fn call_item(index: usize, call: &ScriptedToolCall, arguments: &str, status: &str) -> Value {
    json!({
        "type": "function_call",
        "id": call_item_id(index),
        "call_id": call.id,
        "name": call.name,
        "arguments": arguments,
        "status": status,
    })
}

/// The whole output: a message item when there is text, then a function call item
/// per call, in that order.
fn output(answer: &Answer<'_>) -> Vec<Value> {
    let (status, _) = status(answer);
    let mut output = Vec::new();
    if !answer.text.is_empty() {
        output.push(message_item(answer.text, status));
    }
    for call in answer.tool_calls {
        let index = output.len();
        output.push(call_item(index, call, &call.arguments.to_string(), status));
    }
    output
}

/// A response object with this status, output and usage.
fn response_object(request: &SeenRequest, status: &str, output: Vec<Value>, usage: Value) -> Value {
    json!({
        "id": "resp_scripted",
        "object": "response",
        "created_at": 0,
        "status": status,
        "model": request.model,
        "output": output,
        "incomplete_details": null,
        "error": null,
        "usage": usage,
    })
}

pub(super) fn response_json(answer: &Answer<'_>, request: &SeenRequest) -> Value {
    let (status, reason) = status(answer);
    let mut response = response_object(request, status, output(answer), usage_json(answer));
    if let Some(reason) = reason {
        response["incomplete_details"] = json!({"reason": reason});
    }
    response
}

/// Events in order, each with its `type` and `sequence_number`.
#[derive(Default)]
struct Events {
    frames: Vec<Frame>,
}

impl Events {
    fn push(&mut self, name: &str, mut data: Value, content: bool) {
        data["type"] = name.into();
        data["sequence_number"] = self.frames.len().into();
        self.frames.push(Frame::event(name, &data, content));
    }

    /// `response.created` and `response.in_progress`, which open every stream.
    fn opening(request: &SeenRequest) -> Self {
        let mut events = Self::default();
        let response = response_object(request, "in_progress", Vec::new(), Value::Null);
        events.push("response.created", json!({"response": response}), false);
        events.push("response.in_progress", json!({"response": response}), false);
        events
    }
}

pub(super) fn stream_frames(answer: &Answer<'_>, request: &SeenRequest) -> Vec<Frame> {
    let mut events = Events::opening(request);
    let mut index = 0;
    if !answer.text.is_empty() {
        let item = json!({"output_index": index, "item": message_item("", "in_progress")});
        events.push("response.output_item.added", item, false);
        let part = |text: &str| {
            json!({"item_id": MESSAGE_ID, "output_index": index, "content_index": 0,
                   "part": {"type": "output_text", "text": text, "annotations": []}})
        };
        events.push("response.content_part.added", part(""), false);
        for piece in split_pieces(answer.text, PIECES) {
            let delta = json!({"item_id": MESSAGE_ID, "output_index": index,
                               "content_index": 0, "delta": piece});
            events.push("response.output_text.delta", delta, true);
        }
        let done = json!({"item_id": MESSAGE_ID, "output_index": index,
                          "content_index": 0, "text": answer.text});
        events.push("response.output_text.done", done, false);
        events.push("response.content_part.done", part(answer.text), false);
        let item = json!({"output_index": index, "item": message_item(answer.text, "completed")});
        events.push("response.output_item.done", item, false);
        index += 1;
    }
    for call in answer.tool_calls {
        let arguments = call.arguments.to_string();
        let item =
            json!({"output_index": index, "item": call_item(index, call, "", "in_progress")});
        events.push("response.output_item.added", item, false);
        for piece in split_pieces(&arguments, PIECES) {
            let delta =
                json!({"item_id": call_item_id(index), "output_index": index, "delta": piece});
            events.push("response.function_call_arguments.delta", delta, true);
        }
        let done =
            json!({"item_id": call_item_id(index), "output_index": index, "arguments": arguments});
        events.push("response.function_call_arguments.done", done, false);
        let item =
            json!({"output_index": index, "item": call_item(index, call, &arguments, "completed")});
        events.push("response.output_item.done", item, false);
        index += 1;
    }
    let response = response_json(answer, request);
    let closing = if response["status"] == "incomplete" {
        "response.incomplete"
    } else {
        "response.completed"
    };
    events.push(closing, json!({"response": response}), false);
    events.frames
}

/// A failure after the 200 was sent: the opening events, then `response.failed`.
pub(super) fn error_frames(message: &str, request: &SeenRequest) -> Vec<Frame> {
    let mut events = Events::opening(request);
    let mut response = response_object(request, "failed", Vec::new(), Value::Null);
    response["error"] = json!({"code": "server_error", "message": message});
    events.push("response.failed", json!({"response": response}), false);
    events.frames
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: Value) -> Result<SeenRequest, InvalidRequest> {
        parse(body, BTreeMap::new())
    }

    fn events(frames: &[Frame]) -> Vec<(String, Value)> {
        frames
            .iter()
            .map(|f| {
                let (name, data) = f
                    .text
                    .trim_end()
                    .split_once('\n')
                    .expect("event and data lines");
                let name = name.strip_prefix("event: ").expect("event line").to_owned();
                let data = data.strip_prefix("data: ").expect("data line");
                (name, serde_json::from_str(data).expect("data is json"))
            })
            .collect()
    }

    fn grep_call() -> Vec<ScriptedToolCall> {
        vec![ScriptedToolCall {
            id: "call_1".into(),
            name: "grep".into(),
            arguments: json!({"pattern": "fn main"}),
        }]
    }

    #[test]
    fn flattens_instructions_items_and_tools() {
        let seen = request(json!({"model": "gpt", "instructions": "be brief", "input": [
            {"role": "user", "content": "find it"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "looking"}]},
            {"type": "function_call", "call_id": "c1", "name": "grep", "arguments": "{\"q\":1}"},
            {"type": "function_call", "call_id": "c2", "name": "ls", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "found"},
            {"type": "function_call_output", "call_id": "c2", "output": "a.txt"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "thanks"}]},
        ], "tools": [{"type": "function", "name": "grep", "parameters": {"type": "object"}}],
           "stream": true}))
        .expect("request parses");
        let roles: Vec<&str> = seen.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(
            roles,
            ["system", "user", "assistant", "tool", "tool", "user"]
        );
        assert_eq!(seen.system_prompt(), Some("be brief"));
        assert_eq!(seen.messages[2].content, "looking");
        assert_eq!(
            seen.messages[2].tool_calls,
            vec![
                ("c1".into(), "grep".into(), "{\"q\":1}".into()),
                ("c2".into(), "ls".into(), "{}".into())
            ]
        );
        assert_eq!(seen.messages[3].tool_call_id.as_deref(), Some("c1"));
        assert_eq!(seen.assistant_turns(), 1);
        assert_eq!(seen.last_user_message(), Some("thanks"));
        assert_eq!(seen.tools, ["grep"]);
        assert!(seen.stream && seen.include_usage);
        assert_eq!(seen.format, WireFormat::Responses);
    }

    #[test]
    fn a_call_without_text_starts_an_assistant_turn_and_string_input_is_a_user_message() {
        let seen = request(json!({"model": "m", "input": [
            {"role": "user", "content": "go"},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "x"},
        ]}))
        .expect("request parses");
        let roles: Vec<&str> = seen.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "tool"]);
        let seen = request(json!({"model": "m", "input": "hello"})).expect("parses");
        assert_eq!(seen.first_user_message(), Some("hello"));
    }

    #[test]
    fn rejects_malformed_shapes() {
        let error = |body: Value| request(body).expect_err("malformed").to_string();
        let stray = error(json!({"model": "m", "input": [
            {"type": "function_call_output", "call_id": "c9", "output": "x"}]}));
        assert!(
            stray.contains("input[0]") && stray.contains("\"c9\""),
            "{stray}"
        );
        let unanswered = error(json!({"model": "m", "input": [
            {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
            {"role": "user", "content": "next"}]}));
        assert!(
            unanswered.contains("no function_call_output"),
            "{unanswered}"
        );
        let object_arguments = error(json!({"model": "m", "input": [
            {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": {}}]}));
        assert!(object_arguments.contains("arguments"), "{object_arguments}");
        let nested = error(json!({"model": "m", "input": [], "tools": [
            {"type": "function", "function": {"name": "grep", "parameters": {}}}]}));
        assert!(nested.contains("flat"), "{nested}");
        let direction = error(json!({"model": "m", "input": [
            {"role": "assistant", "content": [{"type": "input_text", "text": "x"}]}]}));
        assert!(direction.contains("input_text"), "{direction}");
        let chat = error(json!({"model": "m", "input": [], "max_tokens": 5}));
        assert!(chat.contains("max_tokens"), "{chat}");
        let messages = error(json!({"model": "m", "messages": []}));
        assert!(messages.contains("messages"), "{messages}");
    }

    #[test]
    fn response_holds_the_items_usage_and_an_incomplete_status() {
        let seen = request(json!({"model": "m", "input": []})).expect("parses");
        let calls = grep_call();
        let answer = Answer {
            text: "hm",
            tool_calls: &calls,
            usage: (7, 8),
            cache: (4, 0),
            finish_reason: "tool_calls",
            thinking: None,
        };
        let body = response_json(&answer, &seen);
        assert_eq!(body["status"], "completed");
        assert_eq!(body["output"][0]["content"][0]["text"], "hm");
        assert_eq!(body["output"][1]["call_id"], "call_1");
        assert_eq!(body["output"][1]["arguments"], "{\"pattern\":\"fn main\"}");
        assert_eq!(body["usage"]["input_tokens_details"]["cached_tokens"], 4);
        assert_eq!(body["usage"]["total_tokens"], 15);
        let cut = Answer {
            finish_reason: "length",
            tool_calls: &[],
            ..answer
        };
        let body = response_json(&cut, &seen);
        assert_eq!(body["status"], "incomplete");
        assert_eq!(body["incomplete_details"]["reason"], "max_output_tokens");
    }

    #[test]
    fn stream_events_follow_the_documented_order_and_reassemble() {
        let seen = request(json!({"model": "m", "input": [], "stream": true})).expect("parses");
        let calls = grep_call();
        let answer = Answer {
            text: "hello there",
            tool_calls: &calls,
            usage: (7, 8),
            cache: (0, 0),
            finish_reason: "tool_calls",
            thinking: None,
        };
        let frames = stream_frames(&answer, &seen);
        let events = events(&frames);
        for (i, (name, data)) in events.iter().enumerate() {
            assert_eq!(data["type"], name.as_str());
            assert_eq!(data["sequence_number"], i);
        }
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(&names[..2], ["response.created", "response.in_progress"]);
        assert_eq!(names.last(), Some(&"response.completed"));
        let text: String = events
            .iter()
            .filter(|(n, _)| n == "response.output_text.delta")
            .map(|(_, d)| d["delta"].as_str().expect("text"))
            .collect();
        assert_eq!(text, "hello there");
        let arguments: String = events
            .iter()
            .filter(|(n, _)| n == "response.function_call_arguments.delta")
            .map(|(_, d)| {
                assert_eq!(
                    (&d["output_index"], &d["item_id"]),
                    (&json!(1), &json!("fc_scripted_1"))
                );
                d["delta"].as_str().expect("arguments piece")
            })
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&arguments).expect("json"),
            calls[0].arguments
        );
        assert!(
            frames.iter().filter(|f| f.content).count() > 2,
            "split in pieces"
        );
        let closing = &events.last().expect("closing event").1["response"];
        assert_eq!(closing["usage"]["output_tokens"], 8);
        assert_eq!(closing["output"][1]["name"], "grep");
    }

    #[test]
    fn a_cut_stream_ends_incomplete_and_a_failure_with_response_failed() {
        let seen = request(json!({"model": "m", "input": [], "stream": true})).expect("parses");
        let answer = Answer {
            text: "partial",
            tool_calls: &[],
            usage: (1, 16),
            cache: (0, 0),
            finish_reason: "length",
            thinking: None,
        };
        let events = events(&stream_frames(&answer, &seen));
        let (name, data) = events.last().expect("closing event");
        assert_eq!(name, "response.incomplete");
        assert_eq!(
            data["response"]["incomplete_details"]["reason"],
            "max_output_tokens"
        );
        let failed = self::events(&error_frames("upstream failed", &seen));
        let (name, data) = failed.last().expect("failure event");
        assert_eq!(name, "response.failed");
        assert_eq!(data["response"]["error"]["message"], "upstream failed");
    }
}
