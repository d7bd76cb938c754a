//! The scripted model over real HTTP, for the parts the client tests in `taskwire-llm`
//! do not reach: the raw Anthropic events, script ends, malformed requests.

use std::time::Duration;

use serde_json::{Value, json};
use taskwire_test_support::{ScriptedModel, ScriptedReply};

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("http client builds")
}

/// Posts `body` as JSON to `url`.
async fn post(url: String, body: &Value) -> reqwest::Response {
    http()
        .post(url)
        .json(body)
        .send()
        .await
        .expect("request sent")
}

/// `(event name, data)` of each server-sent event in `body`.
fn sse_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|event| {
            let mut name = String::new();
            let mut data = Value::Null;
            for line in event.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_owned();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(d).unwrap_or_else(|_| Value::String(d.to_owned()));
                }
            }
            (name, data)
        })
        .collect()
}

fn anthropic_request(stream: bool) -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 512,
        "system": "be brief",
        "stream": stream,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "find main"}]}],
        "tools": [{"name": "grep", "description": "search", "input_schema": {"type": "object"}}],
    })
}

#[tokio::test]
async fn anthropic_endpoint_answers_with_content_blocks() {
    let model = ScriptedModel::start(|_| {
        ScriptedReply::tool_calls([("toolu_1", "grep", json!({"pattern": "main"}))])
            .with_text("looking")
            .with_usage(50, 9)
    })
    .await;
    let response = http()
        .post(format!("{}/v1/messages", model.anthropic_base_url()))
        .header("x-api-key", "key-1")
        .json(&anthropic_request(false))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json body");
    assert_eq!(
        body["content"][0],
        json!({"type": "text", "text": "looking"})
    );
    assert_eq!(
        body["content"][1],
        json!({"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"pattern": "main"}})
    );
    assert_eq!(body["stop_reason"], "tool_use");
    assert_eq!(
        body["usage"],
        json!({"input_tokens": 50, "output_tokens": 9})
    );

    let seen = &model.requests()[0];
    assert_eq!(seen.header("x-api-key"), Some("key-1"));
    assert_eq!(seen.messages[0].role, "system");
    assert_eq!(seen.last_user_message(), Some("find main"));
    assert_eq!(seen.tools, vec!["grep"]);
}

#[tokio::test]
async fn anthropic_endpoint_streams_the_documented_events() {
    let model =
        ScriptedModel::start(|_| ScriptedReply::text("hello from the stream").with_usage(11, 6))
            .await;
    let response = post(
        format!("{}/v1/messages", model.anthropic_base_url()),
        &anthropic_request(true),
    )
    .await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let events = sse_events(&response.text().await.expect("body"));
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[0], "message_start");
    assert_eq!(events[0].1["message"]["usage"]["input_tokens"], 11);
    assert!(names.contains(&"content_block_start") && names.contains(&"content_block_stop"));
    assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
    let text: String = events
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, d)| d["delta"]["text"].as_str().expect("text delta"))
        .collect();
    assert_eq!(text, "hello from the stream");
    assert_eq!(
        events[names.len() - 2].1["delta"]["stop_reason"],
        "end_turn"
    );
    assert_eq!(events[names.len() - 2].1["usage"]["output_tokens"], 6);
}

#[tokio::test]
async fn anthropic_endpoint_refuses_a_tool_use_left_unanswered() {
    let model = ScriptedModel::echo().await;
    let mut request = anthropic_request(false);
    request["messages"] = json!([
        {"role": "user", "content": "find main"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {}}]},
        {"role": "user", "content": "never mind"},
    ]);
    let response = post(
        format!("{}/v1/messages", model.anthropic_base_url()),
        &request,
    )
    .await;
    assert_eq!(response.status(), 400);
    let body = response.text().await.expect("body");
    assert!(
        body.contains("messages[1]") && body.contains("toolu_1"),
        "{body}"
    );
    assert_eq!(model.request_count(), 0);
}

#[tokio::test]
async fn openai_endpoint_streams_chunks_then_done() {
    let model = ScriptedModel::echo().await;
    let response = post(
        format!("{}/chat/completions", model.base_url()),
        &json!({"model": "m", "stream": true, "stream_options": {"include_usage": true},
                      "messages": [{"role": "user", "content": "ping"}]}),
    )
    .await;
    let events = sse_events(&response.text().await.expect("body"));
    assert_eq!(
        events.last().expect("events").1,
        Value::String("[DONE]".into())
    );
    let text: String = events
        .iter()
        .filter_map(|(_, d)| d["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "echo: ping");
    assert_eq!(
        events[events.len() - 2].1["usage"]["prompt_tokens"],
        10,
        "default usage"
    );
}

#[tokio::test]
async fn sequence_past_its_end_answers_400_with_a_reason() {
    let model = ScriptedModel::sequence(vec![ScriptedReply::text("only one")]).await;
    let request = json!({"model": "m", "messages": [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "only one"},
        {"role": "user", "content": "b"},
    ]});
    let response = post(format!("{}/chat/completions", model.base_url()), &request).await;
    assert_eq!(response.status(), 400);
    let body = response.text().await.expect("body");
    assert!(body.contains("no reply for assistant turn 1"), "{body}");
}

#[tokio::test]
async fn malformed_requests_are_refused_and_not_recorded() {
    let model = ScriptedModel::echo().await;
    let response = post(
        format!("{}/chat/completions", model.base_url()),
        &json!({"model": "m", "messages": [{"role": "tool", "content": "no id"}]}),
    )
    .await;
    assert_eq!(response.status(), 400);
    assert!(
        response
            .text()
            .await
            .expect("body")
            .contains("tool_call_id")
    );
    assert_eq!(model.request_count(), 0);
}

#[tokio::test]
async fn delayed_replies_wait_before_answering() {
    let model = ScriptedModel::start(|_| {
        ScriptedReply::text("slow").with_delay(Duration::from_millis(300))
    })
    .await;
    let started = std::time::Instant::now();
    let response = post(
        format!("{}/chat/completions", model.base_url()),
        &json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert!(started.elapsed() >= Duration::from_millis(300));
}
