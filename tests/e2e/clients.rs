//! The clients against a real coordinator and workers: the Python and TypeScript SDKs'
//! own suites (each installed fresh, offline, the way their READMEs say), and the HTTP
//! API's OpenAPI document fuzzed by schemathesis.
//!
//! The fleet runs the scripted model's tree script with the definitions in
//! `sdk/testdata/config` (see its README), a tokens file, and the HTTP listener. What
//! the suites need comes from `scripts/setup.sh` (`sdk/*/ci/prepare.sh`, the fuzzer's
//! venv); outside CI a missing tool skips a test after saying so, under CI it fails.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;

use taskwire_e2e::process::free_addr;
use taskwire_e2e::{Cluster, PATIENCE, start_with};
use taskwire_test_support::ScriptedModel;
use taskwire_test_support::scripts::two_children;

const TOKEN: &str = "sdk-test-token";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// A fleet for the clients: tokens (one tenant, every scope, plus a second tenant the
/// fuzzer's isolation checks use), the tree script, the SDKs' definitions, HTTP.
async fn fleet() -> (Cluster, SocketAddr, tempfile::NamedTempFile) {
    let mut tokens = tempfile::NamedTempFile::new().expect("tokens file");
    writeln!(
        tokens,
        "[[token]]\ntoken = \"{TOKEN}\"\ntenant = \"acme\"\nscopes = [\"*\"]\n\n\
         [[token]]\ntoken = \"other-tenant-token\"\ntenant = \"globex\"\nscopes = [\"*\"]"
    )
    .expect("write tokens");
    let path = tokens.path().to_owned();
    let http = free_addr().expect("free port");
    let config = repo().join("sdk/testdata/config");
    let cluster = start_with(ScriptedModel::start(two_children).await, 2, 4, move |c| {
        c.auth_tokens_file = Some(path);
        c.http_listen = http;
        c.config_dir = Some(config);
    })
    .await
    .expect("cluster");
    (cluster, http, tokens)
}

/// Whether `what` is there; outside CI a missing one skips (after saying so).
fn present(what: &Path, how: &str) -> bool {
    if what.exists() {
        return true;
    }
    let why = format!("{} is missing (install with {how})", what.display());
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("skipping: {why}");
    false
}

/// Runs `script` (bash) against the fleet; fails with its output unless it exits 0.
async fn run_suite(script: &Path, cluster: &Cluster, patience: std::time::Duration) -> String {
    let started = Instant::now();
    let out = tokio::process::Command::new("bash")
        .arg(script)
        .current_dir(repo())
        .env("TASKWIRE_TEST_ADDR", cluster.url())
        .env("TASKWIRE_TEST_TOKEN", TOKEN)
        .env_remove("TASKWIRE_ADDR")
        .env_remove("TASKWIRE_TOKEN")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(patience, out)
        .await
        .unwrap_or_else(|_| panic!("{} did not finish in {patience:?}", script.display()))
        .expect("bash runs");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{} failed ({}):\n{text}",
        script.display(),
        out.status
    );
    eprintln!("{} passed in {:?}", script.display(), started.elapsed());
    text
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_passes_its_suite_installed_fresh_against_a_real_fleet() {
    if !present(
        &home().join(".cache/taskwire/sdk/python-wheels/.complete"),
        "scripts/setup.sh (sdk/python/ci/prepare.sh)",
    ) {
        return;
    }
    let (cluster, _, _tokens) = fleet().await;
    let out = run_suite(
        &repo().join("sdk/python/ci/test.sh"),
        &cluster,
        PATIENCE * 10,
    )
    .await;
    let summary = out
        .lines()
        .find(|l| l.starts_with("sdk-python:"))
        .unwrap_or_else(|| panic!("no summary line:\n{out}"));
    assert!(summary.contains(" 0 failed"), "{summary}");
    assert!(!summary.starts_with("sdk-python: 0 passed"), "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_passes_its_suite_installed_fresh_against_a_real_fleet() {
    if !present(
        &repo().join("sdk/typescript/ci/test.sh"),
        "the TypeScript SDK's sources",
    ) {
        return;
    }
    let (cluster, _, _tokens) = fleet().await;
    run_suite(
        &repo().join("sdk/typescript/ci/test.sh"),
        &cluster,
        PATIENCE * 10,
    )
    .await;
}

/// The fuzzer's report of one run, printed for the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_holds_under_schemathesis_against_a_running_coordinator() {
    let st = home().join(".cache/taskwire/fuzz/venv/bin/schemathesis");
    if !present(&st, "scripts/setup.sh") {
        return;
    }
    let (cluster, http, _tokens) = fleet().await;
    // A task for the fuzzer to find (it follows ids from the list to the task routes).
    complete(&cluster, "seed").await;
    let report = tempfile::tempdir().expect("report dir");
    let started = Instant::now();
    let run = tokio::process::Command::new(&st)
        .args([
            "run",
            &format!("http://{http}/v1/openapi.json"),
            // Every check but one: a schema cannot say that a deadline must be in the
            // future or that an agent must exist, so schema-valid data is refused by
            // rules the document states in words.
            "--checks",
            "all",
            "--exclude-checks",
            "positive_data_acceptance",
            // An endless live feed (no parameters to fuzz).
            "--exclude-operation-id",
            "status_changes",
            "--max-examples",
            "40",
            "--request-timeout",
            "10",
            "--seed",
            "20261128",
            "--no-color",
            "--header",
            &format!("Authorization: Bearer {TOKEN}"),
        ])
        .current_dir(report.path())
        .env("SCHEMATHESIS_HOOKS", "")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(PATIENCE * 10, run)
        .await
        .expect("schemathesis finished in time")
        .expect("schemathesis runs");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("schemathesis took {:?}:\n{text}", started.elapsed());
    assert!(out.status.success(), "schemathesis found failures:\n{text}");
    // The summary's `N generated, N passed, ...` line.
    let generated = text
        .lines()
        .find_map(|l| {
            let mut words = l.split_whitespace();
            let n = words.next()?.parse::<u32>().ok()?;
            (words.next() == Some("generated,")).then_some(n)
        })
        .unwrap_or(0);
    assert!(
        generated >= 200,
        "the fuzzer ran only {generated} cases:\n{text}"
    );
    // Nothing the fuzzer did broke the coordinator: it still serves.
    complete(&cluster, "after the fuzz").await;
}

fn authed<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {TOKEN}").parse().expect("ascii"),
    );
    request
}

/// Submits `prompt` to `general` as the test's tenant and waits for it to complete.
async fn complete(cluster: &Cluster, prompt: &str) {
    use taskwire_protocol::pb;
    let mut client = cluster.client().await.expect("client");
    let id = client
        .submit(authed(pb::SubmitRequest {
            agent: "general".into(),
            prompt: prompt.into(),
            ..Default::default()
        }))
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    let deadline = Instant::now() + PATIENCE;
    loop {
        let task = client
            .get(authed(pb::GetRequest {
                task_id: id.clone(),
            }))
            .await
            .expect("get")
            .into_inner();
        if task.result.is_some() {
            assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{prompt} did not finish: {task:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
