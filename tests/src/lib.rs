//! A whole taskwire deployment inside one test: a nats-server of its own, a fresh
//! Postgres database, the scripted model over HTTP, a coordinator and workers started
//! through their library `run()` functions.
//!
//! - [`process`]: `taskwire` as child processes, for tests that kill them or read their
//!   output.
//! - [`tls`]: a deployment whose coordinator serves gRPC over TLS.
//! - [`partition`]: a relay that cuts one process off from a server.

pub mod partition;
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
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

/// How long any single wait in a test may take before it fails.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A running deployment; everything stops when it drops.
pub struct Cluster {
    // Fields drop in order: the workers and the coordinator are told to stop before
    // NATS and the database go away.
    workers: Vec<InProcess>,
    coordinator: InProcess,
    /// The API needs a token: readiness is then checked with the health service.
    authenticated: bool,
    /// Set when the coordinator serves gRPC over TLS: what clients trust.
    client_tls: Option<ClientTlsConfig>,
    pub nats: NatsServer,
    pub db: TestDatabase,
    pub model: ScriptedModel,
    /// The workers' base (`--workspace`).
    pub workspace: tempfile::TempDir,
    /// The workers' `--workspaces-dir`: each task's own workspace is made under it.
    pub workspaces: tempfile::TempDir,
    pub addr: SocketAddr,
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
    start_cluster(
        NatsServer::start()?,
        model,
        workers,
        concurrency,
        None,
        configure,
    )
    .await
}

/// [`start_with`] on a nats-server of the test's own making (one with a configuration
/// file, say). The coordinator's `nats_url` is `nats.url()` unless `configure` changes
/// it; workers added with [`Cluster::add_worker_with`] can be given their own.
pub async fn start_on(
    nats: NatsServer,
    model: ScriptedModel,
    configure: impl FnOnce(&mut taskwire_coordinator::CoordinatorConfig),
) -> anyhow::Result<Cluster> {
    start_cluster(nats, model, 0, 1, None, configure).await
}

/// [`start_with`]; clients connect with `client_tls` when it is set, so `configure`
/// should then give the coordinator a certificate they trust.
async fn start_cluster(
    nats: NatsServer,
    model: ScriptedModel,
    workers: usize,
    concurrency: usize,
    client_tls: Option<ClientTlsConfig>,
    configure: impl FnOnce(&mut taskwire_coordinator::CoordinatorConfig),
) -> anyhow::Result<Cluster> {
    taskwire_test_support::init_tracing();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let db = TestDatabase::create().await?;
    let workspace = tempfile::tempdir().context("workspace dir")?;
    let workspaces = tempfile::tempdir().context("workspaces dir")?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let mut config = taskwire_coordinator::CoordinatorConfig {
        database_url: db.url().to_owned(),
        nats_url: nats.url(),
        listen: addr,
        http_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        ack_wait: Duration::from_secs(10),
        ..Default::default()
    };
    configure(&mut config);
    let mut cluster = Cluster {
        workers: Vec::new(),
        authenticated: config.auth_tokens_file.is_some(),
        coordinator: InProcess::coordinator(config, listener),
        client_tls,
        nats,
        db,
        model,
        workspace,
        workspaces,
        addr,
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
            workspaces_dir: self.workspaces.path().to_owned(),
            worker_id: Some(name.to_owned()),
            ack_wait: Duration::from_secs(10),
            drain_grace: Duration::from_secs(5),
            ..Default::default()
        };
        config.model.base_url = self.model.base_url();
        config.model.default_model = "scripted".to_owned();
        // Task-level retries are under test; the client's own retries would only slow them.
        config.model.max_retries = 0;
        // A title request would arrive among the scripted conversation's requests (and
        // take a place in a queue script); the title tests turn titles on.
        config.titles = false;
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
        self.workers.push(InProcess::worker(config));
    }

    /// The coordinator's URL: `https://127.0.0.1:PORT` when it serves TLS, else `http://`.
    pub fn url(&self) -> String {
        let scheme = if self.client_tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// A client of the coordinator (over TLS, trusting the test CA, when it serves TLS).
    pub async fn client(&self) -> anyhow::Result<TaskServiceClient<Channel>> {
        let mut endpoint = Endpoint::from_shared(self.url())?;
        if let Some(tls) = &self.client_tls {
            endpoint = endpoint.tls_config(tls.clone())?;
        }
        Ok(TaskServiceClient::new(endpoint.connect().await?))
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
                bail!("coordinator at {} did not become ready", self.url());
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
        wait_for(self, task_id, "finished", |task| task.result.is_some()).await
    }

    /// The children of `parent` (`List` by parent), newest first.
    pub async fn children(&self, parent: &str) -> anyhow::Result<Vec<pb::Task>> {
        Ok(self
            .client()
            .await?
            .list(pb::ListRequest {
                parent_task_id: parent.into(),
                ..Default::default()
            })
            .await?
            .into_inner()
            .tasks)
    }

    /// The one child of `parent`, once it is finished; an error when `parent` has
    /// another number of children.
    pub async fn only_child_finished(&self, parent: &str) -> anyhow::Result<pb::Task> {
        let children = self.children(parent).await?;
        let [child] = children.as_slice() else {
            bail!("{parent} has {} children, not one", children.len());
        };
        self.wait_finished(&child.task_id).await
    }

    /// Submits `prompt` to `agent` continuing session `session_id` (`resume_token`);
    /// returns the task id.
    pub async fn resume(
        &self,
        agent: &str,
        prompt: &str,
        session_id: &str,
    ) -> anyhow::Result<String> {
        let r = self
            .client()
            .await?
            .submit(pb::SubmitRequest {
                agent: agent.into(),
                prompt: prompt.into(),
                resume_token: session_id.into(),
                ..Default::default()
            })
            .await?;
        Ok(r.into_inner().task_id)
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

    /// The workspace of a running (or kept) attempt of `task_id`, on any worker, the
    /// newest attempt first: `<workspaces>/tasks/<worker>/<task>-<attempt>`.
    pub fn task_workspace(&self, task_id: &str) -> Option<std::path::PathBuf> {
        task_workspaces(self.workspaces.path(), task_id).pop()
    }

    /// Waits until a file `name` in a workspace of `task_id` holds at least one whole
    /// line (a file is created before it is written: one that merely exists may still
    /// be empty); its path.
    pub async fn wait_for_task_file(
        &self,
        task_id: &str,
        name: &str,
    ) -> anyhow::Result<std::path::PathBuf> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(file) = task_workspaces(self.workspaces.path(), task_id)
                .into_iter()
                .map(|ws| ws.join(name))
                .find(|file| std::fs::read_to_string(file).is_ok_and(|s| s.contains('\n')))
            {
                return Ok(file);
            }
            if tokio::time::Instant::now() > deadline {
                bail!("no workspace of task {task_id} ever had {name}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The first `approval_required` event in `task_id`'s progress (replayed by
    /// `Watch`).
    pub async fn approval_asked(&self, task_id: &str) -> anyhow::Result<pb::ApprovalRequired> {
        let mut stream = self
            .client()
            .await?
            .watch(pb::WatchRequest {
                task_id: task_id.into(),
            })
            .await?
            .into_inner();
        let asked = async {
            while let Some(ev) = stream.next().await {
                if let Some(pb::watch_event::Event::Progress(p)) = ev?.event
                    && let Some(pb::task_progress::Event::ApprovalRequired(a)) = p.event
                {
                    return Ok(a);
                }
            }
            bail!("task {task_id} ended without asking for approval")
        };
        tokio::time::timeout(PATIENCE, asked)
            .await
            .context("no approval asked in time")?
    }

    /// Stops the workers and the coordinator gracefully.
    pub async fn shutdown(self) {
        for worker in self.workers {
            worker.stop().await;
        }
        self.coordinator.stop().await;
    }
}

/// A coordinator or worker running in this process through its library `run`; told to
/// stop when dropped.
pub struct InProcess {
    token: CancellationToken,
    handle: Option<JoinHandle<()>>,
}

impl InProcess {
    /// `taskwire_coordinator::serve` on `listener`.
    pub fn coordinator(
        config: taskwire_coordinator::CoordinatorConfig,
        listener: tokio::net::TcpListener,
    ) -> Self {
        Self::spawn(|token| async move {
            if let Err(e) = taskwire_coordinator::serve(config, listener, token).await {
                tracing::error!(error = %e, "coordinator failed");
            }
        })
    }

    /// `taskwire_worker::run`.
    pub fn worker(config: taskwire_worker::WorkerConfig) -> Self {
        Self::spawn(|token| async move {
            if let Err(e) = taskwire_worker::run(config, token).await {
                tracing::error!(error = %e, "worker failed");
            }
        })
    }

    fn spawn<F>(run: impl FnOnce(CancellationToken) -> F) -> Self
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let token = CancellationToken::new();
        let handle = tokio::spawn(run(token.clone()));
        Self {
            token,
            handle: Some(handle),
        }
    }

    /// Stops it gracefully and waits until it has.
    pub async fn stop(mut self) {
        self.token.cancel();
        if let Some(handle) = self.handle.take() {
            let _ = handle.await;
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

/// Every entry of every worker's task directory under a `--workspaces-dir`.
fn worker_entries(dir: &std::path::Path) -> impl Iterator<Item = std::fs::DirEntry> {
    std::fs::read_dir(dir.join("tasks"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|worker| worker.path().is_dir())
        .flat_map(|worker| {
            std::fs::read_dir(worker.path())
                .into_iter()
                .flatten()
                .flatten()
        })
}

/// The names under a `--workspaces-dir`'s task directories (every worker's) that
/// belong to `task_id`: its attempts' workspaces, their private repositories and
/// overlay layers. Empty once they are removed, or if none was made.
pub fn task_entries(dir: &std::path::Path, task_id: &str) -> Vec<String> {
    worker_entries(dir)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(task_id))
        .collect()
}

/// The workspaces of `task_id`'s attempts under a `--workspaces-dir`, oldest first.
pub fn task_workspaces(dir: &std::path::Path, task_id: &str) -> Vec<std::path::PathBuf> {
    let prefix = format!("{task_id}-");
    let mut found: Vec<std::path::PathBuf> = worker_entries(dir)
        .map(|entry| entry.path())
        .filter(|path| {
            path.is_dir()
                && path.extension().is_none_or(|ext| ext != "git")
                && path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix))
        })
        .collect();
    let attempt = |p: &std::path::PathBuf| {
        p.file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.rsplit('-').next())
            .and_then(|a| a.parse::<u32>().ok())
            .unwrap_or(0)
    };
    found.sort_by_key(attempt);
    found
}

/// The file `name` of the task's patch, as the patch creates it (`None` when the
/// patch does not create it): the lines added, joined.
pub fn created_in_patch(patch: &str, name: &str) -> Option<String> {
    let header = format!("diff --git a/{name} b/{name}\nnew file mode");
    let start = patch.find(&header)?;
    let section = &patch[start..];
    let end = section[1..]
        .find("\ndiff --git ")
        .map_or(section.len(), |i| i + 1);
    let added: Vec<&str> = section[..end]
        .lines()
        .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
        .map(|l| &l[1..])
        .collect();
    Some(added.join("\n"))
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
