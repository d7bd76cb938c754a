//! Secrets never reach the logs: a coordinator with bearer tokens and a worker with a
//! model API key, as real `taskwire` processes logging at `RUST_LOG=trace`, run a task;
//! no secret (those two, a NATS token, a password in the database URL) appears in any
//! process's output, and `--print-config` redacts them.

use std::io::Write;
use std::time::Duration;

use taskwire_e2e::PATIENCE;
use taskwire_e2e::process::{Process, Taskwire, WorkerOptions, free_addr, wait_serving};
use taskwire_test_support::{NatsServer, ScriptedModel, TestDatabase};

const TRACE: (&str, &str) = ("RUST_LOG", "trace");

/// A secret unique to this run, so that a match can only be a leak.
fn secret(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// `url` with a password, and the password: the one it has, or `fresh` added for its user
/// (`scheme://user@host` → `scheme://user:fresh@host`). A test server that trusts local
/// connections carries an added password without checking it.
fn with_password(url: &str, fresh: &str) -> (String, String) {
    let (scheme, rest) = url.split_once("://").expect("a url");
    let (user, host) = rest.split_once('@').expect("a user in the url");
    match user.split_once(':') {
        Some((_, password)) => (url.to_owned(), password.to_owned()),
        None => (
            format!("{scheme}://{user}:{fresh}@{host}"),
            fresh.to_owned(),
        ),
    }
}

/// Fails if `secret` appears in either of `process`'s streams.
fn assert_not_leaked(process: &Process, name: &str, secret: &str, what: &str) {
    for (stream, text) in [("stdout", process.stdout()), ("stderr", process.stderr())] {
        if let Some(at) = text.find(secret) {
            let line = text[..at].lines().count().max(1);
            let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
            let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
            panic!(
                "the {what} leaked into {name}'s {stream}, line {line}:\n{}",
                &text[start..end]
            );
        }
    }
}

#[tokio::test]
async fn no_secret_reaches_the_trace_logs_of_coordinator_worker_or_client() {
    taskwire_test_support::init_tracing();
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let nats = NatsServer::start().expect("nats");
    let db = TestDatabase::create().await.expect("database");
    let model = ScriptedModel::echo().await;
    let workspace = tempfile::tempdir().expect("workspace");
    let api_key = secret("sk-model");
    let token = secret("tw-bearer");
    let nats_token = secret("nats-token");
    let mut tokens = tempfile::NamedTempFile::new().expect("tokens file");
    writeln!(
        tokens,
        "[[token]]\ntoken = \"{token}\"\ntenant = \"acme\"\nscopes = [\"*\"]"
    )
    .expect("write tokens");

    let addr = free_addr().expect("port");
    let (database_url, db_password) = with_password(db.url(), &secret("db-password"));
    let nats_url = nats.url();
    let (model_url, listen) = (model.base_url(), addr.to_string());
    let tokens_path = tokens.path().to_string_lossy().into_owned();
    let mut coordinator = taskwire
        .spawn_with_env(
            "coordinator",
            &[
                "coordinator",
                "--nats-url",
                &nats_url,
                "--listen",
                &listen,
                "--auth-tokens-file",
                &tokens_path,
            ],
            &[
                TRACE,
                ("TASKWIRE_DATABASE_URL", &database_url),
                ("TASKWIRE_NATS_TOKEN", &nats_token),
            ],
        )
        .expect("start coordinator");
    wait_serving(&mut coordinator, addr, Some(&token))
        .await
        .expect("coordinator serving");

    let options = WorkerOptions::new(&nats_url, &model_url, workspace.path());
    let mut worker = taskwire
        .worker_with_env(
            "secret-keeper",
            &options,
            &[TRACE, ("TASKWIRE_MODEL_API_KEY", &api_key)],
        )
        .expect("start worker");

    // A client process too: it sends the bearer token on every call.
    let coordinator_url = format!("http://{addr}");
    let submit = taskwire
        .run(
            "submit",
            &[
                "submit",
                "--addr",
                &coordinator_url,
                "--agent",
                "general",
                "--wait",
                "keep it secret",
            ],
            &[TRACE, ("TASKWIRE_TOKEN", &token)],
        )
        .await
        .expect("submit ran");
    worker.check_running().expect("worker running");
    assert!(
        submit.stdout().contains("echo: keep it secret"),
        "the task did not complete:\n{}\n{}",
        submit.stdout(),
        submit.tail(30)
    );

    let requests = model.requests();
    assert!(!requests.is_empty(), "the model was never called");
    for request in &requests {
        let expected = format!("Bearer {api_key}");
        assert_eq!(request.header("authorization"), Some(expected.as_str()));
    }

    // SIGTERM, so that shutdown logging is checked too.
    let status = worker.terminate().await.expect("worker stops");
    assert!(status.success(), "worker exited with {status}");
    let status = coordinator.terminate().await.expect("coordinator stops");
    assert!(status.success(), "coordinator exited with {status}");

    for (name, process) in [
        ("coordinator", &coordinator),
        ("worker", &worker),
        ("submit", &submit),
    ] {
        // The logs really are at trace level: a check of quiet logs would prove nothing.
        assert!(
            process.stderr().contains("TRACE"),
            "{name} logged nothing at trace level:\n{}",
            process.tail(10)
        );
        for (secret, what) in [
            (&api_key, "model api key"),
            (&token, "bearer token"),
            (&nats_token, "nats token"),
            (&db_password, "database password"),
        ] {
            assert_not_leaked(process, name, secret, what);
        }
    }
}

#[tokio::test]
async fn print_config_redacts_secrets_from_flags_and_env() {
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let api_key = secret("sk-model");
    let nats_token = secret("nats-token");
    let db_password = secret("db-password");
    let nats_password = secret("nats-password");
    let database_url = format!("postgres://tw:{db_password}@db.internal:5432/taskwire");
    let nats_url = format!("nats://app:{nats_password}@nats.internal:4222");

    for (name, args, env) in [
        (
            "coordinator-flags",
            vec![
                "coordinator",
                "--database-url",
                &database_url,
                "--nats-url",
                &nats_url,
                "--nats-token",
                &nats_token,
                "--auth-tokens-file",
                "/etc/taskwire/tokens.toml",
                "--print-config",
            ],
            vec![TRACE],
        ),
        (
            "coordinator-env",
            vec!["coordinator", "--print-config"],
            vec![
                TRACE,
                ("TASKWIRE_NATS_TOKEN", &nats_token),
                ("TASKWIRE_DATABASE_URL", &database_url),
            ],
        ),
    ] {
        let coordinator = taskwire
            .run(name, &args, &env)
            .await
            .expect("print coordinator config");
        let printed = coordinator.stdout();
        assert!(printed.contains("[coordinator]"), "{printed}");
        assert!(printed.contains("nats_token = \"<redacted>\""), "{printed}");
        assert!(
            printed.contains("postgres://tw:<redacted>@db.internal:5432/taskwire"),
            "{printed}"
        );
        for (secret, what) in [
            (&nats_token, "nats token"),
            (&db_password, "database password"),
            (&nats_password, "nats password"),
        ] {
            assert_not_leaked(&coordinator, name, secret, what);
        }
    }

    for (name, args, env) in [
        (
            "worker-flags",
            vec![
                "worker",
                "--model-api-key",
                api_key.as_str(),
                "--print-config",
            ],
            vec![TRACE],
        ),
        (
            "worker-env",
            vec!["worker", "--print-config"],
            vec![TRACE, ("TASKWIRE_MODEL_API_KEY", api_key.as_str())],
        ),
    ] {
        let worker = taskwire
            .run(name, &args, &env)
            .await
            .expect("print worker config");
        let printed = worker.stdout();
        assert!(
            printed.contains("model_api_key = \"<redacted>\""),
            "{printed}"
        );
        assert_not_leaked(&worker, name, &api_key, "model api key");
    }

    // `--help` shows which variables are read, never their values.
    for (command, variable, secret, what) in [
        (
            "worker",
            "TASKWIRE_MODEL_API_KEY",
            &api_key,
            "model api key",
        ),
        (
            "coordinator",
            "TASKWIRE_NATS_TOKEN",
            &nats_token,
            "nats token",
        ),
    ] {
        let name = format!("{command}-help");
        let help = taskwire
            .run(&name, &[command, "--help"], &[(variable, secret)])
            .await
            .expect("help");
        assert!(help.stdout().contains(variable), "{}", help.stdout());
        assert_not_leaked(&help, &name, secret, what);
    }
}

/// async-nats 0.51 logs each connection attempt at debug level with the server's
/// address in `Debug` form, which includes a password embedded in the URL
/// (`async_nats::connector: attempting connection ... password: Some("...")`); it also
/// never sends those credentials (nats-io/nats.rs#1623).
#[tokio::test]
async fn a_password_in_the_nats_url_stays_out_of_debug_logs() {
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let nats = NatsServer::start().expect("nats");
    let workspace = tempfile::tempdir().expect("workspace");
    let password = secret("nats-password");
    // The test server has no users: the password is carried, never checked.
    let url = nats
        .url()
        .replace("nats://", &format!("nats://worker:{password}@"));
    // The streams are the coordinator's to create; the worker waits for them.
    let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.expect("nats"));
    taskwire_bus::ensure_streams(&js, &taskwire_bus::BusConfig::default())
        .await
        .expect("streams");
    let options = WorkerOptions::new(&url, "http://127.0.0.1:9/v1", workspace.path());
    let mut worker = taskwire
        .worker_with_env("worker", &options, &[("RUST_LOG", "debug")])
        .expect("start worker");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !worker.stderr().contains("worker pulling tasks") {
        worker.check_running().expect("worker running");
        assert!(
            tokio::time::Instant::now() < deadline,
            "worker never connected:\n{}",
            worker.tail(30)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worker.terminate().await.expect("worker stops");
    assert_not_leaked(&worker, "worker", &password, "nats password");
}
