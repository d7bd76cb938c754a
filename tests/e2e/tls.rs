//! TLS on both of the coordinator's links, with a CA made at test time:
//! - gRPC: clients that trust the CA submit and see the task complete; plaintext clients
//!   and clients that do not trust the CA get nowhere.
//! - NATS: against a nats-server that accepts TLS clients only, the coordinator (trusting
//!   the CA through its `nats.tls_ca` setting) and a worker dispatch and run a task.

use std::time::Duration;

use taskwire_e2e::PATIENCE;
use taskwire_e2e::process::{Taskwire, WorkerOptions};
use taskwire_e2e::tls::start_tls;
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;
use taskwire_test_support::tls::{TestPki, TlsNatsServer};
use taskwire_test_support::{ScriptedModel, TestDatabase};
use tokio_util::sync::CancellationToken;
use tonic::transport::{ClientTlsConfig, Endpoint};

fn request(prompt: &str) -> pb::SubmitRequest {
    pb::SubmitRequest {
        agent: "general".into(),
        prompt: prompt.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn clients_trusting_the_ca_use_the_grpc_api_over_tls_and_plaintext_clients_are_refused() {
    let pki = TestPki::generate().expect("test pki");
    let cluster = start_tls(ScriptedModel::echo().await, 1, 2, &pki)
        .await
        .expect("tls cluster");

    let mut client = cluster.client().await.expect("tls client");
    let id = client
        .submit(request("over tls"))
        .await
        .expect("submit over tls")
        .into_inner()
        .task_id;
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed);
    let text = task.result.and_then(|r| r.output).map(|o| o.text);
    assert_eq!(text.as_deref(), Some("echo: over tls"));

    // The same address in plaintext: the TLS listener never speaks HTTP/2 to it.
    let plaintext = format!("http://{}", cluster.addr);
    let refused = match TaskServiceClient::connect(plaintext).await {
        Err(_) => true,
        Ok(mut c) => c.submit(request("in the clear")).await.is_err(),
    };
    assert!(refused, "a plaintext client reached the tls coordinator");

    // TLS without the CA: tonic has no system roots here, so nothing vouches for the
    // server and the handshake fails.
    let untrusting = Endpoint::from_shared(cluster.url())
        .expect("valid url")
        .tls_config(ClientTlsConfig::new())
        .expect("tls config");
    let refused = match untrusting.connect().await {
        Err(_) => true,
        Ok(channel) => TaskServiceClient::new(channel)
            .submit(request("unverified"))
            .await
            .is_err(),
    };
    assert!(
        refused,
        "a client that does not trust the ca reached the coordinator"
    );
    cluster.shutdown().await;
}

/// The worker has no NATS TLS settings (`WorkerConfig` carries no `NatsOptions`), so
/// it runs as a `taskwire worker` process that trusts the CA through `SSL_CERT_FILE`,
/// which async-nats reads when no CA is configured (rustls-native-certs).
#[tokio::test]
async fn coordinator_and_worker_run_a_task_over_a_tls_only_nats_server() {
    taskwire_test_support::init_tracing();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let pki = TestPki::generate().expect("test pki");
    let nats = TlsNatsServer::start(&pki).expect("tls nats-server");
    let db = TestDatabase::create().await.expect("database");
    let model = ScriptedModel::echo().await;
    let workspace = tempfile::tempdir().expect("workspace");

    // The server accepts TLS clients only: without the CA a client is refused.
    let untrusting = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(5))
        .connect(nats.url())
        .await;
    assert!(
        untrusting.is_err(),
        "a client that does not trust the ca connected"
    );

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listener");
    let addr = listener.local_addr().expect("address");
    let config = taskwire_coordinator::CoordinatorConfig {
        database_url: db.url().to_owned(),
        nats_url: nats.url(),
        listen: addr,
        http_listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        ack_wait: Duration::from_secs(10),
        nats: taskwire_bus::NatsOptions {
            tls_ca: Some(pki.ca_cert()),
            ..Default::default()
        },
        ..Default::default()
    };
    let stop = CancellationToken::new();
    let coordinator = tokio::spawn(taskwire_coordinator::serve(config, listener, stop.clone()));

    let (nats_url, model_url) = (nats.url(), model.base_url());
    let options = WorkerOptions::new(&nats_url, &model_url, workspace.path());
    let ca = pki.ca_cert().to_string_lossy().into_owned();
    let mut worker = taskwire
        .worker_with_env(
            "tls-worker",
            &options,
            &[("SSL_CERT_FILE", &ca), ("RUST_LOG", "info")],
        )
        .expect("start worker");

    // The coordinator is ready once it answers: it connected to NATS and made the streams.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut client = loop {
        if let Ok(mut c) = TaskServiceClient::connect(format!("http://{addr}")).await
            && c.list_agents(pb::ListAgentsRequest::default())
                .await
                .is_ok()
        {
            break c;
        }
        assert!(!coordinator.is_finished(), "the coordinator stopped");
        assert!(
            tokio::time::Instant::now() < deadline,
            "the coordinator did not serve over tls nats"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    let id = client
        .submit(request("through tls nats"))
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let task = loop {
        worker.check_running().expect("worker running");
        let task = client
            .get(pb::GetRequest {
                task_id: id.clone(),
            })
            .await
            .expect("get")
            .into_inner();
        if task.result.is_some() {
            break task;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task never finished; last seen {:?}; worker log:\n{}",
            task.status(),
            worker.tail(30)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(task.status(), pb::TaskStatus::Completed);
    let result = task.result.expect("finished");
    assert_eq!(result.worker_id, "tls-worker");
    let text = result.output.map(|o| o.text);
    assert_eq!(text.as_deref(), Some("echo: through tls nats"));

    worker.terminate().await.expect("worker stops");
    stop.cancel();
    coordinator
        .await
        .expect("coordinator task")
        .expect("coordinator ran cleanly");
}
