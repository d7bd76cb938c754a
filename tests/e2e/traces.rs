//! Traces across processes: a coordinator and two worker processes export their spans
//! over OTLP/gRPC to a receiver in the test. A parent task whose two children run on
//! the other worker is one trace, whose id is the task's; every span's parent is in it;
//! the spans carry the GenAI attributes and no prompt text; the spans are flushed when
//! the processes stop; and the processes' JSON log lines name the spans they were
//! written in. With no protocol named, the same spans go over the default protocol,
//! OTLP/HTTP with protobuf bodies.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use taskwire_e2e::PATIENCE;
use taskwire_e2e::process::{Process, Taskwire, WorkerOptions, free_addr, wait_serving};
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;
use taskwire_test_support::otlp::{Collector, Received};
use taskwire_test_support::{NatsServer, ScriptedModel, ScriptedReply, SeenRequest, TestDatabase};
use tonic::transport::Channel;

const PARENT: &str = "parent: survey the coast";
const CHILDREN: [&str; 2] = ["child: survey the north", "child: survey the south"];
const ACK_WAIT: Duration = Duration::from_secs(10);

/// The parent starts both children in one turn, then sums up; children answer at once.
fn script(req: &SeenRequest) -> ScriptedReply {
    let first = req.first_user_message().unwrap_or_default();
    if first.starts_with("child:") {
        return ScriptedReply::text(format!("done: {first}"));
    }
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls(CHILDREN.iter().enumerate().map(|(i, prompt)| {
            (
                format!("call_{i}"),
                "task",
                serde_json::json!({"description": "half", "prompt": prompt, "subagent_type": "general"}),
            )
        })),
        _ => ScriptedReply::text("the coast is surveyed"),
    }
}

async fn until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {PATIENCE:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `task_id` once it is no longer queued or running, checking meanwhile that
/// `processes` still run; a failure after [`PATIENCE`].
async fn ended<const N: usize>(
    client: &mut TaskServiceClient<Channel>,
    task_id: &str,
    mut processes: [&mut Process; N],
) -> pb::Task {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let task = client
            .get(pb::GetRequest {
                task_id: task_id.to_owned(),
            })
            .await
            .expect("get")
            .into_inner();
        if ![pb::TaskStatus::Queued, pb::TaskStatus::Running].contains(&task.status()) {
            return task;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {task_id} still {:?} after {PATIENCE:?}",
            task.status()
        );
        for process in &mut processes {
            process.check_running().expect("process runs");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The JSON log lines of `process` written for `task_id`.
fn task_log_lines(process: &Process, task_id: &str) -> Vec<serde_json::Value> {
    process
        .stderr()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["task_id"] == task_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_tree_on_two_workers_is_one_trace_with_genai_spans_and_no_prompt_text() {
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let nats = NatsServer::start().expect("nats");
    let db = TestDatabase::create().await.expect("database");
    let model = ScriptedModel::start(script).await;
    let workspace = tempfile::tempdir().expect("workspace");
    let receiver = Collector::start().await.expect("otlp receiver");
    let endpoint = receiver.endpoint();
    let env = |log: &'static str| {
        vec![
            ("RUST_LOG", log),
            ("TASKWIRE_LOG_FORMAT", "json"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ]
    };

    let addr = free_addr().expect("port");
    let mut coordinator = taskwire
        .coordinator_with_env(
            "coordinator",
            db.url(),
            &nats.url(),
            addr,
            ACK_WAIT,
            &env("info"),
        )
        .expect("start coordinator");
    let mut client = wait_serving(&mut coordinator, addr, None)
        .await
        .expect("coordinator serving");
    let (nats_url, model_url) = (nats.url(), model.base_url());
    let worker = |name: &str, concurrency: usize| {
        let options = WorkerOptions {
            concurrency,
            ack_wait: Some(ACK_WAIT),
            ..WorkerOptions::new(&nats_url, &model_url, workspace.path())
        };
        let log = "info,taskwire_worker=debug,taskwire_agent=debug";
        taskwire
            .worker_with_env(name, &options, &env(log))
            .expect("start worker")
    };
    // The parent's worker runs one session at a time: the children go to the other.
    let mut parent_worker = worker("worker-parent", 1);

    let submitted = client
        .submit(pb::SubmitRequest {
            agent: "build".into(),
            prompt: PARENT.into(),
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner();
    until("the parent to run", || {
        parent_worker.check_running().expect("parent worker runs");
        model
            .requests()
            .iter()
            .any(|r| r.first_user_message() == Some(PARENT))
            .then_some(())
    })
    .await;
    let mut child_worker = worker("worker-children", 2);
    let parent = ended(
        &mut client,
        &submitted.task_id,
        [&mut coordinator, &mut child_worker],
    )
    .await;
    assert_eq!(parent.status(), pb::TaskStatus::Completed, "{parent:?}");
    let children = client
        .list(pb::ListRequest {
            parent_task_id: parent.task_id.clone(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .tasks;
    assert_eq!(children.len(), 2, "{children:?}");

    // Spans are exported in batches every few seconds; stopping flushes the rest.
    for process in [&mut parent_worker, &mut child_worker, &mut coordinator] {
        let status = process.terminate().await.expect("stops");
        assert!(status.success(), "{status:?}\n{}", process.tail(20));
    }
    let spans = receiver.spans();

    // One trace, and it is the task's.
    let traces: HashSet<String> = spans.iter().map(Received::trace_id).collect();
    assert_eq!(
        traces,
        HashSet::from([submitted.trace_id.clone()]),
        "one trace, the task's"
    );
    assert!(children.iter().all(|c| c.trace_id == submitted.trace_id));

    // Every span's parent is in the trace; the one root is the submit.
    let by_id: HashMap<String, &Received> = spans.iter().map(|s| (s.span_id(), s)).collect();
    let roots: Vec<&Received> = spans.iter().filter(|s| s.parent_id().is_empty()).collect();
    let orphans: Vec<String> = spans
        .iter()
        .filter(|s| !s.parent_id().is_empty() && !by_id.contains_key(&s.parent_id()))
        .map(|s| s.span.name.clone())
        .collect();
    assert!(
        orphans.is_empty(),
        "spans whose parent is missing: {orphans:?}"
    );
    let root_names: Vec<&str> = roots.iter().map(|s| s.span.name.as_str()).collect();
    assert_eq!(root_names, ["taskwire.v1.TaskService/Submit"]);

    // Three processes: the coordinator and both workers, each with its instance id.
    let processes: HashSet<(String, String)> = spans
        .iter()
        .map(|s| (s.service.clone(), s.instance.clone()))
        .collect();
    assert!(processes.contains(&("taskwire-worker".into(), "worker-parent".into())));
    assert!(processes.contains(&("taskwire-worker".into(), "worker-children".into())));
    assert_eq!(
        processes
            .iter()
            .filter(|(s, _)| s == "taskwire-coordinator")
            .count(),
        1,
        "{processes:?}"
    );

    // The agent runs, on their workers, with the GenAI attributes.
    let named =
        |name: &str| -> Vec<&Received> { spans.iter().filter(|s| s.span.name == name).collect() };
    let parent_run = named("invoke_agent build");
    assert_eq!(parent_run.len(), 1, "one attempt of the parent");
    let parent_run = parent_run[0];
    assert_eq!(parent_run.instance, "worker-parent");
    assert_eq!(parent_run.attr("task.id"), Some(parent.task_id.clone()));
    assert_eq!(
        parent_run.attr("gen_ai.agent.name").as_deref(),
        Some("build")
    );
    assert_eq!(
        parent_run.attr("worker.id").as_deref(),
        Some("worker-parent")
    );
    assert_eq!(parent_run.attr("task.attempt").as_deref(), Some("1"));
    assert!(parent_run.attr("session.id").is_some_and(|s| !s.is_empty()));
    let child_runs = named("invoke_agent general");
    assert_eq!(child_runs.len(), 2);
    for run in &child_runs {
        assert_eq!(run.instance, "worker-children");
        // invoke_agent ← ChildSubmit (coordinator) ← execute_tool task (parent's worker)
        let submit = by_id[&run.parent_id()];
        assert_eq!(submit.span.name, "ChildSubmit");
        assert_eq!(submit.service, "taskwire-coordinator");
        let tool = by_id[&submit.parent_id()];
        assert_eq!(tool.span.name, "execute_tool task");
        assert_eq!(tool.instance, "worker-parent");
        assert_eq!(tool.attr("gen_ai.tool.name").as_deref(), Some("task"));
        assert!(
            tool.attr("gen_ai.tool.call.id")
                .is_some_and(|id| id.starts_with("call_"))
        );
        // The worker's INFO line about the child, written in the call, is its event.
        assert!(
            tool.span
                .events
                .iter()
                .any(|e| e.name == "child task started"
                    && e.attributes.iter().any(|kv| kv.key == "child.id")),
            "{:?}",
            tool.span.events
        );
    }
    let chats = named("chat scripted");
    assert_eq!(chats.len(), 4, "two parent turns and one per child");
    for chat in &chats {
        for key in [
            "gen_ai.operation.name",
            "gen_ai.request.model",
            "gen_ai.response.model",
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "gen_ai.response.finish_reasons",
            "server.address",
        ] {
            assert!(
                chat.attr(key).is_some(),
                "chat span without {key}: {chat:?}"
            );
        }
        assert_eq!(chat.attr("server.address").as_deref(), Some("127.0.0.1"));
    }
    for name in ["publish", "record_result"] {
        let found = spans
            .iter()
            .filter(|s| s.span.name.starts_with(name))
            .count();
        assert_eq!(found, 3, "one {name} per task");
    }

    // No prompt or completion text by default.
    for span in &spans {
        let text = span.all_text();
        for secret in [PARENT, CHILDREN[0], CHILDREN[1], "the coast is surveyed"] {
            assert!(!text.contains(secret), "{secret:?} in {text}");
        }
    }

    // Log lines written for a task name it, its trace and an exported span.
    let lines = task_log_lines(&parent_worker, &parent.task_id);
    assert!(!lines.is_empty(), "{}", parent_worker.tail(20));
    for line in &lines {
        assert_eq!(line["trace_id"], submitted.trace_id.as_str(), "{line}");
        let span_id = line["span_id"].as_str().unwrap_or_default();
        assert!(by_id.contains_key(span_id), "{line}");
    }

    let mut tree: Vec<String> = spans
        .iter()
        .map(|s| format!("{} [{}]", s.span.name, s.instance))
        .collect();
    tree.sort();
    eprintln!(
        "one trace {}: {} spans from {} processes, {} log lines of the parent name their span:\n  {}",
        submitted.trace_id,
        spans.len(),
        processes.len(),
        lines.len(),
        tree.join("\n  ")
    );
}

/// With no protocol named, the processes speak the default, OTLP/HTTP with protobuf
/// bodies (`POST /v1/traces`): one task's spans from the coordinator and its worker
/// reach the receiver as one trace, the task's, whose root is the submit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_protocol_named_spans_are_exported_over_otlp_http() {
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let nats = NatsServer::start().expect("nats");
    let db = TestDatabase::create().await.expect("database");
    let model = ScriptedModel::start(|_: &SeenRequest| ScriptedReply::text("done")).await;
    let workspace = tempfile::tempdir().expect("workspace");
    let receiver = Collector::start().await.expect("otlp receiver");
    let endpoint = receiver.http_endpoint();
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())];

    let addr = free_addr().expect("port");
    let mut coordinator = taskwire
        .coordinator_with_env("coordinator", db.url(), &nats.url(), addr, ACK_WAIT, &env)
        .expect("start coordinator");
    let mut client = wait_serving(&mut coordinator, addr, None)
        .await
        .expect("coordinator serving");
    let (nats_url, model_url) = (nats.url(), model.base_url());
    let options = WorkerOptions {
        ack_wait: Some(ACK_WAIT),
        ..WorkerOptions::new(&nats_url, &model_url, workspace.path())
    };
    let mut worker = taskwire
        .worker_with_env("worker-http", &options, &env)
        .expect("start worker");

    let submitted = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: "say done".into(),
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner();
    let task = ended(
        &mut client,
        &submitted.task_id,
        [&mut coordinator, &mut worker],
    )
    .await;
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    // Stopping flushes what the batch processors hold.
    for process in [&mut worker, &mut coordinator] {
        let status = process.terminate().await.expect("stops");
        assert!(status.success(), "{status:?}\n{}", process.tail(20));
    }

    let spans = receiver.spans();
    let traces: HashSet<String> = spans.iter().map(Received::trace_id).collect();
    assert_eq!(traces, HashSet::from([submitted.trace_id.clone()]));
    let mut names: Vec<(String, String)> = spans
        .iter()
        .map(|s| (s.span.name.clone(), s.service.clone()))
        .collect();
    names.sort();
    for expected in [
        ("taskwire.v1.TaskService/Submit", "taskwire-coordinator"),
        ("invoke_agent general", "taskwire-worker"),
        ("chat scripted", "taskwire-worker"),
        ("record_result", "taskwire-coordinator"),
    ] {
        assert!(
            names
                .iter()
                .any(|(n, s)| n == expected.0 && s == expected.1),
            "no {expected:?} in {names:?}"
        );
    }
    let run = spans
        .iter()
        .find(|s| s.span.name == "invoke_agent general")
        .expect("the attempt's span");
    assert_eq!(run.attr("task.id"), Some(submitted.task_id.clone()));
    assert_eq!(run.instance, "worker-http");
}
