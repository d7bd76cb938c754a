//! Metrics over real HTTP: a coordinator and a worker serve `/metrics` on their
//! `--http-listen` addresses; a task moves the counters; `promtool check metrics` finds
//! nothing to say about either exposition; the Grafana dashboard queries only metrics
//! that are exported. The coordinator's `/readyz` follows Postgres and shutdown.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use taskwire_e2e::process::{free_addr, http_get};
use taskwire_e2e::{PATIENCE, start_with};
use taskwire_protocol::pb;
use taskwire_test_support::{
    NatsServer, PrivatePostgres, ScriptedModel, ScriptedReply, SeenRequest,
};

/// Lists the workspace once, then answers; a prompt saying "flaky" is answered 503
/// the first time.
fn list_then_answer(req: &SeenRequest, flaked: &AtomicBool) -> ScriptedReply {
    let flaky = req
        .first_user_message()
        .is_some_and(|m| m.contains("flaky"));
    if flaky && !flaked.swap(true, Ordering::SeqCst) {
        return ScriptedReply::status(503, "overloaded");
    }
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([("call_1", "list", serde_json::json!({}))])
            .with_usage(120, 7),
        _ => ScriptedReply::text("listed").with_usage(150, 3),
    }
}

/// The value of the sample `series` (name and labels as exposed) in a classic text
/// exposition; 0 when it is not there yet.
fn sample(exposition: &str, series: &str) -> f64 {
    exposition
        .lines()
        .find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == series).then(|| value.parse().ok())?
        })
        .unwrap_or(0.0)
}

async fn scrape(addr: SocketAddr) -> String {
    let (status, body) = http_get(addr, "/metrics").await.expect("GET /metrics");
    assert_eq!(status, 200, "{body}");
    body
}

/// Names a scraper can query in an exposition (its families' samples: a histogram's
/// `_bucket`, `_sum` and `_count`), and its label names.
fn exported(exposition: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
        if kind == "histogram" {
            for suffix in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{name}{suffix}"));
            }
        } else {
            names.insert(name.to_owned());
        }
    }
    let labels = exposition
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once('{').map(|(_, rest)| rest))
        .flat_map(|labels| labels.split(',').filter_map(|kv| kv.split_once('=')))
        .map(|(k, _)| k.trim_start_matches('{').to_owned())
        .collect();
    (names, labels)
}

/// Lints an exposition with `promtool check metrics`; a missing promtool fails the test
/// under CI and skips the check otherwise.
fn promtool_check(what: &str, exposition: &str) {
    use std::io::Write;
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!("promtool is needed under CI (apt-get install prometheus): {e}")
        }
        Err(e) => {
            eprintln!("skipping promtool check of the {what} exposition: {e}");
            return;
        }
    };
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(exposition.as_bytes())
        .expect("write to promtool");
    let out = child.wait_with_output().expect("promtool runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics on the {what} exposition ({}):\n{said}\n---\n{exposition}",
        out.status
    );
}

/// Every `expr` of a Grafana dashboard.
fn dashboard_queries(dashboard: &serde_json::Value, out: &mut Vec<String>) {
    match dashboard {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr", serde_json::Value::String(expr)) => out.push(expr.clone()),
                    _ => dashboard_queries(value, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| dashboard_queries(v, out)),
        _ => {}
    }
}

#[tokio::test]
async fn a_task_moves_the_coordinator_and_worker_counters_and_promtool_finds_nothing_to_lint() {
    let coordinator_http = free_addr().expect("free port");
    let worker_http = free_addr().expect("free port");
    let flaked = Arc::new(AtomicBool::new(false));
    let model = ScriptedModel::start(move |req| list_then_answer(req, &flaked)).await;
    let mut cluster = start_with(model, 0, 1, |config| {
        config.http_listen = coordinator_http;
        config.max_backlog = 5_000;
    })
    .await
    .expect("cluster");
    cluster.add_worker_with("metered", 3, |config| {
        config.http_listen = Some(worker_http);
        config.models = serde_json::from_value(serde_json::json!({"scripted": {
            "context_window": 128_000,
            "input_usd_per_mtok": 2.0,
            "output_usd_per_mtok": 8.0,
        }}))
        .expect("a valid catalogue");
        // A 503 fails the attempt at once, and the task's retry follows quickly.
        config.model.max_retries = 0;
        config.retry_base_delay = Duration::from_millis(100);
    });
    poll(PATIENCE, "the coordinator and the worker ready", || async {
        let coordinator = http_get(coordinator_http, "/readyz").await.ok()?.0;
        let worker = http_get(worker_http, "/readyz").await.ok()?.0;
        (coordinator == 200 && worker == 200).then_some(())
    })
    .await;
    let (status, body) = http_get(coordinator_http, "/healthz")
        .await
        .expect("healthz");
    assert_eq!((status, body.as_str()), (200, "ok\n"));

    let submitted = "taskwire_coordinator_tasks_submitted_total{agent=\"general\"}";
    let finished =
        "taskwire_coordinator_tasks_finished_total{agent=\"general\",status=\"completed\"}";
    let retries = "taskwire_coordinator_task_retries_total{agent=\"general\"}";
    let server_errors = "taskwire_worker_model_errors_total{gen_ai_request_model=\"scripted\",kind=\"server_error\"}";
    let e2e_count = "taskwire_coordinator_task_duration_seconds_count{agent=\"general\"}";
    let wait_count = "taskwire_coordinator_queue_wait_seconds_count";
    let model_labels = "gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"scripted\"";
    let model_calls = format!("gen_ai_client_operation_duration_seconds_count{{{model_labels}}}");
    let input_tokens =
        format!("gen_ai_client_token_usage_sum{{{model_labels},gen_ai_token_type=\"input\"}}");
    let list_calls = "taskwire_worker_tool_calls_total{tool=\"list\",outcome=\"ok\"}";
    let before_c = scrape(coordinator_http).await;
    let before_w = scrape(worker_http).await;
    assert_eq!(
        sample(&before_w, "taskwire_worker_sessions_capacity"),
        3.0,
        "{before_w}"
    );

    let task = cluster
        .submit("general", "list the files")
        .await
        .expect("submit");
    let done = cluster.wait_finished(&task).await.expect("finished");
    assert_eq!(done.status, pb::TaskStatus::Completed as i32);
    let flaky = cluster
        .submit("general", "a flaky model")
        .await
        .expect("submit");
    let done = cluster.wait_finished(&flaky).await.expect("finished");
    assert_eq!(done.status, pb::TaskStatus::Completed as i32);

    // The aggregator counts right after it records, so poll briefly.
    let after_c = poll(
        Duration::from_secs(10),
        "the finished counter to move",
        || async {
            let text = scrape(coordinator_http).await;
            (sample(&text, finished) > sample(&before_c, finished)).then_some(text)
        },
    )
    .await;
    assert_eq!(
        sample(&after_c, submitted) - sample(&before_c, submitted),
        2.0
    );
    assert_eq!(
        sample(&after_c, finished) - sample(&before_c, finished),
        2.0
    );
    assert_eq!(
        sample(&after_c, e2e_count) - sample(&before_c, e2e_count),
        2.0
    );
    assert_eq!(sample(&after_c, retries) - sample(&before_c, retries), 1.0);
    assert_eq!(
        sample(
            &after_c,
            "taskwire_coordinator_dead_letters_total{reason=\"max_deliveries\"}"
        ),
        0.0,
        "known reasons are exported at 0\n{after_c}"
    );
    assert!(
        sample(&after_c, wait_count) > sample(&before_c, wait_count),
        "{after_c}"
    );
    assert_eq!(
        sample(&after_c, "taskwire_coordinator_backlog_limit"),
        5_000.0,
        "the configured --max-backlog\n{after_c}"
    );
    let after_w = scrape(worker_http).await;
    assert_eq!(
        sample(&after_w, &model_calls) - sample(&before_w, &model_calls),
        5.0,
        "two model turns per task, and the one that failed\n{after_w}"
    );
    assert_eq!(
        sample(&after_w, &input_tokens) - sample(&before_w, &input_tokens),
        2.0 * 270.0,
        "{after_w}"
    );
    assert_eq!(
        sample(&after_w, list_calls) - sample(&before_w, list_calls),
        2.0
    );
    assert_eq!(
        sample(&after_w, server_errors) - sample(&before_w, server_errors),
        1.0
    );
    // Two tasks of 270 input and 10 output tokens at $2 and $8 per million.
    let cost = "taskwire_worker_model_cost_usd_total{gen_ai_request_model=\"scripted\"}";
    let spent = sample(&after_w, cost) - sample(&before_w, cost);
    assert!(
        (spent - 2.0 * (270.0 * 2.0 + 10.0 * 8.0) / 1e6).abs() < 1e-12,
        "{spent}\n{after_w}"
    );
    // The worker lets go of a session after it publishes the result, so the
    // gauge may read 1 for a moment after the coordinator recorded it.
    poll(
        Duration::from_secs(10),
        "the running sessions gauge back at 0",
        || async {
            let text = scrape(worker_http).await;
            (sample(&text, "taskwire_worker_sessions_running") == 0.0).then_some(())
        },
    )
    .await;
    // No task id ever becomes a label.
    assert!(!after_c.contains(&task) && !after_w.contains(&task));

    promtool_check("coordinator", &after_c);
    promtool_check("worker", &after_w);

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/grafana/taskwire.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read the dashboard"))
            .expect("the dashboard is json");
    let mut queries = Vec::new();
    dashboard_queries(&dashboard, &mut queries);
    assert!(queries.len() >= 10, "{queries:?}");
    let (mut names, mut labels) = exported(&after_c);
    let (worker_names, worker_labels) = exported(&after_w);
    names.extend(worker_names);
    labels.extend(worker_labels);
    let mut missing = HashMap::new();
    for query in &queries {
        let referenced = query
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|t| t.starts_with("taskwire_") || t.starts_with("gen_ai_"))
            .filter(|t| !labels.contains(*t));
        for name in referenced {
            if !names.contains(name) {
                missing.insert(name.to_owned(), query.clone());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the dashboard queries metrics nobody exports: {missing:?}"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_is_not_ready_while_postgres_is_down_and_ready_again_when_it_is_back() {
    taskwire_test_support::init_tracing();
    let mut pg = tokio::task::block_in_place(PrivatePostgres::start).expect("private postgres");
    let nats = NatsServer::start().expect("nats");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let http = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let coordinator_http = http.local_addr().expect("addr");
    let config = taskwire_coordinator::CoordinatorConfig {
        database_url: pg.url(),
        nats_url: nats.url(),
        listen: listener.local_addr().expect("addr"),
        ..Default::default()
    };
    let token = tokio_util::sync::CancellationToken::new();
    let coordinator = tokio::spawn(taskwire_coordinator::serve_with_http(
        config,
        listener,
        http,
        token.clone(),
    ));
    poll(PATIENCE, "readyz to answer 200", || async {
        let (status, _) = http_get(coordinator_http, "/readyz").await.ok()?;
        (status == 200).then_some(())
    })
    .await;

    tokio::task::block_in_place(|| pg.stop()).expect("stop postgres");
    let reason = poll(PATIENCE, "readyz to answer 503", || async {
        let (status, body) = http_get(coordinator_http, "/readyz").await.ok()?;
        (status == 503).then_some(body)
    })
    .await;
    assert!(reason.contains("postgres"), "{reason}");
    let (status, _) = http_get(coordinator_http, "/healthz")
        .await
        .expect("healthz");
    assert_eq!(status, 200, "alive while postgres is down");

    tokio::task::block_in_place(|| pg.start_again()).expect("start postgres again");
    poll(PATIENCE, "readyz to answer 200 again", || async {
        let (status, _) = http_get(coordinator_http, "/readyz").await.ok()?;
        (status == 200).then_some(())
    })
    .await;

    token.cancel();
    coordinator
        .await
        .expect("joins")
        .expect("the coordinator stops cleanly");
    assert!(
        http_get(coordinator_http, "/readyz").await.is_err(),
        "the listener is closed after shutdown"
    );
}

/// Calls `check` every 50 ms until it gives a value; panics after `limit`.
async fn poll<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited {limit:?} for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
