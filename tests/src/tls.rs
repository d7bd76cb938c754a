//! A deployment whose coordinator serves gRPC over TLS, and clients that trust its CA.
//!
//! [`crate::start_with`] checks readiness with a plaintext client, which a TLS listener
//! never answers; [`start_tls`] is the same start-up with the coordinator's
//! `tls_cert`/`tls_key` set and readiness checked over TLS.

use std::time::Duration;

use anyhow::{Context, bail};
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;
use taskwire_test_support::tls::TestPki;
use taskwire_test_support::{NatsServer, ScriptedModel, TestDatabase};
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::{Cluster, PATIENCE};

/// A running deployment with a TLS coordinator; everything stops when it drops.
pub struct TlsCluster {
    /// NATS, the database, the model and the workers; its plaintext `client()` and the
    /// helpers built on it do not work here: use [`TlsCluster::client`].
    pub cluster: Cluster,
    ca: Certificate,
}

/// Starts a deployment whose coordinator serves `pki`'s server certificate, with
/// `workers` workers of `concurrency` sessions each.
pub async fn start_tls(
    model: ScriptedModel,
    workers: usize,
    concurrency: usize,
    pki: &TestPki,
) -> anyhow::Result<TlsCluster> {
    taskwire_test_support::init_tracing();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let nats = NatsServer::start()?;
    let db = TestDatabase::create().await?;
    let workspace = tempfile::tempdir().context("workspace dir")?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let config = taskwire_coordinator::CoordinatorConfig {
        database_url: db.url().to_owned(),
        nats_url: nats.url(),
        listen: addr,
        ack_wait: Duration::from_secs(10),
        tls_cert: Some(pki.server_cert()),
        tls_key: Some(pki.server_key()),
        ..Default::default()
    };
    let token = CancellationToken::new();
    let handle = tokio::spawn({
        let token = token.clone();
        async move {
            if let Err(e) = taskwire_coordinator::serve(config, listener, token).await {
                tracing::error!(error = %e, "coordinator failed");
            }
        }
    });
    let mut cluster = TlsCluster {
        cluster: Cluster {
            authenticated: false,
            nats,
            db,
            model,
            workspace,
            addr,
            coordinator: (token, Some(handle)),
            workers: Vec::new(),
        },
        ca: Certificate::from_pem(pki.ca_pem()),
    };
    cluster.wait_ready().await?;
    for i in 0..workers {
        cluster
            .cluster
            .add_worker(&format!("worker-{i}"), concurrency);
    }
    Ok(cluster)
}

impl TlsCluster {
    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.cluster.addr)
    }

    /// A client that trusts the test CA.
    pub async fn client(&self) -> anyhow::Result<TaskServiceClient<Channel>> {
        let channel = Endpoint::from_shared(self.url())?
            .tls_config(ClientTlsConfig::new().ca_certificate(self.ca.clone()))?
            .connect()
            .await?;
        Ok(TaskServiceClient::new(channel))
    }

    async fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Ok(mut c) = self.client().await
                && c.list_agents(pb::ListAgentsRequest::default())
                    .await
                    .is_ok()
            {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!("tls coordinator did not become ready");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls `Get` over TLS until the task is finished.
    pub async fn wait_finished(&self, task_id: &str) -> anyhow::Result<pb::Task> {
        let mut client = self.client().await?;
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let task = client
                .get(pb::GetRequest {
                    task_id: task_id.into(),
                })
                .await?
                .into_inner();
            if task.result.is_some() {
                return Ok(task);
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "task {task_id} did not finish; last seen {:?}",
                    task.status()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the workers and the coordinator gracefully.
    pub async fn shutdown(self) {
        self.cluster.shutdown().await;
    }
}
