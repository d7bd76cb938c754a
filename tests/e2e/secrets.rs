//! Secrets never reach the logs: a coordinator with bearer tokens and a worker with a
//! model API key, as real `taskwire` processes logging at `RUST_LOG=trace`, run a task;
//! no secret (those two, a NATS token, a password in the database URL) appears in any
//! process's output, and `--print-config` redacts them.

use std::io::Write;

use taskwire_e2e::PATIENCE;
use taskwire_e2e::launch::{Launched, Launcher};
use taskwire_e2e::process::free_addr;
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;
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
fn assert_not_leaked(process: &Launched, name: &str, secret: &str, what: &str) {
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

/// Waits until the coordinator at `addr` answers an authenticated call.
async fn wait_serving(coordinator: &mut Launched, addr: std::net::SocketAddr, token: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        coordinator.check_running().expect("coordinator running");
        if let Ok(mut client) = TaskServiceClient::connect(format!("http://{addr}")).await {
            let mut request = tonic::Request::new(pb::ListAgentsRequest::default());
            request.metadata_mut().insert(
                "authorization",
                format!("Bearer {token}").parse().expect("ascii"),
            );
            if client.list_agents(request).await.is_ok() {
                return;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "coordinator did not serve:\n{}",
            coordinator.tail(30)
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn no_secret_reaches_the_trace_logs_of_coordinator_worker_or_client() {
    taskwire_test_support::init_tracing();
    let launcher = Launcher::locate().expect("taskwire binary");
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
    let mut coordinator = launcher
        .spawn(
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
    wait_serving(&mut coordinator, addr, &token).await;

    let workspace_arg = workspace.path().to_string_lossy().into_owned();
    let mut worker = launcher
        .spawn(
            "worker",
            &[
                "worker",
                "--nats-url",
                &nats_url,
                "--model-base-url",
                &model_url,
                "--model",
                "scripted",
                "--workspace",
                &workspace_arg,
                "--worker-id",
                "secret-keeper",
            ],
            &[TRACE, ("TASKWIRE_MODEL_API_KEY", &api_key)],
        )
        .expect("start worker");

    // A client process too: it sends the bearer token on every call.
    let coordinator_url = format!("http://{addr}");
    let submit = launcher
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
    let launcher = Launcher::locate().expect("taskwire binary");
    let api_key = secret("sk-model");
    let nats_token = secret("nats-token");
    let db_password = secret("db-password");
    let nats_password = secret("nats-password");
    let database_url = format!("postgres://tw:{db_password}@db.internal:5432/taskwire");
    let nats_url = format!("nats://app:{nats_password}@nats.internal:4222");

    let coordinator = launcher
        .run(
            "coordinator-flags",
            &[
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
            &[TRACE],
        )
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
        assert_not_leaked(&coordinator, "coordinator --print-config", secret, what);
    }

    let coordinator_env = launcher
        .run(
            "coordinator-env",
            &["coordinator", "--print-config"],
            &[
                TRACE,
                ("TASKWIRE_NATS_TOKEN", &nats_token),
                ("TASKWIRE_DATABASE_URL", &database_url),
            ],
        )
        .await
        .expect("print coordinator config");
    assert!(
        coordinator_env
            .stdout()
            .contains("nats_token = \"<redacted>\""),
        "{}",
        coordinator_env.stdout()
    );
    assert_not_leaked(
        &coordinator_env,
        "coordinator (env)",
        &nats_token,
        "nats token",
    );
    assert_not_leaked(
        &coordinator_env,
        "coordinator (env)",
        &db_password,
        "database password",
    );

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
        let worker = launcher
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
    let help = launcher
        .run(
            "worker-help",
            &["worker", "--help"],
            &[("TASKWIRE_MODEL_API_KEY", &api_key)],
        )
        .await
        .expect("worker help");
    assert!(
        help.stdout().contains("TASKWIRE_MODEL_API_KEY"),
        "{}",
        help.stdout()
    );
    assert_not_leaked(&help, "worker --help", &api_key, "model api key");
    let help = launcher
        .run(
            "coordinator-help",
            &["coordinator", "--help"],
            &[("TASKWIRE_NATS_TOKEN", &nats_token)],
        )
        .await
        .expect("coordinator help");
    assert_not_leaked(&help, "coordinator --help", &nats_token, "nats token");
}

/// async-nats 0.51 logs each connection attempt at debug level with the server's
/// address in `Debug` form, which includes a password embedded in the URL
/// (`async_nats::connector: attempting connection ... password: Some("...")`); it also
/// never sends those credentials (nats-io/nats.rs#1623).
#[tokio::test]
async fn a_password_in_the_nats_url_stays_out_of_debug_logs() {
    let launcher = Launcher::locate().expect("taskwire binary");
    let nats = NatsServer::start().expect("nats");
    let workspace = tempfile::tempdir().expect("workspace");
    let password = secret("nats-password");
    // The test server has no users: the password is carried, never checked.
    let url = nats
        .url()
        .replace("nats://", &format!("nats://worker:{password}@"));
    let workspace_arg = workspace.path().to_string_lossy().into_owned();
    let mut worker = launcher
        .spawn(
            "worker",
            &[
                "worker",
                "--nats-url",
                &url,
                "--model-base-url",
                "http://127.0.0.1:9/v1",
                "--workspace",
                &workspace_arg,
            ],
            &[("RUST_LOG", "debug")],
        )
        .expect("start worker");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !worker.stderr().contains("worker pulling tasks") {
        worker.check_running().expect("worker running");
        assert!(
            tokio::time::Instant::now() < deadline,
            "worker never connected:\n{}",
            worker.tail(30)
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    worker.terminate().await.expect("worker stops");
    assert_not_leaked(&worker, "worker", &password, "nats password");
}
