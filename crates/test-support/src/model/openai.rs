//! The OpenAI chat-completions wire format of the scripted model.
//!
//! Parsing is strict about the fields a client must get right (roles, tool-call ids,
//! `tool_call_id` on tool messages, the `function` tool shape): a malformed request is
//! answered 400, so client tests catch wire-format mistakes.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::error::{InvalidRequest, Place};
use super::reply::{Answer, Frame, split_pieces};
use super::{SeenMessage, SeenRequest, WireFormat};

/// How many events streamed text and each tool call's arguments are split into.
const PIECES: usize = 3;

pub(super) fn parse(
    raw: Value,
    headers: BTreeMap<String, String>,
) -> Result<SeenRequest, InvalidRequest> {
    let model = raw["model"]
        .as_str()
        .ok_or("`model` must be a string")?
        .to_owned();
    let messages = raw["messages"]
        .as_array()
        .ok_or("`messages` must be an array")?
        .iter()
        .enumerate()
        .map(|(i, m)| parse_message(m).map_err(InvalidRequest::at(Place::Message(i))))
        .collect::<Result<Vec<_>, _>>()?;
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
    let include_usage = raw["stream_options"]["include_usage"]
        .as_bool()
        .unwrap_or(false);
    Ok(SeenRequest {
        format: WireFormat::OpenAi,
        model,
        messages,
        tools,
        stream,
        include_usage,
        headers,
        raw,
    })
}

fn parse_message(m: &Value) -> Result<SeenMessage, InvalidRequest> {
    let role = m["role"].as_str().ok_or("`role` must be a string")?;
    if !matches!(role, "system" | "developer" | "user" | "assistant" | "tool") {
        return Err(InvalidRequest::UnknownRole(role.to_owned()));
    }
    let content = match &m["content"] {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        // Content parts: only text parts carry text.
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => return Err("`content` must be a string, an array of parts or null".into()),
    };
    let tool_calls = match &m["tool_calls"] {
        Value::Null => Vec::new(),
        Value::Array(calls) if role == "assistant" => calls
            .iter()
            .map(parse_tool_call)
            .collect::<Result<_, _>>()?,
        _ => return Err("`tool_calls` must be an array on an assistant message".into()),
    };
    let tool_call_id = m["tool_call_id"].as_str().map(str::to_owned);
    if role == "tool" && tool_call_id.is_none() {
        return Err("a tool message needs a `tool_call_id`".into());
    }
    Ok(SeenMessage {
        role: role.to_owned(),
        content,
        tool_calls,
        tool_call_id,
    })
}

fn parse_tool_call(call: &Value) -> Result<(String, String, String), InvalidRequest> {
    let id = call["id"]
        .as_str()
        .ok_or("tool call `id` must be a string")?;
    if call["type"] != "function" {
        return Err("tool call `type` must be \"function\"".into());
    }
    let name = call["function"]["name"]
        .as_str()
        .ok_or("tool call `function.name` must be a string")?;
    let arguments = call["function"]["arguments"]
        .as_str()
        .ok_or("tool call `function.arguments` must be a string of json")?;
    Ok((id.to_owned(), name.to_owned(), arguments.to_owned()))
}

fn parse_tool(tool: &Value) -> Result<String, InvalidRequest> {
    if tool["type"] != "function" {
        return Err("`type` must be \"function\"".into());
    }
    let name = tool["function"]["name"]
        .as_str()
        .ok_or("`function.name` must be a string")?;
    if !tool["function"]["parameters"].is_object() {
        return Err(InvalidRequest::ToolSchema {
            name: name.to_owned(),
            field: "function.parameters",
        });
    }
    Ok(name.to_owned())
}

fn usage_json(answer: &Answer<'_>) -> Value {
    let (input, output) = answer.usage;
    let mut usage = json!({"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output});
    if answer.cache.0 > 0 {
        usage["prompt_tokens_details"] = json!({"cached_tokens": answer.cache.0});
    }
    usage
}

pub(super) fn response_json(answer: &Answer<'_>, request: &SeenRequest) -> Value {
    let mut message = json!({
        "role": "assistant",
        "content": if answer.text.is_empty() { Value::Null } else { answer.text.into() },
    });
    if !answer.tool_calls.is_empty() {
        message["tool_calls"] = answer
            .tool_calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments.to_string()},
                })
            })
            .collect();
    }
    json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": request.model,
        "choices": [{"index": 0, "message": message, "finish_reason": answer.finish_reason}],
        "usage": usage_json(answer),
    })
}

/// The chunk sequence real servers send: a role chunk, content pieces, for each tool
/// call a chunk with id/type/name followed by argument pieces, a chunk with the finish
/// reason, a usage chunk when asked for, then `[DONE]`.
pub(super) fn stream_frames(answer: &Answer<'_>, request: &SeenRequest) -> Vec<Frame> {
    let chunk = |choices: Value| {
        json!({
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": request.model,
            "choices": choices,
        })
    };
    let delta = |delta: Value| chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]));

    let mut frames = vec![Frame::data(
        &delta(json!({"role": "assistant", "content": ""})),
        false,
    )];
    for piece in split_pieces(answer.text, PIECES) {
        frames.push(Frame::data(&delta(json!({"content": piece})), true));
    }
    for (index, call) in answer.tool_calls.iter().enumerate() {
        let head = json!({"tool_calls": [{
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }]});
        frames.push(Frame::data(&delta(head), false));
        for piece in split_pieces(&call.arguments.to_string(), PIECES) {
            let part = json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]});
            frames.push(Frame::data(&delta(part), true));
        }
    }
    let finish = chunk(json!([{"index": 0, "delta": {}, "finish_reason": answer.finish_reason}]));
    frames.push(Frame::data(&finish, false));
    if request.include_usage {
        let mut usage = chunk(json!([]));
        usage["usage"] = usage_json(answer);
        frames.push(Frame::data(&usage, false));
    }
    frames.push(Frame {
        text: "data: [DONE]\n\n".into(),
        content: false,
    });
    frames
}

/// A failure after the 200 was sent: one chunk with an `error` object, and no `[DONE]`.
pub(super) fn error_frames(message: &str) -> Vec<Frame> {
    let error = json!({"error": {"message": message, "type": "server_error"}});
    vec![Frame::data(&error, false)]
}

#[cfg(test)]
mod tests {
    use super::super::reply::ScriptedToolCall;
    use super::*;

    fn request(stream: bool, include_usage: bool) -> SeenRequest {
        parse(
            json!({"model": "m", "messages": [], "stream": stream,
                   "stream_options": {"include_usage": include_usage}}),
            BTreeMap::new(),
        )
        .expect("request parses")
    }

    fn data_of(frames: &[Frame]) -> Vec<Value> {
        frames
            .iter()
            .filter_map(|f| f.text.strip_prefix("data: "))
            .filter(|d| !d.starts_with("[DONE]"))
            .map(|d| serde_json::from_str(d.trim()).expect("each data line is json"))
            .collect()
    }

    #[test]
    fn parses_tool_history_into_neutral_messages() {
        let seen = parse(
            json!({"model": "m", "messages": [
                {"role": "user", "content": "find it"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{\"q\":1}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "found"},
            ], "tools": [{"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}}]}),
            BTreeMap::new(),
        )
        .expect("request parses");
        assert_eq!(seen.tools, vec!["grep"]);
        assert_eq!(
            seen.messages[1].tool_calls,
            vec![("c1".into(), "grep".into(), "{\"q\":1}".into())]
        );
        assert_eq!(seen.messages[2].tool_call_id.as_deref(), Some("c1"));
    }

    #[test]
    fn rejects_tool_message_without_call_id() {
        let err = parse(
            json!({"model": "m", "messages": [{"role": "tool", "content": "x"}]}),
            BTreeMap::new(),
        )
        .expect_err("tool message without id is invalid")
        .to_string();
        assert!(err.contains("tool_call_id"), "{err}");
    }

    #[test]
    fn rejects_tool_call_arguments_that_are_not_a_string() {
        let err = parse(
            json!({"model": "m", "messages": [{"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": {"q": 1}}}]}]}),
            BTreeMap::new(),
        )
        .expect_err("object arguments are invalid")
        .to_string();
        assert!(err.contains("arguments"), "{err}");
    }

    #[test]
    fn streamed_tool_call_arguments_reassemble_to_the_scripted_json() {
        let calls = [ScriptedToolCall {
            id: "c1".into(),
            name: "grep".into(),
            arguments: json!({"pattern": "fn main"}),
        }];
        let answer = Answer {
            text: "",
            tool_calls: &calls,
            usage: (3, 4),
            finish_reason: "tool_calls",
            cache: (0, 0),
            thinking: None,
        };
        let frames = stream_frames(&answer, &request(true, true));
        let chunks = data_of(&frames);
        let head = &chunks[1]["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!(head["id"], "c1");
        assert_eq!(head["function"]["name"], "grep");
        let arguments: String = chunks
            .iter()
            .filter_map(|c| {
                c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str()
            })
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&arguments).expect("arguments are json"),
            calls[0].arguments
        );
        assert!(
            frames.iter().filter(|f| f.content).count() > 1,
            "arguments are split"
        );
        assert_eq!(
            chunks.last().expect("usage chunk")["usage"]["completion_tokens"],
            4
        );
        assert_eq!(frames.last().expect("done frame").text, "data: [DONE]\n\n");
    }

    #[test]
    fn streams_no_usage_chunk_unless_asked() {
        let answer = Answer {
            text: "hi",
            tool_calls: &[],
            usage: (1, 1),
            finish_reason: "stop",
            cache: (0, 0),
            thinking: None,
        };
        let chunks = data_of(&stream_frames(&answer, &request(true, false)));
        assert!(chunks.iter().all(|c| c.get("usage").is_none()));
        assert_eq!(
            chunks.last().expect("finish chunk")["choices"][0]["finish_reason"],
            "stop"
        );
    }
}
