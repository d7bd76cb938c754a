//! A whole taskwire deployment inside one test: a nats-server of its own, a fresh
//! Postgres database, the scripted model over HTTP, a coordinator and workers started
//! through their library `run()` functions.

pub mod launch;
pub mod process;
pub mod tls;

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use futures::StreamExt;
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;
use taskwire_test_support::{NatsServer, ScriptedModel, TestDatabase};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

/// How long any single wait in a test may take before it fails.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A running deployment; everything stops when it drops.
pub struct Cluster {
    /// The API needs a token: readiness is then checked with the health service.
    authenticated: bool,
    pub nats: NatsServer,
    pub db: TestDatabase,
    pub model: ScriptedModel,
    pub workspace: tempfile::TempDir,
    pub addr: SocketAddr,
    coordinator: (CancellationToken, Option<JoinHandle<()>>),
    workers: Vec<(CancellationToken, JoinHandle<()>)>,
}

/// Starts a deployment with `workers` workers of `concurrency` sessions each.
pub async fn start(
    model: ScriptedModel,
    workers: usize,
    concurrency: usize,
) -> anyhow::Result<Cluster> {
    start_with(model, workers, concurrency, |_| {}).await
}

/// [`start`], with the coordinator's configuration adjusted by `configure`.
pub async fn start_with(
    model: ScriptedModel,
    workers: usize,
    concurrency: usize,
    configure: impl FnOnce(&mut taskwire_coordinator::CoordinatorConfig),
) -> anyhow::Result<Cluster> {
    taskwire_test_support::init_tracing();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let nats = NatsServer::start()?;
    let db = TestDatabase::create().await?;
    let workspace = tempfile::tempdir().context("workspace dir")?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let mut config = taskwire_coordinator::CoordinatorConfig {
        database_url: db.url().to_owned(),
        nats_url: nats.url(),
        listen: addr,
        ack_wait: Duration::from_secs(10),
        ..Default::default()
    };
    configure(&mut config);
    let authenticated = config.auth_tokens_file.is_some();
    let token = CancellationToken::new();
    let handle = tokio::spawn({
        let token = token.clone();
        async move {
            if let Err(e) = taskwire_coordinator::serve(config, listener, token).await {
                tracing::error!(error = %e, "coordinator failed");
            }
        }
    });
    let mut cluster = Cluster {
        authenticated,
        nats,
        db,
        model,
        workspace,
        addr,
        coordinator: (token, Some(handle)),
        workers: Vec::new(),
    };
    cluster.wait_ready().await?;
    for i in 0..workers {
        cluster.add_worker(&format!("worker-{i}"), concurrency);
    }
    Ok(cluster)
}

impl Cluster {
    /// The worker configuration tests start from.
    pub fn worker_config(&self, name: &str, concurrency: usize) -> taskwire_worker::WorkerConfig {
        let mut config = taskwire_worker::WorkerConfig {
            nats_url: self.nats.url(),
            concurrency,
            workspace: self.workspace.path().to_owned(),
            worker_id: Some(name.to_owned()),
            ack_wait: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(5),
            ..Default::default()
        };
        config.model.base_url = self.model.base_url();
        config.model.default_model = "scripted".to_owned();
        // Task-level retries are under test; the client's own retries would only slow them.
        config.model.max_retries = 0;
        config.retry_base_delay = Duration::from_millis(50);
        config
    }

    /// Starts one more worker.
    pub fn add_worker(&mut self, name: &str, concurrency: usize) {
        self.add_worker_with(name, concurrency, |_| {});
    }

    /// Starts one more worker, its configuration adjusted by `configure`.
    pub fn add_worker_with(
        &mut self,
        name: &str,
        concurrency: usize,
        configure: impl FnOnce(&mut taskwire_worker::WorkerConfig),
    ) {
        let mut config = self.worker_config(name, concurrency);
        configure(&mut config);
        let token = CancellationToken::new();
        let handle = tokio::spawn({
            let token = token.clone();
            async move {
                if let Err(e) = taskwire_worker::run(config, token).await {
                    tracing::error!(error = %e, "worker failed");
                }
            }
        });
        self.workers.push((token, handle));
    }

    pub async fn client(&self) -> anyhow::Result<TaskServiceClient<Channel>> {
        Ok(TaskServiceClient::connect(format!("http://{}", self.addr)).await?)
    }

    async fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Ok(mut c) = self.client().await {
                match c.list_agents(pb::ListAgentsRequest::default()).await {
                    Ok(_) => return Ok(()),
                    Err(e) if self.authenticated && e.code() == tonic::Code::Unauthenticated => {
                        return Ok(());
                    }
                    Err(_) => {}
                }
            }
            if tokio::time::Instant::now() > deadline {
                bail!("coordinator did not become ready");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Submits `prompt` to `agent`; returns the task id.
    pub async fn submit(&self, agent: &str, prompt: &str) -> anyhow::Result<String> {
        let r = self
            .client()
            .await?
            .submit(pb::SubmitRequest {
                agent: agent.into(),
                prompt: prompt.into(),
                ..Default::default()
            })
            .await?;
        Ok(r.into_inner().task_id)
    }

    /// Polls `Get` until the task is finished.
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

    /// Reads a whole `Watch` stream (progress events, then the result).
    pub async fn watch(&self, task_id: &str) -> anyhow::Result<Vec<pb::WatchEvent>> {
        let mut stream = self
            .client()
            .await?
            .watch(pb::WatchRequest {
                task_id: task_id.into(),
            })
            .await?
            .into_inner();
        let mut events = Vec::new();
        let read = async {
            while let Some(ev) = stream.next().await {
                events.push(ev?);
            }
            anyhow::Ok(())
        };
        tokio::time::timeout(PATIENCE, read)
            .await
            .context("watch did not end")??;
        Ok(events)
    }

    /// Stops the workers and the coordinator gracefully.
    pub async fn shutdown(mut self) {
        for (token, handle) in self.workers.drain(..) {
            token.cancel();
            let _ = handle.await;
        }
        self.coordinator.0.cancel();
        if let Some(h) = self.coordinator.1.take() {
            let _ = h.await;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (token, _) in &self.workers {
            token.cancel();
        }
        self.coordinator.0.cancel();
    }
}

/// Tool calls of a watch stream, as `(tool, state)` pairs in order.
pub fn tool_events(events: &[pb::WatchEvent]) -> Vec<(String, pb::ToolCallState)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Some(pb::watch_event::Event::Progress(p)) => match &p.event {
                Some(pb::task_progress::Event::ToolCall(t)) => Some((t.tool.clone(), t.state())),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The result at the end of a watch stream.
pub fn final_result(events: &[pb::WatchEvent]) -> Option<&pb::TaskResult> {
    match events.last()?.event.as_ref()? {
        pb::watch_event::Event::Result(r) => Some(r),
        _ => None,
    }
}

/// Polls `Get` until `check` accepts the task (or fails after [`PATIENCE`]).
pub async fn wait_for(
    cluster: &Cluster,
    task_id: &str,
    what: &str,
    check: impl Fn(&pb::Task) -> bool,
) -> anyhow::Result<pb::Task> {
    let mut client = cluster.client().await?;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let task = client
            .get(pb::GetRequest {
                task_id: task_id.into(),
            })
            .await?
            .into_inner();
        if check(&task) {
            return Ok(task);
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "task {task_id} never became {what}; last seen {:?}",
                task.status()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Progress events of a watch stream.
pub fn progress_events(events: &[pb::WatchEvent]) -> Vec<&pb::TaskProgress> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Some(pb::watch_event::Event::Progress(p)) => Some(p),
            _ => None,
        })
        .collect()
}
