//! The OpenAI Responses client against the scripted model over real HTTP; the
//! behaviour shared with the other clients (streamed text and tool calls, retries,
//! `Retry-After`, timeouts, failed streams) is in `support/suite.rs`. The scripted
//! server rejects what the real API rejects (chat-completions fields, nested tools, a
//! function call output that answers no call, a call no output answers), so a wrong
//! wire shape fails here as a 400.

#[macro_use]
#[path = "support/suite.rs"]
mod suite;

use std::time::Duration;

use serde_json::{Value, json};
use taskwire_llm::{
    ChatRequest, FinishReason, LlmError, Message, Provider, ResponsesClient, ResponsesConfig,
    ToolCall, Usage,
};
use taskwire_test_support::model::WireFormat;
use taskwire_test_support::{ScriptedModel, ScriptedReply};

use suite::{Knobs, ask, chat, grep_tool};

transport_suite!(make_client);

fn config(model: &ScriptedModel, stream: bool) -> ResponsesConfig {
    let _ = rustls::crypto::ring::default_provider().install_default();
    ResponsesConfig {
        stream,
        // Keeps retry tests fast; the schedule itself is unit-tested.
        initial_backoff: Duration::from_millis(10),
        ..ResponsesConfig::new(model.base_url())
    }
}

fn client(config: ResponsesConfig) -> ResponsesClient {
    ResponsesClient::new(config).expect("client builds")
}

fn make_client(model: &ScriptedModel, knobs: Knobs) -> Box<dyn Provider> {
    Box::new(client(ResponsesConfig {
        max_retries: knobs.max_retries,
        request_timeout: knobs.request_timeout,
        ..config(model, knobs.stream)
    }))
}

/// The `type`s of a request's `input` items.
fn item_types(raw: &Value) -> Vec<String> {
    raw["input"]
        .as_array()
        .expect("input is a list of items")
        .iter()
        .map(|item| item["type"].as_str().unwrap_or("<none>").to_owned())
        .collect()
}

#[tokio::test]
async fn streams_text_in_several_deltas_with_cached_input_tokens() {
    let model = ScriptedModel::start(|_| {
        ScriptedReply::text("the answer is forty-two")
            .with_usage(120, 7)
            .with_cache(96, 0)
    })
    .await;
    let client = client(config(&model, true));
    assert_eq!(
        client.endpoint(),
        format!("http://{}/v1/responses", model.addr())
    );
    let (answer, deltas) = chat(&client, &ask("question")).await;
    let answer = answer.expect("answer");
    assert!(deltas.len() > 1, "text arrives in pieces: {deltas:?}");
    assert_eq!(deltas.concat(), "the answer is forty-two");
    assert_eq!(answer.text, "the answer is forty-two");
    assert_eq!(answer.finish_reason, FinishReason::Stop);
    assert_eq!(
        answer.usage,
        Usage {
            cached_input_tokens: 96,
            ..Usage::tokens(120, 7)
        }
    );
    let seen = &model.requests()[0];
    assert_eq!(seen.format, WireFormat::Responses);
    assert!(seen.stream);
    assert_eq!(seen.last_user_message(), Some("question"));
}

#[tokio::test]
async fn a_tool_call_round_trip_sends_calls_and_outputs_as_items() {
    let model = ScriptedModel::sequence(vec![
        ScriptedReply::tool_calls([("call_1", "grep", json!({"pattern": "main"}))])
            .with_text("let me look"),
        ScriptedReply::text("found it in src/main.rs"),
    ])
    .await;
    let client = client(ResponsesConfig {
        api_key: Some("sk-test".into()),
        ..config(&model, true)
    });
    let mut request = ChatRequest {
        messages: vec![Message::system("be brief"), Message::user("where is main?")],
        tools: vec![grep_tool()],
        ..ask("")
    };
    let (first, _) = chat(&client, &request).await;
    let first = first.expect("first turn");
    assert_eq!(first.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        first.tool_calls,
        [ToolCall {
            id: "call_1".into(),
            name: "grep".into(),
            arguments: "{\"pattern\":\"main\"}".into()
        }]
    );
    request
        .messages
        .push(Message::assistant(first.text, first.tool_calls));
    request
        .messages
        .push(Message::tool_result("call_1", "src/main.rs:1: fn main()"));
    let (second, _) = chat(&client, &request).await;
    let second = second.expect("second turn, accepted by the server");
    assert_eq!(second.text, "found it in src/main.rs");
    assert_eq!(second.finish_reason, FinishReason::Stop);

    let seen = model.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].header("Authorization"), Some("Bearer sk-test"));
    let raw = &seen[1].raw;
    assert_eq!(raw["instructions"], "be brief");
    assert_eq!(
        item_types(raw),
        [
            "message",
            "message",
            "function_call",
            "function_call_output"
        ]
    );
    assert_eq!(
        raw["input"][1],
        json!({"type": "message", "role": "assistant",
               "content": [{"type": "output_text", "text": "let me look"}]})
    );
    assert_eq!(
        raw["input"][2],
        json!({"type": "function_call", "call_id": "call_1", "name": "grep",
               "arguments": "{\"pattern\":\"main\"}"})
    );
    assert_eq!(
        raw["input"][3],
        json!({"type": "function_call_output", "call_id": "call_1",
               "output": "src/main.rs:1: fn main()"})
    );
    // As the server saw it: one assistant turn holding the call, and its result.
    let history = &seen[1].messages;
    let roles: Vec<&str> = history.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    assert_eq!(
        history[2].tool_calls,
        vec![(
            "call_1".into(),
            "grep".into(),
            "{\"pattern\":\"main\"}".into()
        )]
    );
    assert_eq!(history[3].tool_call_id.as_deref(), Some("call_1"));
}

#[tokio::test]
async fn non_streamed_answers_carry_text_calls_and_cached_tokens() {
    let model = ScriptedModel::start(|_| {
        ScriptedReply::tool_calls([("c1", "grep", json!({"pattern": "x"}))])
            .with_text("searching")
            .with_usage(50, 6)
            .with_cache(32, 0)
    })
    .await;
    let request = ChatRequest {
        tools: vec![grep_tool()],
        ..ask("go")
    };
    let (answer, deltas) = chat(&client(config(&model, false)), &request).await;
    let answer = answer.expect("answer");
    assert_eq!(deltas, ["searching"], "the whole text as one delta");
    assert_eq!(answer.tool_calls[0].id, "c1");
    assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        answer.usage,
        Usage {
            cached_input_tokens: 32,
            ..Usage::tokens(50, 6)
        }
    );
    let seen = &model.requests()[0];
    assert!(!seen.stream);
    assert_eq!(seen.raw["stream"], false);
}

#[tokio::test]
async fn an_answer_cut_by_max_output_tokens_is_length() {
    let model = ScriptedModel::start(|_| {
        ScriptedReply::text("a long answer that was cut")
            .with_finish_reason("length")
            .with_usage(10, 16)
    })
    .await;
    let request = ChatRequest {
        max_tokens: Some(16),
        ..ask("write a lot")
    };
    for stream in [true, false] {
        let (answer, deltas) = chat(&client(config(&model, stream)), &request).await;
        let answer = answer.expect("a cut answer is still an answer");
        assert_eq!(
            answer.finish_reason,
            FinishReason::Length,
            "stream {stream}"
        );
        assert_eq!(answer.text, "a long answer that was cut");
        assert_eq!(deltas.concat(), answer.text);
        assert_eq!(answer.usage, Usage::tokens(10, 16));
    }
    for seen in model.requests() {
        assert_eq!(seen.raw["max_output_tokens"], 16);
    }
}

#[tokio::test]
async fn sends_the_request_in_the_responses_shape() {
    let model = ScriptedModel::echo().await;
    let request = ChatRequest {
        model: "gpt-test".into(),
        messages: vec![
            Message::system("be brief"),
            Message::system("answer in english"),
            Message::user("hello"),
        ],
        tools: vec![grep_tool()],
        temperature: Some(0.25),
        top_p: Some(0.5),
        max_tokens: Some(100),
        cache_key: Some("session-7".into()),
        ..Default::default()
    };
    let (answer, _) = chat(&client(config(&model, true)), &request).await;
    assert_eq!(answer.expect("answer").text, "echo: hello");
    let seen = &model.requests()[0];
    let raw = &seen.raw;
    assert_eq!(raw["model"], "gpt-test");
    assert_eq!(raw["instructions"], "be brief\n\nanswer in english");
    assert_eq!(
        raw["input"],
        json!([{"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "hello"}]}])
    );
    assert_eq!(
        raw["tools"],
        json!([{"type": "function", "name": "grep", "description": "search files",
                "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}},
                "strict": false}])
    );
    assert_eq!(raw["max_output_tokens"], 100);
    assert_eq!(raw["temperature"], 0.25);
    assert_eq!(raw["top_p"], 0.5);
    assert_eq!(raw["prompt_cache_key"], "session-7");
    assert_eq!(raw["store"], false);
    assert_eq!(raw["stream"], true);
    for chat_field in ["messages", "max_tokens", "stream_options"] {
        assert!(raw.get(chat_field).is_none(), "{chat_field} is not sent");
    }
    assert_eq!(seen.system_prompt(), Some("be brief\n\nanswer in english"));
    assert_eq!(seen.tools, ["grep"]);
}

#[tokio::test]
async fn the_next_turn_of_a_session_reads_its_prefix_from_the_prompt_cache() {
    let model = ScriptedModel::caching(|request| match request.assistant_turns() {
        0 => ScriptedReply::tool_calls([("c1", "grep", json!({"pattern": "x"}))]),
        _ => ScriptedReply::text("done"),
    })
    .await;
    let client = client(config(&model, true));
    let mut request = ChatRequest {
        messages: vec![
            Message::system("be brief"),
            Message::user("a long task ".repeat(50)),
        ],
        tools: vec![grep_tool()],
        cache_key: Some("session-1".into()),
        ..ask("")
    };
    let first = chat(&client, &request).await.0.expect("first turn");
    assert_eq!(first.usage.cached_input_tokens, 0, "nothing stored yet");
    request
        .messages
        .push(Message::assistant(first.text, first.tool_calls));
    request.messages.push(Message::tool_result("c1", "x.rs"));
    let second = chat(&client, &request).await.0.expect("second turn");
    assert!(
        second.usage.cached_input_tokens > 100
            && second.usage.cached_input_tokens < second.usage.input_tokens,
        "{:?}",
        second.usage
    );
}

#[tokio::test]
async fn a_tool_result_naming_no_call_is_refused_before_sending() {
    let model = ScriptedModel::echo().await;
    let mut result = Message::tool_result("c1", "x");
    result.tool_call_id = None;
    let request = ChatRequest {
        messages: vec![Message::user("hi"), result],
        ..ask("")
    };
    let (answer, _) = chat(&client(config(&model, true)), &request).await;
    let error = answer.expect_err("invalid request");
    assert!(matches!(error, LlmError::InvalidRequest(_)), "{error}");
    assert!(!error.retryable());
    assert_eq!(model.request_count(), 0);
}

#[tokio::test]
async fn the_server_rejects_an_output_that_answers_no_call() {
    let model = ScriptedModel::echo().await;
    // A history whose result answers a call the conversation never made.
    let request = ChatRequest {
        messages: vec![Message::user("hi"), Message::tool_result("c9", "x")],
        ..ask("")
    };
    let (answer, _) = chat(&client(config(&model, true)), &request).await;
    let error = answer.expect_err("the server answers 400");
    assert_eq!(error.status(), Some(400));
    assert!(
        error
            .to_string()
            .contains("answers no earlier function_call"),
        "{error}"
    );
}
