//! The Anthropic Messages wire format of the scripted model.
//!
//! Requests carry `system` at the top level and content blocks in `messages`
//! (`text`, `tool_use`, `tool_result`); they are flattened to the neutral
//! [`SeenMessage`] shape. Streamed answers follow the documented event order:
//! `message_start`, per block `content_block_start` / `content_block_delta`
//! (`text_delta` or `input_json_delta`) / `content_block_stop`, then `message_delta`
//! (stop reason and output tokens) and `message_stop`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::error::{InvalidRequest, Place};
use super::reply::{Answer, Frame, split_pieces};
use super::{SeenMessage, SeenRequest, WireFormat};

/// How many events streamed text and each tool input are split into.
const PIECES: usize = 3;

pub(super) fn parse(
    raw: Value,
    headers: BTreeMap<String, String>,
) -> Result<SeenRequest, InvalidRequest> {
    let model = raw["model"]
        .as_str()
        .ok_or("`model` must be a string")?
        .to_owned();
    if !raw["max_tokens"].is_u64() {
        return Err("`max_tokens` is required and must be a positive integer".into());
    }
    let mut messages = Vec::new();
    match &raw["system"] {
        Value::Null => {}
        system => messages.push(SeenMessage {
            role: "system".into(),
            content: text_of(system).map_err(InvalidRequest::at(Place::System))?,
            tool_calls: Vec::new(),
            tool_call_id: None,
        }),
    }
    let raw_messages = raw["messages"]
        .as_array()
        .ok_or("`messages` must be an array")?;
    for (i, message) in raw_messages.iter().enumerate() {
        push_message(&mut messages, message).map_err(InvalidRequest::at(Place::Message(i)))?;
        check_blocks(raw_messages, i).map_err(InvalidRequest::at(Place::Message(i)))?;
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
    check_thinking(&raw, raw_messages)?;
    let stream = raw["stream"].as_bool().unwrap_or(false);
    Ok(SeenRequest {
        format: WireFormat::Anthropic,
        model,
        messages,
        tools,
        stream,
        include_usage: true,
        headers,
        raw,
    })
}

fn parse_tool(tool: &Value) -> Result<String, InvalidRequest> {
    let name = tool["name"].as_str().ok_or("`name` must be a string")?;
    if !tool["input_schema"].is_object() {
        return Err("`input_schema` must be a json schema object".into());
    }
    Ok(name.to_owned())
}

/// What the real API answers 400 to with extended thinking on: a budget under 1,024
/// tokens or not under `max_tokens`, a temperature or top_p, and a last assistant turn
/// that calls tools without its thinking block first, unchanged (its signature).
fn check_thinking(raw: &Value, messages: &[Value]) -> Result<(), InvalidRequest> {
    if raw["thinking"]["type"] != "enabled" {
        return Ok(());
    }
    let budget = raw["thinking"]["budget_tokens"]
        .as_u64()
        .ok_or("thinking.budget_tokens must be a number")?;
    if budget < 1024 || budget >= raw["max_tokens"].as_u64().unwrap_or(0) {
        return Err("thinking.budget_tokens must be at least 1024 and less than max_tokens".into());
    }
    if !raw["temperature"].is_null() || !raw["top_p"].is_null() {
        return Err("thinking is not compatible with temperature or top_p".into());
    }
    let last_assistant = messages.iter().rev().find(|m| m["role"] == "assistant");
    if let Some(turn) = last_assistant {
        let blocks = turn["content"].as_array().cloned().unwrap_or_default();
        if blocks.iter().any(|b| b["type"] == "tool_use") {
            let first = blocks.first().cloned().unwrap_or_default();
            let signed = first["type"] == "thinking"
                && first["signature"].as_str()
                    == Some(
                        super::thinking_signature(first["thinking"].as_str().unwrap_or_default())
                            .as_str(),
                    );
            if !signed && first["type"] != "redacted_thinking" {
                return Err(
                    "Expected `thinking` or `redacted_thinking`, but found another block: \
                            the last assistant turn must start with its thinking block, unchanged"
                        .into(),
                );
            }
        }
    }
    Ok(())
}

/// Text of a string or of the `text` blocks of a block array.
fn text_of(content: &Value) -> Result<String, InvalidRequest> {
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => Ok(blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect()),
        _ => Err("content must be a string or an array of blocks".into()),
    }
}

fn push_message(out: &mut Vec<SeenMessage>, message: &Value) -> Result<(), InvalidRequest> {
    let role = message["role"].as_str().ok_or("`role` must be a string")?;
    let content = &message["content"];
    let blocks = match content {
        Value::String(_) => Vec::new(),
        Value::Array(blocks) => blocks.clone(),
        _ => return Err("`content` must be a string or an array of blocks".into()),
    };
    match role {
        "user" => {
            // Tool results answer the previous assistant turn, so they come first.
            for block in blocks.iter().filter(|b| b["type"] == "tool_result") {
                let id = block["tool_use_id"]
                    .as_str()
                    .ok_or("tool_result needs a `tool_use_id`")?;
                let text = match &block["content"] {
                    Value::Null => String::new(),
                    other => text_of(other)?,
                };
                out.push(SeenMessage {
                    role: "tool".into(),
                    content: text,
                    tool_calls: Vec::new(),
                    tool_call_id: Some(id.to_owned()),
                });
            }
            let text = text_of(content)?;
            if !text.is_empty() || blocks.is_empty() {
                out.push(SeenMessage {
                    role: "user".into(),
                    content: text,
                    tool_calls: Vec::new(),
                    tool_call_id: None,
                });
            }
        }
        "assistant" => {
            let mut tool_calls = Vec::new();
            for block in blocks.iter().filter(|b| b["type"] == "tool_use") {
                let id = block["id"].as_str().ok_or("tool_use needs an `id`")?;
                let name = block["name"].as_str().ok_or("tool_use needs a `name`")?;
                if !block["input"].is_object() {
                    return Err("tool_use `input` must be an object".into());
                }
                tool_calls.push((id.to_owned(), name.to_owned(), block["input"].to_string()));
            }
            out.push(SeenMessage {
                role: "assistant".into(),
                content: text_of(content)?,
                tool_calls,
                tool_call_id: None,
            });
        }
        other => {
            return Err(InvalidRequest::UnknownMessagesRole(other.to_owned()));
        }
    }
    Ok(())
}

/// Rejects what the real API answers 400 to, so client mistakes show in tests: blank
/// text blocks, `tool_result` blocks after other content, a `tool_use` not answered by
/// a `tool_result` in the next message, and a `tool_result` answering no `tool_use` of
/// the message before.
fn check_blocks(messages: &[Value], i: usize) -> Result<(), InvalidRequest> {
    let blocks = |m: Option<&Value>| -> Vec<Value> {
        m.and_then(|m| m["content"].as_array())
            .cloned()
            .unwrap_or_default()
    };
    let ids = |blocks: &[Value], kind: &str, key: &str| -> Vec<String> {
        blocks
            .iter()
            .filter(|b| b["type"] == kind)
            .filter_map(|b| b[key].as_str().map(str::to_owned))
            .collect()
    };
    let own = blocks(messages.get(i));
    if own
        .iter()
        .any(|b| b["type"] == "text" && b["text"].as_str().is_none_or(|t| t.trim().is_empty()))
    {
        return Err("text content blocks must contain non-whitespace text".into());
    }
    if let Some(first_other) = own.iter().position(|b| b["type"] != "tool_result")
        && own[first_other..]
            .iter()
            .any(|b| b["type"] == "tool_result")
    {
        return Err("tool_result blocks must come before any other content".into());
    }
    let results = ids(&own, "tool_result", "tool_use_id");
    let previous = if i == 0 {
        Vec::new()
    } else {
        blocks(messages.get(i - 1))
    };
    let asked = ids(&previous, "tool_use", "id");
    if let Some(id) = results.iter().find(|id| !asked.contains(id)) {
        return Err(InvalidRequest::ResultAnswersNoUse(id.clone()));
    }
    let calls = ids(&own, "tool_use", "id");
    if let Some(next) = messages.get(i + 1) {
        let answered = ids(&blocks(Some(next)), "tool_result", "tool_use_id");
        let missing: Vec<String> = calls
            .into_iter()
            .filter(|id| !answered.contains(id))
            .collect();
        if !missing.is_empty() {
            return Err(InvalidRequest::UsesNotAnswered(missing));
        }
    }
    Ok(())
}

fn stop_reason(finish_reason: &str) -> &str {
    match finish_reason {
        "stop" => "end_turn",
        "tool_calls" => "tool_use",
        "length" => "max_tokens",
        other => other,
    }
}

pub(super) fn response_json(answer: &Answer<'_>, request: &SeenRequest) -> Value {
    let mut content = Vec::new();
    if let Some(thinking) = answer.thinking {
        content.push(json!({"type": "thinking", "thinking": thinking,
                            "signature": super::thinking_signature(thinking)}));
    }
    if !answer.text.is_empty() {
        content.push(json!({"type": "text", "text": answer.text}));
    }
    for call in answer.tool_calls {
        content.push(
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}),
        );
    }
    json!({
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": content,
        "stop_reason": stop_reason(answer.finish_reason),
        "stop_sequence": null,
        "usage": usage_json(answer, answer.usage.1),
    })
}

/// The API's usage: `input_tokens` counts the input neither read from nor written to
/// the cache.
fn usage_json(answer: &Answer<'_>, output: u64) -> Value {
    let (read, written) = answer.cache;
    let mut usage = json!({
        "input_tokens": answer.usage.0.saturating_sub(read + written),
        "output_tokens": output,
    });
    if read + written > 0 {
        usage["cache_read_input_tokens"] = read.into();
        usage["cache_creation_input_tokens"] = written.into();
    }
    usage
}

/// `message_start` and a `ping`, which open every stream.
fn opening_frames(answer: &Answer<'_>, request: &SeenRequest) -> Vec<Frame> {
    let start = json!({"type": "message_start", "message": {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": [],
        "stop_reason": null,
        "stop_sequence": null,
        "usage": usage_json(answer, 1),
    }});
    vec![
        Frame::event("message_start", &start, false),
        Frame::event("ping", &json!({"type": "ping"}), false),
    ]
}

/// A failure after the 200 was sent: the opening events, then an `error` event.
pub(super) fn error_frames(
    message: &str,
    answer: &Answer<'_>,
    request: &SeenRequest,
) -> Vec<Frame> {
    let mut frames = opening_frames(answer, request);
    let error = json!({"type": "error", "error": {"type": "overloaded_error", "message": message}});
    frames.push(Frame::event("error", &error, false));
    frames
}

pub(super) fn stream_frames(answer: &Answer<'_>, request: &SeenRequest) -> Vec<Frame> {
    let mut frames = opening_frames(answer, request);
    let mut index = 0;
    let mut block = |frames: &mut Vec<Frame>, head: Value, deltas: Vec<Value>| {
        frames.push(Frame::event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": head}),
            false,
        ));
        for delta in deltas {
            let event = json!({"type": "content_block_delta", "index": index, "delta": delta});
            frames.push(Frame::event("content_block_delta", &event, true));
        }
        let stop = json!({"type": "content_block_stop", "index": index});
        frames.push(Frame::event("content_block_stop", &stop, false));
        index += 1;
    };
    if let Some(thinking) = answer.thinking {
        let mut deltas: Vec<Value> = split_pieces(thinking, PIECES)
            .into_iter()
            .map(|piece| json!({"type": "thinking_delta", "thinking": piece}))
            .collect();
        deltas.push(json!({"type": "signature_delta",
                           "signature": super::thinking_signature(thinking)}));
        block(
            &mut frames,
            json!({"type": "thinking", "thinking": ""}),
            deltas,
        );
    }
    if !answer.text.is_empty() {
        let deltas = split_pieces(answer.text, PIECES)
            .into_iter()
            .map(|piece| json!({"type": "text_delta", "text": piece}))
            .collect();
        block(&mut frames, json!({"type": "text", "text": ""}), deltas);
    }
    for call in answer.tool_calls {
        let deltas = split_pieces(&call.arguments.to_string(), PIECES)
            .into_iter()
            .map(|piece| json!({"type": "input_json_delta", "partial_json": piece}))
            .collect();
        let head = json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}});
        block(&mut frames, head, deltas);
    }
    let delta = json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(answer.finish_reason), "stop_sequence": null},
        "usage": {"output_tokens": answer.usage.1},
    });
    frames.push(Frame::event("message_delta", &delta, false));
    frames.push(Frame::event(
        "message_stop",
        &json!({"type": "message_stop"}),
        false,
    ));
    frames
}

#[cfg(test)]
mod tests {
    use super::super::reply::ScriptedToolCall;
    use super::*;

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

    #[test]
    fn flattens_system_tool_use_and_tool_result() {
        let seen = parse(
            json!({"model": "claude", "max_tokens": 100, "system": "be brief", "messages": [
                {"role": "user", "content": "find it"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "looking"},
                    {"type": "tool_use", "id": "t1", "name": "grep", "input": {"q": "x"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "found"}]},
            ], "tools": [{"name": "grep", "description": "d", "input_schema": {"type": "object"}}]}),
            BTreeMap::new(),
        )
        .expect("request parses");
        let roles: Vec<&str> = seen.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool"]);
        assert_eq!(
            seen.messages[2].tool_calls,
            vec![("t1".into(), "grep".into(), "{\"q\":\"x\"}".into())]
        );
        assert_eq!(seen.messages[3].tool_call_id.as_deref(), Some("t1"));
        assert_eq!(seen.messages[3].content, "found");
        assert_eq!(seen.tools, vec!["grep"]);
        assert_eq!(seen.assistant_turns(), 1);
    }

    #[test]
    fn rejects_tool_use_not_answered_first_in_the_next_message() {
        let call = json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "grep", "input": {}}]});
        let parse_messages = |messages: Value| {
            parse(
                json!({"model": "m", "max_tokens": 5, "messages": messages}),
                BTreeMap::new(),
            )
            .map_err(|e| e.to_string())
        };
        let unanswered = parse_messages(json!([call, {"role": "user", "content": "next"}]))
            .expect_err("tool_use needs a tool_result");
        assert!(unanswered.contains("without tool_result"), "{unanswered}");
        let late = parse_messages(json!([call, {"role": "user", "content": [
            {"type": "text", "text": "first"},
            {"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}]))
        .expect_err("results come first");
        assert!(late.contains("before any other content"), "{late}");
        let stray = parse_messages(json!([{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t9", "content": "x"}]}]))
        .expect_err("result answers nothing");
        assert!(stray.contains("\"t9\""), "{stray}");
        let blank = parse_messages(json!([{"role": "user", "content": [
            {"type": "text", "text": "  "}]}]))
        .expect_err("blank text");
        assert!(blank.contains("non-whitespace"), "{blank}");
    }

    #[test]
    fn rejects_request_without_max_tokens() {
        let err = parse(json!({"model": "m", "messages": []}), BTreeMap::new())
            .expect_err("max_tokens is required")
            .to_string();
        assert!(err.contains("max_tokens"), "{err}");
    }

    #[test]
    fn with_thinking_on_a_tool_turn_without_its_signed_thinking_block_is_refused() {
        let request = |first_block: Value| {
            json!({"model": "m", "max_tokens": 4096,
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [first_block,
                    {"type": "tool_use", "id": "t1", "name": "grep", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}
            ]})
        };
        let signed = json!({"type": "thinking", "thinking": "hm",
                            "signature": super::super::thinking_signature("hm")});
        parse(request(signed), BTreeMap::new()).expect("signed thinking first");
        let forged = json!({"type": "thinking", "thinking": "hm", "signature": "forged"});
        let err = parse(request(forged), BTreeMap::new())
            .expect_err("changed thinking")
            .to_string();
        assert!(err.contains("thinking"), "{err}");
        let text = json!({"type": "text", "text": "let me look"});
        parse(request(text), BTreeMap::new()).expect_err("no thinking block");
    }

    #[test]
    fn response_has_text_and_tool_use_blocks_with_stop_reason() {
        let calls = [ScriptedToolCall {
            id: "t1".into(),
            name: "grep".into(),
            arguments: json!({"q": 1}),
        }];
        let request = parse(
            json!({"model": "m", "max_tokens": 5, "messages": []}),
            BTreeMap::new(),
        )
        .expect("parses");
        let answer = Answer {
            text: "hm",
            tool_calls: &calls,
            usage: (7, 8),
            finish_reason: "tool_calls",
            cache: (0, 0),
            thinking: None,
        };
        let body = response_json(&answer, &request);
        assert_eq!(body["content"][0], json!({"type": "text", "text": "hm"}));
        assert_eq!(body["content"][1]["input"], json!({"q": 1}));
        assert_eq!(body["stop_reason"], "tool_use");
        assert_eq!(
            body["usage"],
            json!({"input_tokens": 7, "output_tokens": 8})
        );
    }

    #[test]
    fn stream_events_follow_the_documented_order_and_reassemble() {
        let calls = [ScriptedToolCall {
            id: "t1".into(),
            name: "grep".into(),
            arguments: json!({"pattern": "abc"}),
        }];
        let request = parse(
            json!({"model": "m", "max_tokens": 5, "messages": [], "stream": true}),
            BTreeMap::new(),
        )
        .expect("parses");
        let answer = Answer {
            text: "hello there",
            tool_calls: &calls,
            usage: (7, 8),
            finish_reason: "tool_calls",
            cache: (0, 0),
            thinking: None,
        };
        let events = events(&stream_frames(&answer, &request));
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names.first(), Some(&"message_start"));
        assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
        let text: String = events
            .iter()
            .filter(|(_, d)| d["delta"]["type"] == "text_delta")
            .map(|(_, d)| d["delta"]["text"].as_str().expect("text"))
            .collect();
        assert_eq!(text, "hello there");
        let input: String = events
            .iter()
            .filter(|(_, d)| d["delta"]["type"] == "input_json_delta")
            .map(|(_, d)| d["delta"]["partial_json"].as_str().expect("partial json"))
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&input).expect("json"),
            calls[0].arguments
        );
        let tool_start = events
            .iter()
            .find(|(n, d)| n == "content_block_start" && d["content_block"]["type"] == "tool_use")
            .expect("tool_use block");
        assert_eq!(tool_start.1["index"], 1);
        assert_eq!(
            events[events.len() - 2].1["delta"]["stop_reason"],
            "tool_use"
        );
        assert_eq!(events[events.len() - 2].1["usage"]["output_tokens"], 8);
    }
}
