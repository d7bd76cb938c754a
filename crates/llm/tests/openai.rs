//! The OpenAI-compatible client against the scripted model over real HTTP; the
//! behaviour shared with the Anthropic client is in `support/suite.rs`.

#[macro_use]
#[path = "support/suite.rs"]
mod suite;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use taskwire_llm::{ChatRequest, FinishReason, Message, OpenAiClient, OpenAiConfig, Provider};
use taskwire_test_support::{ScriptedModel, ScriptedReply};

use suite::{Knobs, ask, chat, grep_tool};

transport_suite!(make_client);

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

fn make_client(model: &ScriptedModel, knobs: Knobs) -> Box<dyn Provider> {
    Box::new(client(OpenAiConfig {
        max_retries: knobs.max_retries,
        request_timeout: knobs.request_timeout,
        ..config(model, knobs.stream)
    }))
}

#[tokio::test]
async fn asks_for_usage_when_streaming_and_sends_no_empty_tools() {
    let model = ScriptedModel::echo().await;
    let (answer, _) = chat(&client(config(&model, true)), &ask("question")).await;
    assert_eq!(answer.expect("answer").text, "echo: question");
    let seen = &model.requests()[0];
    assert!(seen.stream && seen.include_usage);
    assert!(
        seen.raw.get("tools").is_none(),
        "no tools key when none are offered"
    );
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
