//! Prompt caching: a session's requests keep the prefix each step repeats byte for
//! byte, mark it for the provider (Anthropic's `cache_control` breakpoints, OpenAI's
//! `prompt_cache_key`), and the cached tokens the provider reports are counted and
//! priced. The model server simulates a provider's cache (`ScriptedModel::caching`):
//! a hit is a prefix of whole blocks, byte for byte, that an earlier request stored.

use serde_json::{Value, json};
use taskwire_e2e::{Cluster, start};
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

/// Tool steps before the answer: with it, a ten-step session.
const TOOL_STEPS: usize = 9;

async fn ten_steps() -> ScriptedModel {
    ScriptedModel::caching(|req: &SeenRequest| {
        let turn = req.assistant_turns();
        if turn < TOOL_STEPS {
            ScriptedReply::tool_calls([(
                format!("g{turn}"),
                "glob",
                json!({"pattern": format!("*.{turn}")}),
            )])
        } else {
            ScriptedReply::text("looked ten times")
        }
    })
    .await
}

async fn run(cluster: &Cluster, model: &str) -> pb::Task {
    let mut client = cluster.client().await.expect("client");
    let id = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: "look around, ten times".into(),
            model: Some(model.into()),
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    task
}

/// `value` without its `cache_control` markers, anywhere.
fn unmarked(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| *k != "cache_control")
                .map(|(k, v)| (k.clone(), unmarked(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(unmarked).collect()),
        other => other.clone(),
    }
}

#[tokio::test]
async fn an_anthropic_session_marks_a_byte_stable_prefix_and_its_cached_tokens_are_priced() {
    let model = ten_steps().await;
    let mut cluster = start(model, 0, 1).await.expect("cluster");
    let anthropic = cluster.model.anthropic_base_url();
    let catalogue: taskwire_llm::ModelCatalogue = serde_json::from_value(json!({
        "anthropic/claude-test": {"context_window": 200000, "input_usd_per_mtok": 3,
            "output_usd_per_mtok": 15, "cached_input_usd_per_mtok": 0.3,
            "cache_write_usd_per_mtok": 3.75}
    }))
    .expect("catalogue");
    cluster.add_worker_with("w", 2, move |c| {
        c.model.anthropic_base_url = Some(anthropic);
        c.models = catalogue;
    });
    let task = run(&cluster, "anthropic/claude-test").await;

    let requests = cluster.model.requests();
    assert_eq!(requests.len(), TOOL_STEPS + 1);
    for pair in requests.windows(2) {
        let (before, after) = (&pair[0].raw, &pair[1].raw);
        assert_eq!(
            before["tools"], after["tools"],
            "the same tools, in the same order"
        );
        assert_eq!(unmarked(&before["system"]), unmarked(&after["system"]));
        let (b, a) = (unmarked(&before["messages"]), unmarked(&after["messages"]));
        let (b, a) = (
            b.as_array().expect("messages"),
            a.as_array().expect("messages"),
        );
        assert_eq!(a[..b.len()], b[..], "each request repeats the one before");
        let marked = |raw: &Value| raw.to_string().matches("cache_control").count();
        assert_eq!(marked(after), 3, "tools, system prompt, conversation");
    }

    let usage = task.usage.expect("usage");
    let share = usage.cached_input_tokens as f64 / usage.input_tokens as f64;
    eprintln!(
        "ten steps: {} input tokens, {} read from the cache ({:.0} %), {} written",
        usage.input_tokens,
        usage.cached_input_tokens,
        share * 100.0,
        usage.cache_write_input_tokens
    );
    assert!(
        share > 0.6,
        "most of the input was read from the cache: {usage:?}"
    );
    assert!(usage.cache_write_input_tokens > 0, "{usage:?}");
    let plain = usage.input_tokens - usage.cached_input_tokens - usage.cache_write_input_tokens;
    let pico = plain * 3_000_000
        + usage.cached_input_tokens * 300_000
        + usage.cache_write_input_tokens * 3_750_000
        + usage.output_tokens * 15_000_000;
    assert_eq!(
        usage.cost_usd,
        Some(pico as f64 / 1e12),
        "cached tokens at their prices: {usage:?}"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn an_openai_session_sends_its_cache_key_and_reads_the_cached_tokens() {
    let model = ten_steps().await;
    let cluster = start(model, 1, 2).await.expect("cluster");
    let task = run(&cluster, "scripted").await;
    let requests = cluster.model.requests();
    assert_eq!(requests.len(), TOOL_STEPS + 1);
    let keys: Vec<&Value> = requests
        .iter()
        .map(|r| &r.raw["prompt_cache_key"])
        .collect();
    assert!(keys[0].is_string(), "{keys:?}");
    assert!(
        keys.iter().all(|k| *k == keys[0]),
        "one key per session: {keys:?}"
    );
    let usage = task.usage.expect("usage");
    assert!(
        usage.cached_input_tokens * 2 > usage.input_tokens,
        "most of the input was read from the cache: {usage:?}"
    );
    cluster.shutdown().await;
}
