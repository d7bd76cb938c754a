//! What a session returns besides its text: a structured answer checked against the
//! task's output schema, and the provenance of what it read, fetched and ran.

use serde_json::json;
use taskwire_e2e::start;
use taskwire_protocol::pb;
use taskwire_protocol::value::struct_to_json;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SCHEMA: &str = r#"{"type": "object", "properties": {"files": {"type": "array", "items": {"type": "string"}}, "count": {"type": "integer"}}, "required": ["files", "count"]}"#;

async fn submit_with_schema(cluster: &taskwire_e2e::Cluster, schema: &str) -> pb::Task {
    let mut client = cluster.client().await.expect("client");
    let r = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: "list the files".into(),
            output_schema: schema.into(),
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner();
    cluster.wait_finished(&r.task_id).await.expect("finished")
}

fn structured(task: &pb::Task) -> Option<serde_json::Value> {
    task.result
        .as_ref()
        .and_then(|r| r.output.as_ref())
        .and_then(|o| o.structured.as_ref())
        .map(struct_to_json)
}

/// Answers prose first, then, once told what is wrong, valid JSON.
fn corrects_itself(req: &SeenRequest) -> ScriptedReply {
    match req.last_user_message() {
        Some(m) if m.contains("does not satisfy the required JSON Schema") => {
            ScriptedReply::text("```json\n{\"files\": [\"a.ts\", \"b.ts\"], \"count\": 2}\n```")
        }
        _ => ScriptedReply::text("I found a.ts and b.ts."),
    }
}

#[tokio::test]
async fn a_structured_output_task_returns_output_structured_and_a_bad_schema_is_refused() {
    let cluster = start(
        ScriptedModel::start(|_: &SeenRequest| {
            ScriptedReply::text(r#"{"files": ["a.ts"], "count": 1}"#)
        })
        .await,
        1,
        1,
    )
    .await
    .expect("cluster");
    let task = submit_with_schema(&cluster, SCHEMA).await;
    assert_eq!(
        task.status(),
        pb::TaskStatus::Completed,
        "{:?}",
        task.result
    );
    assert_eq!(
        structured(&task),
        Some(json!({"files": ["a.ts"], "count": 1.0}))
    );
    let system = cluster.model.requests()[0]
        .system_prompt()
        .map(str::to_owned)
        .expect("a system prompt");
    assert!(
        system.contains("\"required\"") && system.contains("one JSON object"),
        "the model is told the schema: {system}"
    );

    let mut client = cluster.client().await.expect("client");
    let err = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: "list the files".into(),
            output_schema: r#"{"type": "object", "required": "files"}"#.into(),
            ..Default::default()
        })
        .await
        .expect_err("an invalid schema");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("output_schema"), "{}", err.message());
    cluster.shutdown().await;
}

#[tokio::test]
async fn an_invalid_first_answer_is_corrected_on_the_second_try() {
    let cluster = start(ScriptedModel::start(corrects_itself).await, 1, 1)
        .await
        .expect("cluster");
    let task = submit_with_schema(&cluster, SCHEMA).await;
    assert_eq!(
        task.status(),
        pb::TaskStatus::Completed,
        "{:?}",
        task.result
    );
    assert_eq!(
        structured(&task),
        Some(json!({"files": ["a.ts", "b.ts"], "count": 2.0}))
    );
    let requests = cluster.model.requests();
    assert_eq!(requests.len(), 2);
    let correction = requests[1].last_user_message().expect("a correction");
    assert!(
        correction.contains("not valid json"),
        "the model sees the validation error: {correction}"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn two_invalid_answers_fail_the_task_with_output_schema_mismatch() {
    let cluster = start(
        ScriptedModel::start(|_: &SeenRequest| ScriptedReply::text(r#"{"count": "two"}"#)).await,
        1,
        1,
    )
    .await
    .expect("cluster");
    let task = submit_with_schema(&cluster, SCHEMA).await;
    assert_eq!(task.status(), pb::TaskStatus::Error, "{:?}", task.result);
    let result = task.result.expect("result");
    assert_eq!(result.errors[0].code, "output_schema_mismatch");
    assert!(
        result.errors[0].message.contains("files"),
        "{}",
        result.errors[0].message
    );
    assert!(!result.errors[0].retryable);
    assert_eq!(
        cluster.model.requests().len(),
        2,
        "sent back once, not more"
    );
    assert_eq!(task.attempts.len(), 1, "not retried");
    cluster.shutdown().await;
}

/// Serves `body` to every HTTP request on a loopback port; returns its URL.
async fn http_server(body: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = socket.read(&mut buf).await;
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/spec.txt")
}

#[tokio::test]
async fn provenance_lists_a_file_read_a_command_run_and_a_url_fetched() {
    let url = http_server("the retry spec says three attempts").await;
    let calls_url = url.clone();
    let cluster = start(
        ScriptedModel::start(move |req: &SeenRequest| match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([
                ("c1", "read", json!({"filePath": "notes.md"})),
                ("c2", "bash", json!({"command": "echo checked"})),
                ("c3", "webfetch", json!({"url": calls_url.clone()})),
            ]),
            1 => ScriptedReply::tool_calls([("c4", "read", json!({"filePath": "notes.md"}))]),
            _ => ScriptedReply::text("done"),
        })
        .await,
        1,
        1,
    )
    .await
    .expect("cluster");
    let ws = cluster.workspace.path();
    std::fs::write(ws.join("notes.md"), "the flaky test is in retries.rs\n").expect("write");
    std::fs::write(ws.join("plan.md"), "step one: read\n").expect("write");
    let id = cluster
        .submit("build", "follow @plan.md")
        .await
        .expect("submit");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(
        task.status(),
        pb::TaskStatus::Completed,
        "{:?}",
        task.result
    );
    let result = task.result.expect("result");
    let sources: Vec<(&str, &str)> = result
        .provenance
        .iter()
        .map(|p| (p.source.as_str(), p.uri.as_str()))
        .collect();
    assert_eq!(
        sources,
        [
            ("file", "plan.md"),
            ("read", "notes.md"),
            ("bash", "echo checked"),
            ("webfetch", url.as_str()),
        ],
        "each once, in the order first used"
    );
    let excerpt = |source: &str| {
        result
            .provenance
            .iter()
            .find(|p| p.source == source)
            .map(|p| p.excerpt.clone())
            .unwrap_or_default()
    };
    assert!(
        excerpt("read").contains("flaky test"),
        "{}",
        excerpt("read")
    );
    assert!(excerpt("bash").contains("checked"), "{}", excerpt("bash"));
    assert!(
        excerpt("webfetch").contains("three attempts"),
        "{}",
        excerpt("webfetch")
    );
    cluster.shutdown().await;
}
