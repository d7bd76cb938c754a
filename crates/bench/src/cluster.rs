//! `taskwire` coordinator and worker processes, started from the release binary as an
//! operator would start them.
//!
//! Each child gets an environment without the caller's `TASKWIRE_*`, `OTEL_*` and
//! `RUST_LOG`, so the shell the benchmark runs in cannot change what is measured; the
//! settings it wants are flags, plus the `env` given (the OTLP endpoint for the pass
//! with trace export). Logs go to files in a temp directory, quoted when a process
//! fails. Children are killed when dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;

/// The gRPC client of a coordinator.
pub type Client = TaskServiceClient<tonic::transport::Channel>;

/// Log level of the children: warnings only, so log writing is not part of the figures.
const CHILD_LOG: &str = "warn";

/// Where the `taskwire` binary is and where its children write their logs.
pub struct Taskwire {
    bin: PathBuf,
    dir: tempfile::TempDir,
}

/// A worker's read-only base and where it makes each task's workspace.
#[derive(Debug, Clone, Copy)]
pub struct Workspace<'a> {
    pub base: &'a Path,
    pub dir: &'a Path,
}

/// One running `taskwire` process; killed when dropped.
pub struct Process {
    name: String,
    child: std::process::Child,
    log: PathBuf,
}

impl Taskwire {
    /// `bin`, or `taskwire` next to this executable (`target/release/taskwire-bench` →
    /// `target/release/taskwire`); fails with how to build it when it is missing.
    pub fn locate(bin: Option<PathBuf>) -> anyhow::Result<Self> {
        let bin = match bin {
            Some(bin) => bin,
            None => std::env::current_exe()
                .context("failed to find the benchmark executable")?
                .with_file_name("taskwire"),
        };
        if !bin.is_file() {
            bail!(
                "the taskwire binary is missing at {}: build it with \
                 `cargo build --release -p taskwire-cli` or name it with --taskwire-bin",
                bin.display()
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("taskwire-bench-")
            .tempdir()
            .context("failed to create the benchmark's temp dir")?;
        std::fs::create_dir_all(dir.path().join("workspace"))?;
        Ok(Self { bin, dir })
    }

    /// The binary started.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// The temp directory of the run: the children's logs, workspaces and config.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `taskwire coordinator` on `listen`.
    pub fn coordinator(
        &self,
        name: &str,
        database_url: &str,
        nats_url: &str,
        listen: SocketAddr,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Process> {
        let listen = listen.to_string();
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
                "--http-listen",
                "127.0.0.1:0",
            ],
            env,
        )
    }

    /// `taskwire worker` running `concurrency` sessions at once against the model at
    /// `model_base_url`, in an empty workspace, without title requests (a no-op task is
    /// one model call).
    pub fn worker(
        &self,
        name: &str,
        nats_url: &str,
        model_base_url: &str,
        concurrency: usize,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Process> {
        let workspace = Workspace {
            base: &self.dir.path().join("workspace"),
            dir: &self.dir.path().join("workspaces"),
        };
        self.worker_in(name, nats_url, model_base_url, concurrency, workspace, env)
    }

    /// `taskwire worker` as [`Taskwire::worker`], with `workspace.base` as its
    /// `--workspace` and `workspace.dir` as its `--workspaces-dir`.
    pub fn worker_in(
        &self,
        name: &str,
        nats_url: &str,
        model_base_url: &str,
        concurrency: usize,
        workspace: Workspace<'_>,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Process> {
        let concurrency = concurrency.to_string();
        let (workspace, workspaces) = (
            workspace.base.to_string_lossy(),
            workspace.dir.to_string_lossy(),
        );
        self.spawn(
            name,
            &[
                "worker",
                "--nats-url",
                nats_url,
                "--model-base-url",
                model_base_url,
                "--model",
                "scripted",
                "--workspace",
                &workspace,
                "--workspaces-dir",
                &workspaces,
                "--worker-id",
                name,
                "--concurrency",
                &concurrency,
                "--no-titles",
            ],
            env,
        )
    }

    /// `taskwire worker` as [`Taskwire::worker`], asking for `model` by default and
    /// writing titles (a root task's title call is its second model call).
    pub fn worker_titled(
        &self,
        name: &str,
        nats_url: &str,
        model_base_url: &str,
        model: &str,
        concurrency: usize,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Process> {
        let concurrency = concurrency.to_string();
        let base = self.dir.path().join("workspace");
        let dir = self.dir.path().join("workspaces");
        let (base, dir) = (base.to_string_lossy(), dir.to_string_lossy());
        self.spawn(
            name,
            &[
                "worker",
                "--nats-url",
                nats_url,
                "--model-base-url",
                model_base_url,
                "--model",
                model,
                "--workspace",
                &base,
                "--workspaces-dir",
                &dir,
                "--worker-id",
                name,
                "--concurrency",
                &concurrency,
            ],
            env,
        )
    }

    fn spawn(&self, name: &str, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<Process> {
        let log = self.dir.path().join(format!("{name}.log"));
        let mut command = Command::new(&self.bin);
        command
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?);
        for (key, _) in std::env::vars_os() {
            let key_text = key.to_string_lossy();
            if key_text.starts_with("TASKWIRE_")
                || key_text.starts_with("OTEL_")
                || key_text == "RUST_LOG"
            {
                command.env_remove(&key);
            }
        }
        command
            .env("RUST_LOG", CHILD_LOG)
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .envs(env.iter().copied());
        let child = command
            .spawn()
            .with_context(|| format!("failed to start {} {}", self.bin.display(), args[0]))?;
        Ok(Process {
            name: name.to_owned(),
            child,
            log,
        })
    }
}

impl Process {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The file its stderr (its log) goes to.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Fails, quoting its log, if the process has exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!(
                "{} exited with {status}; log:\n{}",
                self.name,
                tail.join("\n")
            );
        }
        Ok(())
    }

    /// Stops the process (SIGKILL) and reaps it.
    pub fn stop(mut self) {
        self.kill();
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until the coordinator at `addr` answers `ListAgents`, failing early if it
/// exits.
pub async fn wait_serving(process: &mut Process, addr: SocketAddr) -> anyhow::Result<Client> {
    let deadline = Instant::now() + Duration::from_secs(60);
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
        if Instant::now() > deadline {
            bail!("the coordinator at {addr} did not serve within 60s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A loopback address that was free a moment ago.
pub fn free_addr() -> anyhow::Result<SocketAddr> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("failed to find a free port")?;
    Ok(listener.local_addr()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_binary_says_how_to_build_it() {
        let err = Taskwire::locate(Some(PathBuf::from("/nonexistent/taskwire")))
            .err()
            .expect("no binary there");
        let text = format!("{err:#}");
        assert!(
            text.contains("cargo build --release -p taskwire-cli"),
            "{text}"
        );
        assert!(text.contains("--taskwire-bin"), "{text}");
    }
}
