//! What every client promises alike (streamed text and tool calls, usage, and, through
//! the shared transport, retries, backoff, `Retry-After`, timeouts, broken and failed
//! streams), written once and run against each client by [`transport_suite!`], so the
//! clients cannot drift apart unnoticed. Wire-format details are tested per client.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use taskwire_llm::{
    ChatRequest, ChatResponse, FinishReason, LlmError, Message, Provider, StreamDelta, ToolCall,
    ToolDef, Usage,
};
use taskwire_test_support::model::WireFormat;
use taskwire_test_support::{ScriptedModel, ScriptedReply};

/// The settings a suite test varies; a client factory applies them to its own config.
#[derive(Debug, Clone, Copy)]
pub struct Knobs {
    pub stream: bool,
    pub max_retries: u32,
    pub request_timeout: Duration,
}

impl Default for Knobs {
    fn default() -> Self {
        Self {
            stream: true,
            max_retries: 3,
            request_timeout: Duration::from_secs(300),
        }
    }
}

/// Builds the client under test for `model`'s endpoint, with a short backoff so retry
/// tests stay fast.
pub type MakeClient = fn(&ScriptedModel, Knobs) -> Box<dyn Provider>;

/// Generates one `#[tokio::test]` per suite test, for the client `$make` builds.
macro_rules! transport_suite {
    ($make:path) => {
        mod transport_suite {
            use super::*;

            transport_suite!(@tests $make;
                streams_text_in_several_deltas_and_reports_usage,
                streams_tool_calls_with_arguments_split_across_events,
                non_streaming_returns_the_whole_answer,
                retries_server_errors_then_succeeds,
                honours_retry_after_on_429,
                returns_a_retry_after_longer_than_the_backoff_cap_to_the_caller,
                does_not_retry_a_bad_request_and_names_the_status,
                gives_up_after_max_retries,
                times_out_a_slow_model,
                does_not_retry_once_text_was_delivered,
                an_undecodable_answer_is_not_retried,
                a_refused_connection_is_a_retryable_transport_error,
                an_error_event_before_any_text_is_retried,
                an_error_event_is_a_retryable_remote_error,
            );
        }
    };
    (@tests $make:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                suite::$name($make).await;
            }
        )*
    };
}

/// A one-message request.
pub fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        model: "scripted".into(),
        messages: vec![Message::user(text)],
        ..Default::default()
    }
}

/// A tool with a one-field schema.
pub fn grep_tool() -> ToolDef {
    ToolDef {
        name: "grep".into(),
        description: "search files".into(),
        parameters: json!({"type": "object", "properties": {"pattern": {"type": "string"}}}).into(),
    }
}

/// Runs one chat turn and collects the text deltas.
pub async fn chat(
    provider: &dyn Provider,
    request: &ChatRequest,
) -> (Result<ChatResponse, LlmError>, Vec<String>) {
    let mut deltas = Vec::new();
    let result = provider
        .chat(request, &mut |delta| {
            if let StreamDelta::Text(text) = delta {
                deltas.push(text);
            }
        })
        .await;
    (result, deltas)
}

pub async fn streams_text_in_several_deltas_and_reports_usage(make: MakeClient) {
    let model =
        ScriptedModel::start(|_| ScriptedReply::text("the answer is forty-two").with_usage(120, 7))
            .await;
    let (answer, deltas) = chat(&*make(&model, Knobs::default()), &ask("question")).await;
    let answer = answer.expect("answer");
    assert_eq!(answer.text, "the answer is forty-two");
    assert!(deltas.len() > 1, "text arrives in pieces: {deltas:?}");
    assert_eq!(deltas.concat(), answer.text);
    assert_eq!(answer.usage, Usage::tokens(120, 7));
    assert_eq!(answer.finish_reason, FinishReason::Stop);
    assert!(answer.tool_calls.is_empty());
    assert!(model.requests()[0].stream);
}

pub async fn streams_tool_calls_with_arguments_split_across_events(make: MakeClient) {
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
    let (answer, deltas) = chat(&*make(&model, Knobs::default()), &request).await;
    let answer = answer.expect("answer");
    assert_eq!(deltas.concat(), "let me look");
    assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
    let calls: Vec<(&str, &str)> = answer
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str()))
        .collect();
    assert_eq!(calls, [("call_1", "grep"), ("call_2", "grep")]);
    let arguments: Value =
        serde_json::from_str(&answer.tool_calls[0].arguments).expect("json arguments");
    assert_eq!(arguments, json!({"pattern": long_pattern, "path": "src"}));
    assert_eq!(model.requests()[0].tools, ["grep"]);
}

pub async fn non_streaming_returns_the_whole_answer(make: MakeClient) {
    let model = ScriptedModel::start(|_| {
        ScriptedReply::tool_calls([("c1", "grep", json!({"pattern": "x"}))])
            .with_text("searching")
            .with_usage(30, 4)
    })
    .await;
    let request = ChatRequest {
        tools: vec![grep_tool()],
        max_tokens: Some(64),
        temperature: Some(0.0),
        ..ask("go")
    };
    let knobs = Knobs {
        stream: false,
        ..Knobs::default()
    };
    let (answer, deltas) = chat(&*make(&model, knobs), &request).await;
    let answer = answer.expect("answer");
    assert_eq!(deltas, ["searching"], "the whole text as one delta");
    assert_eq!(
        answer.tool_calls,
        [ToolCall {
            id: "c1".into(),
            name: "grep".into(),
            arguments: "{\"pattern\":\"x\"}".into()
        }]
    );
    assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
    assert_eq!(answer.usage, Usage::tokens(30, 4));
    let seen = &model.requests()[0];
    assert!(!seen.stream);
    let limit = match seen.format {
        WireFormat::Responses => "max_output_tokens",
        WireFormat::OpenAi | WireFormat::Anthropic => "max_tokens",
    };
    assert_eq!(seen.raw[limit], 64, "the request's own limit");
    assert_eq!(seen.raw["temperature"], 0.0);
}

pub async fn retries_server_errors_then_succeeds(make: MakeClient) {
    let model = ScriptedModel::queue(vec![
        ScriptedReply::status(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        ScriptedReply::status(500, "internal"),
        ScriptedReply::text("recovered"),
    ])
    .await;
    let mut request = ask("hi");
    request.tools = vec![grep_tool()];
    let (answer, _) = chat(&*make(&model, Knobs::default()), &request).await;
    assert_eq!(answer.expect("answer after retries").text, "recovered");
    // Each attempt encodes the request again: the same body, sent with its length.
    let seen = model.requests();
    assert_eq!(seen.len(), 3);
    for attempt in &seen {
        assert_eq!(attempt.raw, seen[0].raw);
        assert_eq!(attempt.tools, ["grep"]);
        let length: usize = attempt
            .header("content-length")
            .expect("the body is sent with its length")
            .parse()
            .expect("a number");
        assert_eq!(
            length,
            serde_json::to_vec(&attempt.raw).expect("json").len()
        );
        assert_eq!(attempt.header("transfer-encoding"), None);
    }
}

pub async fn honours_retry_after_on_429(make: MakeClient) {
    let model = ScriptedModel::queue(vec![
        ScriptedReply::status(429, r#"{"error":{"message":"rate limited"}}"#).with_retry_after(1),
        ScriptedReply::text("ok"),
    ])
    .await;
    let started = Instant::now();
    let (answer, _) = chat(&*make(&model, Knobs::default()), &ask("hi")).await;
    assert_eq!(answer.expect("answer after waiting").text, "ok");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited {:?}",
        started.elapsed()
    );
    assert_eq!(model.request_count(), 2);
}

pub async fn returns_a_retry_after_longer_than_the_backoff_cap_to_the_caller(make: MakeClient) {
    let model = ScriptedModel::queue(vec![
        ScriptedReply::status(429, "later").with_retry_after(120),
    ])
    .await;
    let (answer, _) = chat(&*make(&model, Knobs::default()), &ask("hi")).await;
    let error = answer.expect_err("not waited out");
    assert_eq!(error.retry_after(), Some(Duration::from_secs(120)));
    assert!(error.retryable());
    assert_eq!(model.request_count(), 1);
}

pub async fn does_not_retry_a_bad_request_and_names_the_status(make: MakeClient) {
    let model = ScriptedModel::start(|_| ScriptedReply::status(400, "unknown model")).await;
    let (answer, _) = chat(&*make(&model, Knobs::default()), &ask("hi")).await;
    let error = answer.expect_err("bad request fails");
    assert!(!error.retryable());
    assert_eq!(error.status(), Some(400));
    let message = error.to_string();
    assert!(
        message.contains("status 400") && message.contains("unknown model"),
        "{message}"
    );
    assert!(message.contains(&model.addr().to_string()), "{message}");
    assert_eq!(model.request_count(), 1);
}

pub async fn gives_up_after_max_retries(make: MakeClient) {
    let model = ScriptedModel::start(|_| ScriptedReply::status(503, "down")).await;
    let knobs = Knobs {
        max_retries: 2,
        ..Knobs::default()
    };
    let (answer, _) = chat(&*make(&model, knobs), &ask("hi")).await;
    assert_eq!(answer.expect_err("still down").status(), Some(503));
    assert_eq!(model.request_count(), 3, "one attempt and two retries");
}

pub async fn times_out_a_slow_model(make: MakeClient) {
    let model =
        ScriptedModel::start(|_| ScriptedReply::text("late").with_delay(Duration::from_secs(10)))
            .await;
    let knobs = Knobs {
        request_timeout: Duration::from_millis(300),
        max_retries: 0,
        ..Knobs::default()
    };
    let started = Instant::now();
    let (answer, _) = chat(&*make(&model, knobs), &ask("hi")).await;
    let error = answer.expect_err("times out");
    assert!(matches!(error, LlmError::Timeout { .. }), "{error}");
    assert!(error.retryable());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

pub async fn does_not_retry_once_text_was_delivered(make: MakeClient) {
    let model = ScriptedModel::start(|_| {
        ScriptedReply::text("a long answer that breaks").with_broken_stream()
    })
    .await;
    let (answer, deltas) = chat(&*make(&model, Knobs::default()), &ask("hi")).await;
    let error = answer.expect_err("broken stream fails");
    assert!(matches!(error, LlmError::Transport { .. }), "{error}");
    assert_eq!(
        deltas.len(),
        1,
        "the first piece reached the caller: {deltas:?}"
    );
    assert_eq!(model.request_count(), 1, "no retry after delivering text");
}

pub async fn an_undecodable_answer_is_not_retried(make: MakeClient) {
    let model = ScriptedModel::start(|_| ScriptedReply::status(200, "this is not json")).await;
    let knobs = Knobs {
        stream: false,
        ..Knobs::default()
    };
    let (answer, _) = chat(&*make(&model, knobs), &ask("hi")).await;
    let error = answer.expect_err("decode fails");
    assert!(matches!(error, LlmError::Decode { .. }), "{error}");
    assert_eq!(model.request_count(), 1);
}

pub async fn a_refused_connection_is_a_retryable_transport_error(make: MakeClient) {
    let model = ScriptedModel::echo().await;
    let client = make(
        &model,
        Knobs {
            max_retries: 1,
            ..Knobs::default()
        },
    );
    drop(model);
    // The listener closes asynchronously after the drop; poll until it has.
    let deadline = Instant::now() + Duration::from_secs(5);
    let error = loop {
        match chat(&*client, &ask("hi")).await.0 {
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

pub async fn an_error_event_before_any_text_is_retried(make: MakeClient) {
    let model = ScriptedModel::queue(vec![
        ScriptedReply::text("never sent").with_stream_error("upstream failed"),
        ScriptedReply::text("ok"),
    ])
    .await;
    let (answer, deltas) = chat(&*make(&model, Knobs::default()), &ask("hi")).await;
    assert_eq!(answer.expect("answer after a retry").text, "ok");
    assert_eq!(deltas.concat(), "ok", "nothing of the failed attempt");
    assert_eq!(model.request_count(), 2);
}

pub async fn an_error_event_is_a_retryable_remote_error(make: MakeClient) {
    let model = ScriptedModel::start(|_| {
        ScriptedReply::text("never sent").with_stream_error("upstream failed")
    })
    .await;
    let knobs = Knobs {
        max_retries: 0,
        ..Knobs::default()
    };
    let (answer, _) = chat(&*make(&model, knobs), &ask("hi")).await;
    let error = answer.expect_err("error event");
    assert!(matches!(error, LlmError::Remote { .. }), "{error}");
    assert!(error.retryable());
    assert!(error.to_string().contains("upstream failed"), "{error}");
}
