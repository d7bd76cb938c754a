//! The Anthropic client, and the router in front of both clients, against the scripted
//! model over real HTTP; the behaviour shared with the OpenAI client (retries,
//! `Retry-After`, timeouts, failed streams) is in `support/suite.rs`. The scripted server rejects what the real API rejects (tool
//! calls without results right after, results after text, blank text), so a wrong
//! wire shape fails here as a 400.

#[macro_use]
#[path = "support/suite.rs"]
mod suite;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use taskwire_llm::router::{ANTHROPIC_PREFIX, OPENAI_PREFIX};
use taskwire_llm::{
    AnthropicClient, AnthropicConfig, ChatRequest, FinishReason, Message, ModelRouter,
    OpenAiClient, OpenAiConfig, Provider, RouterConfig, ToolCall,
};
use taskwire_test_support::model::WireFormat;
use taskwire_test_support::{ScriptedModel, ScriptedReply};

use suite::{Knobs, chat, grep_tool};

transport_suite!(make_client);

fn config(model: &ScriptedModel, stream: bool) -> AnthropicConfig {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = AnthropicConfig::new(model.anthropic_base_url());
    config.http.api_key = Some("sk-ant-test".into());
    config.http.stream = stream;
    // Keeps retry tests fast; the schedule itself is unit-tested.
    config.http.initial_backoff = Duration::from_millis(10);
    config
}

fn client(config: AnthropicConfig) -> AnthropicClient {
    AnthropicClient::new(config).expect("client builds")
}

fn make_client(model: &ScriptedModel, knobs: Knobs) -> Box<dyn Provider> {
    let mut config = config(model, knobs.stream);
    config.http.max_retries = knobs.max_retries;
    config.http.request_timeout = knobs.request_timeout;
    Box::new(client(config))
}

/// A request with a system prompt, which the client must hoist to `system`.
fn ask(text: &str) -> ChatRequest {
    let mut request = suite::ask(text);
    request.model = "claude-test".into();
    request.messages.insert(0, Message::system("be brief"));
    request
}

fn with_grep(request: ChatRequest) -> ChatRequest {
    ChatRequest {
        tools: vec![grep_tool()],
        ..request
    }
}

#[tokio::test]
async fn sends_the_api_headers_and_hoists_the_system_prompt() {
    let model = ScriptedModel::echo().await;
    let (answer, _) = chat(&client(config(&model, true)), &with_grep(ask("question"))).await;
    assert_eq!(answer.expect("answer").text, "echo: question");

    let seen = &model.requests()[0];
    assert_eq!(seen.format, WireFormat::Anthropic);
    assert_eq!(seen.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(seen.header("anthropic-version"), Some("2023-06-01"));
    assert!(seen.header("authorization").is_none());
    assert_eq!(
        seen.raw["system"],
        json!([{"type": "text", "text": "be brief"}])
    );
    assert_eq!(seen.raw["max_tokens"], 4096, "the configured default");
    assert_eq!(
        seen.raw["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "question"}]}])
    );
    assert_eq!(
        seen.raw["tools"],
        json!([{"name": "grep", "description": "search files", "input_schema":
            {"type": "object", "properties": {"pattern": {"type": "string"}}}}])
    );
}

#[tokio::test]
async fn sends_tool_results_back_as_one_user_message_of_tool_result_blocks() {
    let model = ScriptedModel::sequence(vec![
        ScriptedReply::tool_calls([
            ("toolu_a", "grep", json!({"pattern": "main"})),
            ("toolu_b", "grep", json!({"pattern": "lib"})),
        ]),
        ScriptedReply::text("found both"),
    ])
    .await;
    let client = client(config(&model, true));
    let mut request = with_grep(ask("where are main and lib?"));
    let (first, _) = chat(&client, &request).await;
    let first = first.expect("first turn");
    request
        .messages
        .push(Message::assistant(first.text, first.tool_calls));
    request
        .messages
        .push(Message::tool_result("toolu_a", "src/main.rs"));
    request
        .messages
        .push(Message::tool_result("toolu_b", "src/lib.rs"));
    let (second, _) = chat(&client, &request).await;
    assert_eq!(second.expect("second turn").text, "found both");

    let seen = &model.requests()[1];
    assert_eq!(
        seen.raw["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "where are main and lib?"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_a", "name": "grep", "input": {"pattern": "main"}},
                {"type": "tool_use", "id": "toolu_b", "name": "grep", "input": {"pattern": "lib"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "src/main.rs"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "src/lib.rs"}]},
        ])
    );
    let roles: Vec<&str> = seen.messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool"]);
    assert_eq!(seen.messages[4].tool_call_id.as_deref(), Some("toolu_b"));
}

#[tokio::test]
async fn malformed_arguments_in_the_history_are_sent_as_raw_text() {
    let model = ScriptedModel::echo().await;
    let mut request = ask("go");
    request.messages.push(Message::assistant(
        "",
        vec![ToolCall {
            id: "toolu_1".into(),
            name: "grep".into(),
            arguments: "{\"pattern\": \"unterminated".into(),
        }],
    ));
    request.messages.push(Message::tool_result(
        "toolu_1",
        "invalid arguments: eof while parsing",
    ));
    let (answer, _) = chat(&client(config(&model, true)), &request).await;
    answer.expect("the server accepts the history");
    assert_eq!(
        model.requests()[0].raw["messages"][1]["content"][0]["input"],
        json!({"_raw": "{\"pattern\": \"unterminated"})
    );
}

#[tokio::test]
async fn maps_max_tokens_to_length() {
    let model =
        ScriptedModel::start(|_| ScriptedReply::text("cut sh").with_finish_reason("length")).await;
    let (answer, _) = chat(&client(config(&model, true)), &ask("long")).await;
    assert_eq!(answer.expect("answer").finish_reason, FinishReason::Length);
}

#[tokio::test]
async fn the_router_sends_each_model_id_to_its_provider() {
    let model = ScriptedModel::echo().await;
    let openai = OpenAiClient::new(OpenAiConfig::new(model.base_url())).expect("client builds");
    let anthropic = client(config(&model, true));
    let router = ModelRouter::new(RouterConfig {
        default: OPENAI_PREFIX.into(),
        providers: HashMap::from([
            (
                OPENAI_PREFIX.to_owned(),
                Arc::new(openai) as Arc<dyn Provider>,
            ),
            (
                ANTHROPIC_PREFIX.to_owned(),
                Arc::new(anthropic) as Arc<dyn Provider>,
            ),
        ]),
    })
    .expect("router builds");
    for (model_id, text) in [
        ("anthropic/x", "one"),
        ("x", "two"),
        ("meta/llama", "three"),
    ] {
        let request = ChatRequest {
            model: model_id.into(),
            ..ask(text)
        };
        let (answer, _) = chat(&router, &request).await;
        assert_eq!(answer.expect("answer").text, format!("echo: {text}"));
    }
    let seen: Vec<(WireFormat, String)> = model
        .requests()
        .into_iter()
        .map(|r| (r.format, r.model))
        .collect();
    assert_eq!(
        seen,
        [
            (WireFormat::Anthropic, "x".to_owned()),
            (WireFormat::OpenAi, "x".to_owned()),
            (WireFormat::OpenAi, "meta/llama".to_owned()),
        ]
    );
}
