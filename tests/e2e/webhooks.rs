//! Result webhooks against a real HTTP receiver.
//!
//! - Signed and retried: a receiver that fails twice gets three POSTs, each signed with
//!   the tenant's secret (verified here with HMAC-SHA256), and `Get` shows the three
//!   deliveries and `delivered`; nothing is sent after the 2xx.
//! - A coordinator killed (SIGKILL) mid-delivery: after a restart the webhook is
//!   delivered again with the same `taskwire-delivery`, and the receiver answers 2xx
//!   exactly once; the twin does the same with a parent whose two children ran once.
//! - Refused at submit: an http URL, a private address, a tenant without a secret.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use taskwire_e2e::process::{Taskwire, WorkerOptions, free_addr, wait_serving};
use taskwire_e2e::{PATIENCE, start_with};
use taskwire_protocol::pb;
use taskwire_test_support::{NatsServer, ScriptedModel, TestDatabase};
use tokio::sync::Notify;

const SECRET: &str = "whsec-test-1";

/// One POST the receiver got, and what it answered (`None`: it never answered).
#[derive(Debug, Clone)]
struct Received {
    headers: HeaderMap,
    body: Bytes,
    answered: Option<u16>,
}

/// What the receiver does with each POST, by its position (0-based).
#[derive(Clone, Copy)]
enum Answer {
    Status(u16),
    /// Holds the request open (the test kills the coordinator meanwhile).
    Hang,
}

#[derive(Clone)]
struct Receiver {
    script: Arc<Vec<Answer>>,
    seen: Arc<Mutex<Vec<Received>>>,
    arrived: Arc<Notify>,
}

impl Receiver {
    /// Serves on a free port: its URL.
    async fn start(script: Vec<Answer>) -> (Self, String) {
        let receiver = Self {
            script: Arc::new(script),
            seen: Arc::default(),
            arrived: Arc::default(),
        };
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        (receiver, format!("http://{addr}/hook"))
    }

    fn seen(&self) -> Vec<Received> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits until `n` POSTs arrived.
    async fn wait_for(&self, n: usize, patience: Duration) -> Vec<Received> {
        let deadline = Instant::now() + patience;
        loop {
            let arrived = self.arrived.notified();
            let seen = self.seen();
            if seen.len() >= n {
                return seen;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "{n} POSTs did not arrive: {seen:?}");
            let _ = tokio::time::timeout(left, arrived).await;
        }
    }
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let index = {
        let Ok(mut seen) = r.seen.lock() else {
            return StatusCode::INTERNAL_SERVER_ERROR;
        };
        seen.push(Received {
            headers,
            body,
            answered: None,
        });
        seen.len() - 1
    };
    r.arrived.notify_waiters();
    match r.script.get(index).copied().unwrap_or(Answer::Status(200)) {
        Answer::Hang => {
            std::future::pending::<()>().await;
            StatusCode::OK
        }
        Answer::Status(code) => {
            if let Ok(mut seen) = r.seen.lock() {
                seen[index].answered = Some(code);
            }
            StatusCode::from_u16(code).unwrap_or(StatusCode::OK)
        }
    }
}

/// Checks `taskwire-signature` as a receiver would: the HMAC of `t.body`.
fn assert_signed(r: &Received) {
    let header = r.headers["taskwire-signature"].to_str().expect("ascii");
    let (t, v1) = header
        .split_once(",v1=")
        .and_then(|(t, v)| Some((t.strip_prefix("t=")?, v)))
        .unwrap_or_else(|| panic!("malformed signature header: {header}"));
    let t: i64 = t.parse().expect("t is unix seconds");
    assert!(
        (chrono_now() - t).abs() < 300,
        "the signature's time is current"
    );
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(SECRET.as_bytes()).expect("key");
    mac.update(format!("{t}.").as_bytes());
    mac.update(&r.body);
    mac.verify_slice(&hex::decode(v1).expect("hex"))
        .unwrap_or_else(|_| panic!("the signature does not verify: {header}"));
}

fn chrono_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0))
}

fn secrets_file() -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("secrets file");
    std::io::Write::write_all(&mut f, format!("default = \"{SECRET}\"\n").as_bytes())
        .expect("write secrets");
    f
}

fn submit_with_hook(agent: &str, prompt: &str, url: &str) -> pb::SubmitRequest {
    pb::SubmitRequest {
        agent: agent.to_owned(),
        prompt: prompt.to_owned(),
        callback_url: url.to_owned(),
        ..Default::default()
    }
}

/// Reads `id` until its webhook is in `state`.
async fn wait_webhook(
    client: &mut pb::task_service_client::TaskServiceClient<tonic::transport::Channel>,
    id: &str,
    state: pb::WebhookState,
    patience: Duration,
) -> pb::Task {
    let deadline = Instant::now() + patience;
    loop {
        let task = client
            .get(pb::GetRequest {
                task_id: id.to_owned(),
            })
            .await
            .expect("get")
            .into_inner();
        if task
            .webhook
            .as_ref()
            .is_some_and(|w| w.state == state as i32)
        {
            return task;
        }
        assert!(
            Instant::now() < deadline,
            "the webhook did not reach {state:?}: {:?}",
            task.webhook
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_result_webhook_is_signed_retried_through_two_failures_and_each_delivery_recorded() {
    let (receiver, url) = Receiver::start(vec![
        Answer::Status(500),
        Answer::Status(503),
        Answer::Status(204),
    ])
    .await;
    let secrets = secrets_file();
    let path = secrets.path().to_owned();
    let cluster = start_with(ScriptedModel::echo().await, 1, 1, move |c| {
        c.webhook_secrets_file = Some(path);
        c.webhook_allow_http = true;
        c.webhook_allow_private = true;
    })
    .await
    .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let id = client
        .submit(submit_with_hook("general", "hello hook", &url))
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    let finished = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(finished.status(), pb::TaskStatus::Completed);

    let seen = receiver.wait_for(3, PATIENCE).await;
    let task = wait_webhook(&mut client, &id, pb::WebhookState::Delivered, PATIENCE).await;
    for r in &seen {
        assert_signed(r);
        assert_eq!(r.headers["taskwire-delivery"], id.as_str());
        let body: serde_json::Value = serde_json::from_slice(&r.body).expect("json body");
        assert_eq!(body["event"], "task.ended");
        assert_eq!(body["task"]["task_id"], id.as_str());
        assert_eq!(body["task"]["status"], "completed");
        assert_eq!(body["task"]["result"]["text"], "echo: hello hook");
    }
    let attempts: Vec<&str> = seen
        .iter()
        .map(|r| r.headers["taskwire-attempt"].to_str().unwrap_or(""))
        .collect();
    assert_eq!(attempts, ["1", "2", "3"]);

    let hook = task.webhook.expect("webhook");
    assert_eq!(hook.url, url);
    assert_eq!(hook.attempts, 3);
    assert!(hook.delivered_at.is_some());
    let codes: Vec<u32> = hook.deliveries.iter().map(|d| d.status_code).collect();
    assert_eq!(codes, [500, 503, 204], "{:?}", hook.deliveries);
    assert!(
        hook.deliveries[0].error.contains("500"),
        "{:?}",
        hook.deliveries[0]
    );
    assert!(hook.deliveries[2].error.is_empty());

    // Delivered is final: nothing more arrives.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(receiver.seen().len(), 3, "no POST after the 2xx");
}

#[tokio::test]
async fn a_webhook_is_refused_at_submit_when_its_url_or_tenant_may_not_have_one() {
    let secrets = secrets_file();
    let path = secrets.path().to_owned();
    // The default policy: https to public addresses only.
    let cluster = start_with(ScriptedModel::echo().await, 0, 1, move |c| {
        c.webhook_secrets_file = Some(path);
    })
    .await
    .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    for (url, why) in [
        ("http://hooks.example.com/x", "https"),
        ("https://127.0.0.1/x", "not a public address"),
        ("https://10.0.0.7/x", "not a public address"),
        ("https://localhost/x", "loopback"),
        ("hooks.example.com", "not a URL"),
    ] {
        let err = client
            .submit(submit_with_hook("general", "x", url))
            .await
            .expect_err(url);
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{url}: {err:?}");
        assert!(
            err.message().contains("callback_url") && err.message().contains(why),
            "{url}: {}",
            err.message()
        );
    }
    let mut other = submit_with_hook("general", "x", "https://hooks.example.com/x");
    other.tenant = "globex".to_owned();
    let err = client.submit(other).await.expect_err("no secret");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("globex"), "{}", err.message());
    // Nothing was stored by the refused submits.
    let listed = client
        .list(pb::ListRequest::default())
        .await
        .expect("list")
        .into_inner();
    assert!(listed.tasks.is_empty(), "{:?}", listed.tasks);
}

async fn a_webhook_cut_off_by_a_coordinator_kill(tree: bool) {
    taskwire_test_support::init_tracing();
    let (receiver, url) = Receiver::start(vec![Answer::Hang, Answer::Status(200)]).await;
    let secrets = secrets_file();
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let nats = NatsServer::start().expect("nats");
    let db = TestDatabase::create().await.expect("database");
    let model =
        ScriptedModel::start(taskwire_test_support::scripts::parent_and_two_explorers).await;
    let workspace = tempfile::tempdir().expect("workspace");
    let secrets_path = secrets.path().display().to_string();
    let env = [
        ("TASKWIRE_WEBHOOK_SECRETS_FILE", secrets_path.as_str()),
        ("TASKWIRE_WEBHOOK_ALLOW_HTTP", "true"),
        ("TASKWIRE_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("TASKWIRE_WEBHOOK_TIMEOUT", "2s"),
        ("TASKWIRE_NO_TITLES", "true"),
        ("RUST_LOG", "warn"),
    ];
    let start = |name: &str, addr: SocketAddr| {
        taskwire.coordinator_with_env(
            name,
            db.url(),
            &nats.url(),
            addr,
            Duration::from_secs(5),
            &env,
        )
    };
    let addr = free_addr().expect("port");
    let mut first = start("coordinator-1", addr).expect("coordinator");
    let mut client = wait_serving(&mut first, addr, None)
        .await
        .expect("coordinator serves");
    let (nats_url, model_url) = (nats.url(), model.base_url());
    let options = WorkerOptions {
        concurrency: 3,
        ..WorkerOptions::new(&nats_url, &model_url, workspace.path())
    };
    let _worker = taskwire.worker("worker", &options).expect("worker");

    let prompt = if tree { "parent" } else { "alone" };
    let id = client
        .submit(submit_with_hook("general", prompt, &url))
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    // The first POST arrives and is held open: the coordinator dies mid-delivery.
    receiver.wait_for(1, PATIENCE * 2).await;
    first.kill();
    let _ = first.wait().await;

    let addr = free_addr().expect("port");
    let mut second = start("coordinator-2", addr).expect("coordinator");
    let mut client = wait_serving(&mut second, addr, None)
        .await
        .expect("restarted coordinator serves");
    // The lease (timeout 2 s + 5 s) expires, then the delivery is made again.
    receiver.wait_for(2, PATIENCE).await;
    let task = wait_webhook(&mut client, &id, pb::WebhookState::Delivered, PATIENCE).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = receiver.seen();
    assert_eq!(seen.len(), 2, "nothing after the 2xx: {seen:?}");
    let answered: Vec<Option<u16>> = seen.iter().map(|r| r.answered).collect();
    assert_eq!(answered, [None, Some(200)], "one 2xx, to the second POST");
    assert_eq!(
        seen[0].headers["taskwire-delivery"], seen[1].headers["taskwire-delivery"],
        "the same delivery id on the retry"
    );
    for r in &seen {
        assert_signed(r);
    }
    assert_eq!(task.status(), pb::TaskStatus::Completed);
    let hook = task.webhook.expect("webhook");
    assert_eq!(hook.attempts, 2);
    assert_eq!(hook.deliveries.len(), 2, "{:?}", hook.deliveries);
    assert_eq!(hook.deliveries[0].status_code, 0);
    assert!(
        hook.deliveries[0]
            .error
            .contains("stopped during the delivery"),
        "{:?}",
        hook.deliveries[0]
    );
    assert_eq!(hook.deliveries[1].status_code, 200);
    if tree {
        // The tree: both children ran once, and nothing else was started.
        let children = client
            .list(pb::ListRequest {
                parent_task_id: id.clone(),
                ..Default::default()
            })
            .await
            .expect("children")
            .into_inner()
            .tasks;
        assert_eq!(children.len(), 2, "{children:?}");
        for c in &children {
            assert_eq!(c.status(), pb::TaskStatus::Completed);
            assert_eq!(c.attempts.len(), 1, "each child ran once: {:?}", c.attempts);
            assert!(c.webhook.is_none(), "children have no webhook of their own");
        }
        let body: serde_json::Value = serde_json::from_slice(&seen[1].body).expect("json");
        assert_eq!(body["task"]["status"], "completed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_cut_off_by_a_coordinator_kill_is_answered_2xx_once_after_a_restart() {
    a_webhook_cut_off_by_a_coordinator_kill(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parents_webhook_cut_off_by_a_coordinator_kill_is_answered_once_and_its_children_ran_once()
 {
    a_webhook_cut_off_by_a_coordinator_kill(true).await;
}
