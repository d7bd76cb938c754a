//! The OpenAI-compatible client against the scripted model over real HTTP.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use taskwire_llm::{
    ChatRequest, ChatResponse, FinishReason, LlmError, Message, OpenAiClient, OpenAiConfig,
    Provider, StreamDelta, ToolCall, ToolDef, Usage,
};
use taskwire_test_support::{ScriptedModel, ScriptedReply};

fn config(model: &ScriptedModel, stream: bool) -> OpenAiConfig {
    let _ = rustls::crypto::ring::default_provider().install_default();
    OpenAiConfig {
        stream,
        // Keeps retry tests fast; the schedule itself is unit-tested.
        initial_backoff: Duration::from_millis(10),
        ..OpenAiConfig::new(model.base_url())
    }
}

fn client(config: OpenAiConfig) -> OpenAiClient {
    OpenAiClient::new(config).expect("client builds")
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        model: "scripted".into(),
        messages: vec![Message::user(text)],
        ..Default::default()
    }
}

fn grep_tool() -> ToolDef {
    ToolDef {
        name: "grep".into(),
        description: "search files".into(),
        parameters: json!({"type": "object", "properties": {"pattern": {"type": "string"}}}),
    }
}

/// Runs one chat turn and collects the text deltas.
async fn chat(
    client: &OpenAiClient,
    request: &ChatRequest,
) -> (Result<ChatResponse, LlmError>, Vec<String>) {
    let mut deltas = Vec::new();
    let result = client
        .chat(request, &mut |delta| match delta {
            StreamDelta::Text(text) => deltas.push(text),
        })
        .await;
    (result, deltas)
}

#[tokio::test]
async fn streams_text_in_several_deltas_and_reports_usage() {
    let model =
        ScriptedModel::start(|_| ScriptedReply::text("the answer is forty-two").with_usage(120, 7))
            .await;
    let (answer, deltas) = chat(&client(config(&model, true)), &ask("question")).await;
    let answer = answer.expect("answer");
    assert_eq!(answer.text, "the answer is forty-two");
    assert!(deltas.len() > 1, "text arrives in pieces: {deltas:?}");
    assert_eq!(deltas.concat(), answer.text);
    assert_eq!(
        answer.usage,
        Usage {
            input_tokens: 120,
            output_tokens: 7
        }
    );
    assert_eq!(answer.finish_reason, FinishReason::Stop);
    assert!(answer.tool_calls.is_empty());

    let seen = model.requests();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].stream && seen[0].include_usage);
    assert!(
        seen[0].raw.get("tools").is_none(),
        "no tools key when none are offered"
    );
}

#[tokio::test]
async fn streams_tool_calls_with_arguments_split_across_chunks() {
    let long_pattern = "fn main() -> Result<(), Box<dyn std::error::Error>>";
    let model = ScriptedModel::start(move |_| {
        ScriptedReply::tool_calls([
            (
                "call_1",
                "grep",
                json!({"pattern": long_pattern, "path": "src"}),
            ),
            ("call_2", "grep", json!({"pattern": "todo"})),
        ])
        .with_text("let me look")
    })
    .await;
    let request = ChatRequest {
        tools: vec![grep_tool()],
        ..ask("where is main?")
    };
    let (answer, deltas) = chat(&client(config(&model, true)), &request).await;
    let answer = answer.expect("answer");
    assert_eq!(deltas.concat(), "let me look");
    assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
    assert_eq!(answer.tool_calls.len(), 2);
    assert_eq!(
        (
            answer.tool_calls[0].id.as_str(),
            answer.tool_calls[0].name.as_str()
        ),
        ("call_1", "grep")
    );
    let arguments: serde_json::Value =
        serde_json::from_str(&answer.tool_calls[0].arguments).expect("json arguments");
    assert_eq!(arguments, json!({"pattern": long_pattern, "path": "src"}));
    assert_eq!(answer.tool_calls[1].id, "call_2");
    assert_eq!(model.requests()[0].tools, vec!["grep"]);
}

#[tokio::test]
async fn non_streaming_returns_the_whole_answer() {
    let model = ScriptedModel::start(|_| {
        ScriptedReply::tool_calls([("c1", "grep", json!({"pattern": "x"}))]).with_usage(30, 4)
    })
    .await;
    let request = ChatRequest {
        tools: vec![grep_tool()],
        max_tokens: Some(64),
        temperature: Some(0.0),
        ..ask("go")
    };
    let (answer, deltas) = chat(&client(config(&model, false)), &request).await;
    let answer = answer.expect("answer");
    assert!(deltas.is_empty(), "a turn with no text sends no delta");
    assert_eq!(
        answer.tool_calls,
        vec![ToolCall {
            id: "c1".into(),
            name: "grep".into(),
            arguments: "{\"pattern\":\"x\"}".into()
        }]
    );
    assert_eq!(
        answer.usage,
        Usage {
            input_tokens: 30,
            output_tokens: 4
        }
    );
    let seen = &model.requests()[0];
    assert!(!seen.stream);
    assert_eq!(seen.raw["max_tokens"], 64);
    assert_eq!(seen.raw["temperature"], 0.0);
}

#[tokio::test]
async fn sends_bearer_auth_and_the_tool_history() {
    let model = ScriptedModel::sequence(vec![
        ScriptedReply::tool_calls([("c1", "grep", json!({"pattern": "main"}))]),
        ScriptedReply::text("found it in src/main.rs"),
    ])
    .await;
    let client = client(OpenAiConfig {
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
    request
        .messages
        .push(Message::assistant(first.text, first.tool_calls));
    request
        .messages
        .push(Message::tool_result("c1", "src/main.rs:1: fn main()"));
    let (second, _) = chat(&client, &request).await;
    assert_eq!(second.expect("second turn").text, "found it in src/main.rs");

    let seen = model.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].header("Authorization"), Some("Bearer sk-test"));
    let history = &seen[1].messages;
    assert_eq!(history[2].role, "assistant");
    assert_eq!(
        history[2].tool_calls,
        vec![("c1".into(), "grep".into(), "{\"pattern\":\"main\"}".into())]
    );
    assert_eq!(
        (history[3].role.as_str(), history[3].tool_call_id.as_deref()),
        ("tool", Some("c1"))
    );
}

#[tokio::test]
async fn retries_a_server_error_then_succeeds() {
    let model = ScriptedModel::queue(vec![
        ScriptedReply::status(500, "overloaded"),
        ScriptedReply::text("recovered"),
    ])
    .await;
    let (answer, _) = chat(&client(config(&model, true)), &ask("hi")).await;
    assert_eq!(answer.expect("answer after a retry").text, "recovered");
    assert_eq!(model.request_count(), 2);
}

#[tokio::test]
async fn honours_retry_after_on_429() {
    let model = ScriptedModel::queue(vec![
        ScriptedReply::status(429, r#"{"error":{"message":"rate limited"}}"#).with_retry_after(1),
        ScriptedReply::text("ok"),
    ])
    .await;
    let started = Instant::now();
    let (answer, _) = chat(&client(config(&model, true)), &ask("hi")).await;
    assert_eq!(answer.expect("answer after waiting").text, "ok");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited {:?}",
        started.elapsed()
    );
    assert_eq!(model.request_count(), 2);
}

#[tokio::test]
async fn returns_a_retry_after_longer_than_the_backoff_cap_to_the_caller() {
    let model = ScriptedModel::queue(vec![
        ScriptedReply::status(429, "later").with_retry_after(120),
    ])
    .await;
    let (answer, _) = chat(&client(config(&model, true)), &ask("hi")).await;
    let error = answer.expect_err("not waited out");
    assert_eq!(error.retry_after(), Some(Duration::from_secs(120)));
    assert!(error.retryable());
    assert_eq!(model.request_count(), 1);
}

#[tokio::test]
async fn does_not_retry_a_bad_request_and_names_the_status() {
    let model = ScriptedModel::start(|_| ScriptedReply::status(400, "unknown model")).await;
    let (answer, _) = chat(&client(config(&model, true)), &ask("hi")).await;
    let error = answer.expect_err("bad request fails");
    assert!(!error.retryable());
    assert_eq!(error.status(), Some(400));
    let message = error.to_string();
    assert!(
        message.contains("status 400") && message.contains("unknown model"),
        "{message}"
    );
    assert!(message.contains(&model.base_url()), "{message}");
    assert_eq!(model.request_count(), 1);
}

#[tokio::test]
async fn gives_up_after_max_retries() {
    let model = ScriptedModel::start(|_| ScriptedReply::status(503, "down")).await;
    let (answer, _) = chat(
        &client(OpenAiConfig {
            max_retries: 2,
            ..config(&model, true)
        }),
        &ask("hi"),
    )
    .await;
    assert_eq!(answer.expect_err("still down").status(), Some(503));
    assert_eq!(model.request_count(), 3, "one attempt and two retries");
}

#[tokio::test]
async fn times_out_a_slow_model() {
    let model =
        ScriptedModel::start(|_| ScriptedReply::text("late").with_delay(Duration::from_secs(10)))
            .await;
    let config = OpenAiConfig {
        request_timeout: Duration::from_millis(300),
        max_retries: 0,
        ..config(&model, true)
    };
    let started = Instant::now();
    let (answer, _) = chat(&client(config), &ask("hi")).await;
    let error = answer.expect_err("times out");
    assert!(matches!(error, LlmError::Timeout { .. }), "{error}");
    assert!(error.retryable());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn does_not_retry_once_text_was_delivered() {
    let model = ScriptedModel::start(|_| {
        ScriptedReply::text("a long answer that breaks").with_broken_stream()
    })
    .await;
    let (answer, deltas) = chat(&client(config(&model, true)), &ask("hi")).await;
    let error = answer.expect_err("broken stream fails");
    assert!(matches!(error, LlmError::Transport { .. }), "{error}");
    assert_eq!(
        deltas.len(),
        1,
        "the first piece reached the caller: {deltas:?}"
    );
    assert_eq!(model.request_count(), 1, "no retry after delivering text");
}

#[tokio::test]
async fn an_undecodable_answer_is_not_retried() {
    let model = ScriptedModel::start(|_| ScriptedReply::status(200, "this is not json")).await;
    let (answer, _) = chat(&client(config(&model, false)), &ask("hi")).await;
    let error = answer.expect_err("decode fails");
    assert!(matches!(error, LlmError::Decode { .. }), "{error}");
    assert_eq!(model.request_count(), 1);
}

#[tokio::test]
async fn a_refused_connection_is_a_retryable_transport_error() {
    let model = ScriptedModel::echo().await;
    let config = OpenAiConfig {
        max_retries: 1,
        ..config(&model, true)
    };
    drop(model);
    // The listener closes asynchronously after the drop; poll until it has.
    let deadline = Instant::now() + Duration::from_secs(5);
    let error = loop {
        match chat(&client(config.clone()), &ask("hi")).await.0 {
            Err(error) => break error,
            Ok(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Ok(_) => panic!("the server is still answering after it was dropped"),
        }
    };
    assert!(matches!(error, LlmError::Transport { .. }), "{error}");
    assert!(error.retryable());
}

#[tokio::test]
async fn serves_many_concurrent_conversations() {
    let model = Arc::new(
        ScriptedModel::sequence(vec![
            ScriptedReply::tool_calls([("c1", "grep", json!({"pattern": "x"}))]),
            ScriptedReply::text("done"),
        ])
        .await,
    );
    let client = client(config(&model, true));
    let finished = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..1000 {
        let (client, finished) = (client.clone(), Arc::clone(&finished));
        tasks.push(tokio::spawn(async move {
            let mut request = ChatRequest {
                tools: vec![grep_tool()],
                ..ask(&format!("conversation {i}"))
            };
            let first = client
                .chat(&request, &mut |_| {})
                .await
                .expect("first turn");
            assert_eq!(first.finish_reason, FinishReason::ToolCalls);
            request
                .messages
                .push(Message::assistant(first.text, first.tool_calls));
            request.messages.push(Message::tool_result("c1", "x"));
            let second = client
                .chat(&request, &mut |_| {})
                .await
                .expect("second turn");
            assert_eq!(second.text, "done");
            finished.fetch_add(1, Ordering::SeqCst);
        }));
    }
    for task in tasks {
        task.await.expect("conversation task");
    }
    assert_eq!(finished.load(Ordering::SeqCst), 1000);
    assert_eq!(model.request_count(), 2000);
}
