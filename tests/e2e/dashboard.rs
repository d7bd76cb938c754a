//! The web dashboard against a real coordinator and workers.
//!
//! - In headless Chromium (`tests/browser/dashboard.cjs`, playwright-core driving the
//!   system's `/usr/bin/chromium`): a parent that starts two children shows three
//!   nodes that turn completed without a reload, an approval raised by a child is
//!   answered from the page, and the list opened before shows the three tasks
//!   completed without a reload too; every node shows the usage `Get` records (own and
//!   subtree), on that page and on one opened after the tree finished. Screenshots go
//!   to `$CARGO_TARGET_TMPDIR/dashboard/`.
//! - Over plain HTTP: with a tokens file, the JSON and live endpoints show a tenant only
//!   its own tasks, and another tenant's task is 404 exactly like a missing one.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use taskwire_e2e::process::free_addr;
use taskwire_e2e::{PATIENCE, created_in_patch, start_with};
use taskwire_test_support::ScriptedModel;

pub(crate) use taskwire_test_support::scripts::{ASKER, two_children as script};

/// What the browser test needs: node, the system's Chromium and playwright-core as
/// `scripts/setup.sh` installs it. `None` (after saying why) when something is missing
/// outside CI; under CI a missing tool fails the test.
fn browser_tools() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let modules = home.join(".cache/taskwire/browser/node_modules");
    let missing: Vec<String> = [
        (
            PathBuf::from("/usr/bin/chromium"),
            "apt-get install chromium",
        ),
        (modules.join("playwright-core"), "scripts/setup.sh"),
    ]
    .into_iter()
    .filter(|(p, _)| !p.exists())
    .map(|(p, fix)| format!("{} (install with {fix})", p.display()))
    .chain(
        std::process::Command::new("node")
            .arg("--version")
            .output()
            .is_err()
            .then(|| "node (install nodejs)".to_owned()),
    )
    .collect();
    if missing.is_empty() {
        return Some(modules);
    }
    let why = format!("the browser test needs {}", missing.join(", "));
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("skipping: {why}");
    None
}

#[tokio::test]
async fn a_browser_sees_a_tree_complete_live_and_answers_a_childs_approval_from_the_page() {
    let Some(modules) = browser_tools() else {
        return;
    };
    let config = tempfile::tempdir().expect("config");
    let agents = config.path().join("agents");
    std::fs::create_dir_all(&agents).expect("mkdir");
    std::fs::write(agents.join("asker.md"), ASKER).expect("write agent");
    let dir = config.path().to_owned();
    let http: SocketAddr = free_addr().expect("free port");
    let mut cluster = start_with(ScriptedModel::start(script).await, 0, 1, move |c| {
        c.config_dir = Some(dir);
        c.http_listen = http;
    })
    .await
    .expect("cluster");
    // The parent and both children at once.
    cluster.add_worker("w0", 2);
    cluster.add_worker("w1", 2);
    let parent = cluster
        .submit("general", "parent: two children")
        .await
        .expect("submit");

    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&out).expect("screenshot dir");
    let started = Instant::now();
    let driver = tokio::process::Command::new("node")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/browser/dashboard.cjs"
        ))
        .arg(format!("http://{http}"))
        .arg(&parent)
        .arg(&out)
        .env("NODE_PATH", &modules)
        .kill_on_drop(true)
        .output();
    let ran = tokio::time::timeout(PATIENCE * 4, driver)
        .await
        .expect("the browser finished in time")
        .expect("node runs");
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success(),
        "the browser test failed ({}):\n{}\n{stdout}",
        ran.status,
        String::from_utf8_lossy(&ran.stderr)
    );
    eprintln!(
        "browser run took {took:?}; screenshots in {}",
        out.display()
    );
    let seen: serde_json::Value = serde_json::from_str(stdout.trim()).expect("the driver's report");
    assert_eq!(seen["same_load"], true, "no reload: {seen}");
    assert_eq!(
        seen["list_same_load"], true,
        "no reload of the list: {seen}"
    );
    assert_ne!(
        seen["list_status_before"], "completed",
        "the list was opened before the parent finished: {seen}"
    );
    assert_eq!(
        seen["rows"], 3,
        "the children appeared in the list live: {seen}"
    );
    let nodes = seen["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 3, "{seen}");
    assert!(nodes.iter().all(|n| n["status"] == "completed"), "{seen}");

    // Each node shows its usage as `Get` records it, own and subtree: on the page that
    // watched the tree run, and on one opened after it finished (whose replayed steps
    // must not count again).
    let reloaded = seen["reloaded_nodes"].as_array().expect("reloaded nodes");
    assert_eq!(reloaded.len(), 3, "{seen}");
    let mut client = cluster.client().await.expect("client");
    for node in nodes.iter().chain(reloaded) {
        let id = node["task_id"].as_str().expect("task id");
        let task = client
            .get(taskwire_protocol::pb::GetRequest {
                task_id: id.to_owned(),
            })
            .await
            .expect("get")
            .into_inner();
        let usage = taskwire_protocol::cost::TaskUsage::of_task(&task).tokens_line();
        if id == parent {
            // Two calls of its own, two of the asker's and one of the explorer's.
            assert_eq!(usage, "own 220, subtree 550 tokens");
        }
        let text = node["text"].as_str().unwrap_or("");
        assert!(text.contains(&usage), "{id} shows `{usage}`: {text}");
    }

    // What the page showed is what happened: the child the page approved ran its
    // command, and the whole tree is recorded completed.
    let children = cluster.children(&parent).await.expect("children");
    assert_eq!(children.len(), 2);
    let asker = children
        .iter()
        .find(|c| c.agent == "asker")
        .expect("the asking child");
    assert_eq!(
        seen["asker"],
        asker.task_id.as_str(),
        "the page named the asking child"
    );
    let asker = cluster.wait_finished(&asker.task_id).await.expect("asker");
    assert_eq!(asker.status(), taskwire_protocol::pb::TaskStatus::Completed);
    let patch = asker
        .result
        .as_ref()
        .map(|r| r.patch.as_str())
        .unwrap_or("");
    assert_eq!(
        created_in_patch(patch, "approved.txt").as_deref(),
        Some("approved"),
        "the approved command ran: {patch}"
    );
    let root = cluster.wait_finished(&parent).await.expect("parent");
    assert_eq!(root.status(), taskwire_protocol::pb::TaskStatus::Completed);
    for shot in ["dashboard-tree.png", "dashboard-list.png"] {
        let size = std::fs::metadata(out.join(shot)).map_or(0, |m| m.len());
        assert!(size > 10_000, "{shot} is a real screenshot ({size} bytes)");
    }
}

/// One HTTP/1.0 request with an optional bearer token: status and body.
async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut response))
        .await
        .expect("answered in time")
        .expect("read");
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n").expect("headers end");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status");
    (status, body.to_owned())
}

/// Reads an SSE response's first `data:` line (the feed stays open: read until one).
async fn first_event(addr: SocketAddr, path: &str, token: &str) -> serde_json::Value {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request =
        format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut lines = BufReader::new(stream).lines();
    tokio::time::timeout(PATIENCE, async {
        while let Some(line) = lines.next_line().await.expect("read") {
            if let Some(data) = line.strip_prefix("data:") {
                return serde_json::from_str(data.trim()).expect("json event");
            }
        }
        panic!("the feed ended without an event")
    })
    .await
    .expect("an event in time")
}

#[tokio::test]
async fn the_dashboard_api_shows_a_tenant_only_its_own_tasks_and_another_tenants_task_is_not_found()
{
    let mut tokens = tempfile::NamedTempFile::new().expect("tokens file");
    writeln!(
        tokens,
        "[[token]]\ntoken = \"acme-secret\"\ntenant = \"acme\"\nscopes = [\"*\"]\n\n\
         [[token]]\ntoken = \"globex-secret\"\ntenant = \"globex\"\nscopes = [\"*\"]\n"
    )
    .expect("write tokens");
    let path = tokens.path().to_owned();
    let addr: SocketAddr = free_addr().expect("free port");
    let cluster = start_with(ScriptedModel::echo().await, 1, 2, move |c| {
        c.auth_tokens_file = Some(path);
        c.http_listen = addr;
    })
    .await
    .expect("cluster");

    let (code, body) = http(addr, "GET", "/v1/info", None, "").await;
    assert_eq!(code, 200);
    assert!(body.contains(r#""auth":true"#), "{body}");
    let (code, page) = http(addr, "GET", "/", None, "").await;
    assert_eq!(code, 200);
    assert!(page.contains("/assets/list.js"), "the list page: {page}");
    let (code, _) = http(addr, "GET", "/v1/tasks", None, "").await;
    assert_eq!(code, 401, "no token, no tasks");
    let (code, _) = http(addr, "GET", "/v1/tasks", Some("wrong"), "").await;
    assert_eq!(code, 401);

    // acme submits over gRPC, as services do.
    let mut client = cluster.client().await.expect("client");
    let mut submit = tonic::Request::new(taskwire_protocol::pb::SubmitRequest {
        agent: "general".into(),
        prompt: "acme's work".into(),
        ..Default::default()
    });
    submit.metadata_mut().insert(
        "authorization",
        "Bearer acme-secret".parse().expect("ascii"),
    );
    let id = client
        .submit(submit)
        .await
        .expect("submit")
        .into_inner()
        .task_id;

    let (code, body) = http(addr, "GET", "/v1/tasks", Some("acme-secret"), "").await;
    assert_eq!(code, 200);
    assert!(body.contains(&id), "acme sees its task: {body}");
    let (code, body) = http(addr, "GET", "/v1/tasks", Some("globex-secret"), "").await;
    assert_eq!(
        (code, body.as_str()),
        (200, r#"{"tasks":[]}"#),
        "globex sees none"
    );

    let missing = uuid::Uuid::now_v7().to_string();
    for (what, suffix, method, body) in [
        ("tree", "tree", "GET", ""),
        ("events", "events", "GET", ""),
        ("transcript", "transcript", "GET", ""),
        ("cancel", "cancel", "POST", ""),
        ("replay", "replay", "POST", ""),
        ("approve", "approvals/r1", "POST", r#"{"answer":"once"}"#),
    ] {
        let (theirs, their_body) = http(
            addr,
            method,
            &format!("/v1/tasks/{id}/{suffix}"),
            Some("globex-secret"),
            body,
        )
        .await;
        let (absent, absent_body) = http(
            addr,
            method,
            &format!("/v1/tasks/{missing}/{suffix}"),
            Some("globex-secret"),
            body,
        )
        .await;
        assert_eq!((theirs, absent), (404, 404), "{what}: {their_body}");
        assert_eq!(
            their_body.replace(&id, "ID"),
            absent_body.replace(&missing, "ID"),
            "{what}: another tenant's task reads like a missing one"
        );
    }
    let (code, body) = http(
        addr,
        "GET",
        "/v1/tasks/not-an-id/tree",
        Some("acme-secret"),
        "",
    )
    .await;
    assert_eq!(code, 400, "a malformed id is a clear error: {body}");
    assert!(body.contains("task_id"), "{body}");
    let (code, body) = http(
        addr,
        "POST",
        &format!("/v1/tasks/{id}/approvals/r1"),
        Some("acme-secret"),
        r#"{"answer":"maybe"}"#,
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("`once`, `always`, `reject`"), "{body}");

    // acme's own tree, read until it finished; its feed replays from the start.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (code, body) = http(
            addr,
            "GET",
            &format!("/v1/tasks/{id}/tree"),
            Some("acme-secret"),
            "",
        )
        .await;
        assert_eq!(code, 200, "{body}");
        let tree: serde_json::Value = serde_json::from_str(&body).expect("json");
        if tree["tasks"][0]["status"] == "completed" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "acme's task did not complete: {tree}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ev = first_event(addr, &format!("/v1/tasks/{id}/events"), "acme-secret").await;
    assert_eq!(ev["task_id"], id.as_str(), "{ev}");
}

#[tokio::test]
async fn the_http_apis_cancel_stops_a_queued_task_and_replay_of_a_cancelled_one_is_a_conflict() {
    let addr: SocketAddr = free_addr().expect("free port");
    // No workers: the task stays queued until the dashboard cancels it.
    let cluster = start_with(ScriptedModel::echo().await, 0, 1, move |c| {
        c.http_listen = addr;
    })
    .await
    .expect("cluster");
    let id = cluster.submit("general", "wait").await.expect("submit");
    let (code, body) = http(addr, "GET", "/v1/info", None, "").await;
    assert_eq!(code, 200);
    assert!(body.contains(r#""auth":false"#), "an open api: {body}");

    let (code, body) = http(addr, "POST", &format!("/v1/tasks/{id}/cancel"), None, "").await;
    assert_eq!((code, body.as_str()), (200, r#"{"status":"cancelled"}"#));
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), taskwire_protocol::pb::TaskStatus::Cancelled);

    let (code, body) = http(addr, "POST", &format!("/v1/tasks/{id}/replay"), None, "").await;
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("only dead_lettered or error tasks"), "{body}");
    assert!(body.contains(r#""code":"FAILED_PRECONDITION""#), "{body}");
    let (code, body) = http(addr, "GET", "/v1/tasks?status=cancelled", None, "").await;
    assert_eq!(code, 200);
    assert!(body.contains(&id), "the status filter finds it: {body}");
    let (code, body) = http(addr, "GET", "/v1/tasks?status=bogus", None, "").await;
    assert_eq!(code, 400, "{body}");
    let (code, body) = http(addr, "GET", "/v1/tasks?q=no-such-text", None, "").await;
    assert_eq!(
        (code, body.as_str()),
        (200, r#"{"tasks":[]}"#),
        "the text filter"
    );
}

#[tokio::test]
async fn a_slash_command_runs_over_the_http_api_and_an_unknown_one_is_not_found() {
    let addr: SocketAddr = free_addr().expect("free port");
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sdk/testdata/config");
    let cluster = start_with(ScriptedModel::echo().await, 1, 1, move |c| {
        c.http_listen = addr;
        c.config_dir = Some(config);
    })
    .await
    .expect("cluster");
    let (code, body) = http(
        addr,
        "POST",
        "/v1/commands/greet",
        None,
        r#"{"arguments": "Ada"}"#,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let submitted: serde_json::Value = serde_json::from_str(&body).expect("json");
    let id = submitted["task_id"].as_str().expect("task id").to_owned();
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.agent, "general");
    let text = task
        .result
        .as_ref()
        .and_then(|r| r.output.as_ref())
        .map(|o| o.text.clone())
        .unwrap_or_default();
    assert!(
        text.contains("greet Ada"),
        "the command's template ran: {text}"
    );

    let (code, body) = http(addr, "POST", "/v1/commands/nope", None, "{}").await;
    assert_eq!(code, 404, "{body}");
    assert!(body.contains(r#""code":"NOT_FOUND""#), "{body}");
    let (code, body) = http(
        addr,
        "POST",
        "/v1/commands/greet",
        None,
        r#"{"args": "Ada"}"#,
    )
    .await;
    assert_eq!(code, 400, "an unknown field is named: {body}");
    assert!(body.contains("args"), "{body}");
}
