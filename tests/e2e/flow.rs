//! A task runs real tools through a worker's agent session.

use taskwire_e2e::{final_result, start, tool_events};
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

/// The model greps for "needle", reads the file grep found, and answers with the line
/// it read: the answer can only be right if both tools really ran.
fn grep_then_read(req: &SeenRequest) -> ScriptedReply {
    let last_tool = req
        .messages
        .iter()
        .rev()
        .find(|m| m.role == "tool")
        .map(|m| m.content.clone());
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([(
            "call_1",
            "grep",
            serde_json::json!({"pattern": "needle"}),
        )]),
        1 => {
            let out = last_tool.unwrap_or_default();
            let path = out
                .lines()
                .find_map(|l| {
                    l.split_once(':')
                        .filter(|(p, _)| p.ends_with(".txt"))
                        .map(|(p, _)| p.to_owned())
                })
                .unwrap_or_else(|| "grep-found-nothing".to_owned());
            ScriptedReply::tool_calls([("call_2", "read", serde_json::json!({"filePath": path}))])
        }
        _ => {
            let out = last_tool.unwrap_or_default();
            let line = out
                .lines()
                .find(|l| l.contains("needle"))
                .unwrap_or("no needle")
                .trim()
                .to_owned();
            ScriptedReply::text(format!("found it: {line}"))
        }
    }
}

async fn seeded_cluster() -> taskwire_e2e::Cluster {
    let model = ScriptedModel::start(grep_then_read).await;
    let cluster = start(model, 1, 4).await.expect("cluster");
    let ws = cluster.workspace.path();
    std::fs::create_dir_all(ws.join("notes")).expect("mkdir");
    std::fs::create_dir_all(ws.join("src")).expect("mkdir");
    std::fs::write(
        ws.join("notes/todo.txt"),
        "buy milk\nthe needle is under the bridge\n",
    )
    .expect("write");
    std::fs::write(ws.join("src/lib.rs"), "fn main() {}\n").expect("write");
    cluster
}

#[tokio::test]
async fn grep_then_read_completes_with_text_from_the_real_files() {
    let cluster = seeded_cluster().await;
    let id = cluster
        .submit("explore", "where is the needle?")
        .await
        .expect("submit");
    let events = cluster.watch(&id).await.expect("watch");

    use pb::ToolCallState::*;
    let tools = tool_events(&events);
    assert_eq!(
        tools,
        vec![
            ("grep".to_owned(), Pending),
            ("grep".to_owned(), Running),
            ("grep".to_owned(), Completed),
            ("read".to_owned(), Pending),
            ("read".to_owned(), Running),
            ("read".to_owned(), Completed),
        ]
    );
    let result = final_result(&events).expect("watch ends with the result");
    assert_eq!(result.status(), pb::TaskStatus::Completed);
    let text = &result.output.as_ref().expect("output").text;
    assert!(
        text.contains("the needle is under the bridge"),
        "result text: {text}"
    );
    assert_eq!(result.metrics.as_ref().expect("metrics").steps, 3);
    let usage = result.usage.expect("usage");
    assert!(
        usage.input_tokens > 0 && usage.output_tokens > 0,
        "usage: {usage:?}"
    );
    assert_eq!(result.tool_calls.len(), 2);

    // Step events carry usage, and progress is numbered without gaps.
    let seqs: Vec<u64> = events
        .iter()
        .filter_map(|e| match &e.event {
            Some(pb::watch_event::Event::Progress(p)) => Some(p.seq),
            _ => None,
        })
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let finished_steps = events
        .iter()
        .filter(|e| {
            matches!(&e.event, Some(pb::watch_event::Event::Progress(p))
                if matches!(&p.event, Some(pb::task_progress::Event::StepFinished(s)) if s.usage.is_some()))
        })
        .count();
    assert_eq!(finished_steps, 3);

    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed);
    assert_eq!(task.attempt, 1);
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_late_watch_replays_every_event() {
    let cluster = seeded_cluster().await;
    let id = cluster
        .submit("explore", "where is the needle?")
        .await
        .expect("submit");
    let live = cluster.watch(&id).await.expect("live watch");
    cluster.wait_finished(&id).await.expect("finished");
    let late = cluster.watch(&id).await.expect("late watch");
    assert!(
        live.len() > 6,
        "expected a full event history, got {}",
        live.len()
    );
    assert_eq!(late, live, "a late watcher sees the same events and result");
    cluster.shutdown().await;
}

#[tokio::test]
async fn an_anthropic_model_is_reached_through_the_messages_api() {
    let model = ScriptedModel::start(|req: &SeenRequest| {
        ScriptedReply::text(format!("hello from {}", req.model))
    })
    .await;
    let mut cluster = start(model, 0, 1).await.expect("cluster");
    let anthropic = cluster.model.anthropic_base_url();
    cluster.add_worker_with("w", 2, |c| c.model.anthropic_base_url = Some(anthropic));
    let mut client = cluster.client().await.expect("client");
    let id = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: "hi".into(),
            model: Some("anthropic/claude-test".into()),
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(
        task.result.expect("result").output.expect("output").text,
        "hello from claude-test"
    );
    let seen = cluster.model.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].format,
        taskwire_test_support::model::WireFormat::Anthropic
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_model_declared_api_responses_is_called_through_the_responses_api() {
    let model = ScriptedModel::start(|req: &SeenRequest| match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([("g1", "glob", serde_json::json!({"pattern": "*.md"}))]),
        _ => ScriptedReply::text(format!("answered by {}", req.model)),
    })
    .await;
    let (mut cluster, _config) = with_agent(
        model,
        "thinker",
        "---\ndescription: thinks\nmode: primary\nreasoning_effort: low\n---\nThink.\n",
    )
    .await;
    let catalogue: taskwire_llm::ModelCatalogue = serde_json::from_value(serde_json::json!({
        "reasoner": {"context_window": 200000, "input_usd_per_mtok": 1,
                     "output_usd_per_mtok": 4, "api": "responses"}
    }))
    .expect("catalogue");
    cluster.add_worker_with("w", 2, move |c| c.models = catalogue);
    let mut client = cluster.client().await.expect("client");
    let mut run = async |agent: &str, model: &str| {
        let id = client
            .submit(pb::SubmitRequest {
                agent: agent.into(),
                prompt: "go".into(),
                model: Some(model.into()),
                ..Default::default()
            })
            .await
            .expect("submit")
            .into_inner()
            .task_id;
        let task = cluster.wait_finished(&id).await.expect("finished");
        assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
        task.result.expect("result").output.expect("output").text
    };
    assert_eq!(run("thinker", "reasoner").await, "answered by reasoner");
    assert_eq!(run("general", "scripted").await, "answered by scripted");
    let seen = cluster.model.requests();
    use taskwire_test_support::model::WireFormat;
    let formats: Vec<(WireFormat, &str)> =
        seen.iter().map(|r| (r.format, r.model.as_str())).collect();
    assert_eq!(
        formats,
        [
            (WireFormat::Responses, "reasoner"),
            (WireFormat::Responses, "reasoner"),
            (WireFormat::OpenAi, "scripted"),
            (WireFormat::OpenAi, "scripted"),
        ]
    );
    assert_eq!(seen[1].raw["reasoning"]["effort"], "low");
    assert!(
        seen[1].raw["input"]
            .as_array()
            .is_some_and(|items| items.iter().any(|i| i["type"] == "function_call_output")),
        "the tool's result went back as a function_call_output item"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn an_agents_extended_thinking_is_asked_for_and_its_blocks_go_back_with_the_tool_loop() {
    let model = ScriptedModel::start(|req: &SeenRequest| match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([("g1", "glob", serde_json::json!({"pattern": "*.md"}))])
            .with_thinking("the markdown files first"),
        _ => ScriptedReply::text("thought it through").with_thinking("that is enough"),
    })
    .await;
    let (mut cluster, _config) = with_agent(model, "deep", "---\ndescription: thinks\nmode: primary\ntemperature: 0.2\nthinking_budget: 2048\n---\nThink.\n").await;
    let anthropic = cluster.model.anthropic_base_url();
    cluster.add_worker_with("w", 2, |c| c.model.anthropic_base_url = Some(anthropic));
    let mut client = cluster.client().await.expect("client");
    let id = client
        .submit(pb::SubmitRequest {
            agent: "deep".into(),
            prompt: "look".into(),
            model: Some("anthropic/claude-test".into()),
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    assert_eq!(
        task.result.expect("result").output.expect("output").text,
        "thought it through",
        "the thinking is not the answer"
    );
    let seen = cluster.model.requests();
    assert_eq!(seen.len(), 2);
    let second = &seen[1].raw;
    assert_eq!(second["thinking"]["type"], "enabled");
    assert_eq!(second["thinking"]["budget_tokens"], 2048);
    assert!(second.get("temperature").is_none(), "{second}");
    let turn = &second["messages"][1]["content"][0];
    assert_eq!(turn["type"], "thinking");
    assert_eq!(turn["thinking"], "the markdown files first");
    assert_eq!(
        turn["signature"],
        taskwire_test_support::model::thinking_signature("the markdown files first")
    );
    cluster.shutdown().await;
}

/// A cluster (no worker yet) whose coordinator reads one agent, `name`, defined by
/// `text`; the definitions directory lives as long as the guard.
async fn with_agent(
    model: ScriptedModel,
    name: &str,
    text: &str,
) -> (taskwire_e2e::Cluster, tempfile::TempDir) {
    let config = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(config.path().join("agents")).expect("agents dir");
    std::fs::write(config.path().join(format!("agents/{name}.md")), text).expect("agent");
    let dir = config.path().to_owned();
    let cluster = taskwire_e2e::start_with(model, 0, 1, move |c| c.config_dir = Some(dir))
        .await
        .expect("cluster");
    (cluster, config)
}
