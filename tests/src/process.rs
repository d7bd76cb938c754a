//! Coordinators and workers as real `taskwire` processes, for tests that kill them.
//!
//! The binary is `$TASKWIRE_BIN`, or `taskwire` next to the test executable's
//! directory (`target/debug/deps/e2e-*` → `target/debug/taskwire`); build it with
//! `cargo build -p taskwire-cli`. Each child's stdout and stderr go to a log file, whose
//! tail failure messages quote (`TASKWIRE_KEEP_LOGS=1` keeps the files and prints where).
//! Children are killed (SIGKILL) when dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;

use crate::PATIENCE;

/// Where the `taskwire` binary is, and where its children's logs go.
pub struct Taskwire {
    bin: PathBuf,
    logs: tempfile::TempDir,
}

impl Taskwire {
    /// Finds the binary; fails with how to build it when it is missing.
    pub fn locate() -> anyhow::Result<Self> {
        let bin = match std::env::var_os("TASKWIRE_BIN") {
            Some(bin) => PathBuf::from(bin),
            None => {
                let exe = std::env::current_exe().context("failed to find the test executable")?;
                // target/debug/deps/e2e-<hash> → target/debug/taskwire
                exe.parent()
                    .and_then(Path::parent)
                    .map(|d| d.join("taskwire"))
                    .context("unexpected test path")?
            }
        };
        if !bin.is_file() {
            bail!(
                "the taskwire binary is missing at {}: run `cargo build -p taskwire-cli` first \
                 (or set TASKWIRE_BIN)",
                bin.display()
            );
        }
        let mut logs = tempfile::Builder::new()
            .prefix("taskwire-logs-")
            .tempdir()
            .context("failed to create a log dir")?;
        if std::env::var_os("TASKWIRE_KEEP_LOGS").is_some() {
            // Kept for a look after the test; the path is printed.
            logs.disable_cleanup(true);
            eprintln!("taskwire process logs: {}", logs.path().display());
        }
        Ok(Self { bin, logs })
    }

    /// `taskwire coordinator` on `listen`, with the workers' `ack_wait`.
    pub fn coordinator(
        &self,
        name: &str,
        database_url: &str,
        nats_url: &str,
        listen: SocketAddr,
        ack_wait: Duration,
    ) -> anyhow::Result<Process> {
        let listen = listen.to_string();
        let ack_wait = format!("{}ms", ack_wait.as_millis());
        self.spawn(
            name,
            &[
                "coordinator",
                "--database-url",
                database_url,
                "--nats-url",
                nats_url,
                "--listen",
                &listen,
                "--ack-wait",
                &ack_wait,
            ],
        )
    }

    /// `taskwire worker` named `name`, running one session at a time per `concurrency`
    /// against the model at `model_base_url` (model name `scripted`).
    pub fn worker(&self, name: &str, options: &WorkerOptions<'_>) -> anyhow::Result<Process> {
        let concurrency = options.concurrency.to_string();
        let ack_wait = format!("{}ms", options.ack_wait.as_millis());
        let workspace = options.workspace.to_string_lossy();
        self.spawn(
            name,
            &[
                "worker",
                "--nats-url",
                options.nats_url,
                "--model-base-url",
                options.model_base_url,
                "--model",
                "scripted",
                "--workspace",
                &workspace,
                "--worker-id",
                name,
                "--concurrency",
                &concurrency,
                "--ack-wait",
                &ack_wait,
                "--claim-timeout",
                "2s",
                "--shutdown-grace",
                "1s",
            ],
        )
    }

    /// Starts `taskwire <args>`; its environment has no inherited `TASKWIRE_*` settings
    /// (the flags say everything) and logs at info level (`TASKWIRE_CHILD_LOG` overrides
    /// the filter).
    pub fn spawn(&self, name: &str, args: &[&str]) -> anyhow::Result<Process> {
        let log = self.logs.path().join(format!("{name}.log"));
        let out = std::fs::File::create(&log)
            .with_context(|| format!("failed to create {}", log.display()))?;
        let err = out.try_clone().context("failed to share the log file")?;
        let mut command = Command::new(&self.bin);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .env("RUST_LOG", child_log_filter());
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("TASKWIRE_") {
                command.env_remove(key);
            }
        }
        let child = command
            .spawn()
            .with_context(|| format!("failed to start {} {}", self.bin.display(), args[0]))?;
        Ok(Process {
            name: name.to_owned(),
            child: Some(child),
            log,
        })
    }
}

fn child_log_filter() -> String {
    std::env::var("TASKWIRE_CHILD_LOG").unwrap_or_else(|_| "info".to_owned())
}

/// What a worker process is started with.
pub struct WorkerOptions<'a> {
    pub nats_url: &'a str,
    pub model_base_url: &'a str,
    pub workspace: &'a Path,
    pub concurrency: usize,
    /// The shared consumer's ack wait: set by whichever worker creates it first, so give
    /// every worker the same.
    pub ack_wait: Duration,
}

/// A running child process; killed (SIGKILL) when dropped.
pub struct Process {
    name: String,
    child: Option<Child>,
    log: PathBuf,
}

impl Process {
    /// Kills the process with SIGKILL (no shutdown code runs) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Fails if the process has exited, quoting its log.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        let Some(child) = self.child.as_mut() else {
            bail!("{} was killed", self.name)
        };
        if let Some(status) = child.try_wait().context("failed to poll a child")? {
            bail!(
                "{} exited with {status}; log:\n{}",
                self.name,
                self.log_tail(30)
            );
        }
        Ok(())
    }

    /// The last `lines` lines of its output.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Its whole output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback address that was free a moment ago.
pub fn free_addr() -> anyhow::Result<SocketAddr> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("failed to find a free port")?;
    Ok(listener.local_addr()?)
}

/// Waits until the coordinator at `addr` answers `ListAgents`, failing early (with its
/// log) if `process` exits.
pub async fn wait_serving(
    process: &mut Process,
    addr: SocketAddr,
) -> anyhow::Result<TaskServiceClient<tonic::transport::Channel>> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        process.check_running()?;
        if let Ok(mut client) = TaskServiceClient::connect(format!("http://{addr}")).await
            && client
                .list_agents(pb::ListAgentsRequest::default())
                .await
                .is_ok()
        {
            return Ok(client);
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "coordinator at {addr} did not serve within {PATIENCE:?}; log:\n{}",
                process.log_tail(30)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
