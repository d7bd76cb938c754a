//! `taskwire` as real child processes: coordinators and workers for tests that kill
//! them, and any command started with an environment of the test's choosing (a log
//! level, a trust store, secrets, an OTLP endpoint), whose stdout and stderr a test
//! reads back. The test's own `TASKWIRE_*`, `OTEL_*` and `RUST_LOG` never reach them.
//!
//! The binary is `$TASKWIRE_BIN`, or `taskwire` next to the test executable's
//! directory (`target/debug/deps/e2e-*` → `target/debug/taskwire`); build it with
//! `cargo build -p taskwire-cli`. Each child's stdout and stderr go to files, whose
//! tails failure messages quote (`TASKWIRE_KEEP_LOGS=1` keeps them and prints where).
//! Children are killed (SIGKILL) when dropped; [`Process::terminate`] stops one with
//! SIGTERM, [`Process::pause`] freezes one (SIGSTOP) until [`Process::resume`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;

use crate::PATIENCE;

/// Where the `taskwire` binary is, and where its children's output goes.
pub struct Taskwire {
    bin: PathBuf,
    logs: tempfile::TempDir,
    /// The workers' `--workspaces-dir`.
    workspaces: tempfile::TempDir,
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
        warn_if_stale(&bin);
        let mut logs = tempfile::Builder::new()
            .prefix("taskwire-logs-")
            .tempdir()
            .context("failed to create a log dir")?;
        if std::env::var_os("TASKWIRE_KEEP_LOGS").is_some() {
            // Kept for a look after the test; the path is printed.
            logs.disable_cleanup(true);
            eprintln!("taskwire process logs: {}", logs.path().display());
        }
        let workspaces = tempfile::Builder::new()
            .prefix("taskwire-workspaces-")
            .tempdir()
            .context("failed to create a workspaces dir")?;
        Ok(Self {
            bin,
            logs,
            workspaces,
        })
    }

    /// The workers' `--workspaces-dir`.
    pub fn workspaces(&self) -> &Path {
        self.workspaces.path()
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
        let env = [("RUST_LOG", child_log_filter())];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.coordinator_with_env(name, database_url, nats_url, listen, ack_wait, &env)
    }

    /// [`Taskwire::coordinator`] with `env` added to a cleaned environment as in
    /// [`Taskwire::spawn_with_env`].
    pub fn coordinator_with_env(
        &self,
        name: &str,
        database_url: &str,
        nats_url: &str,
        listen: SocketAddr,
        ack_wait: Duration,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Process> {
        let listen = listen.to_string();
        let ack_wait = format!("{}ms", ack_wait.as_millis());
        self.spawn_with_env(
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
            env,
        )
    }

    /// `taskwire worker` named `name` (its worker id too), logging like [`Taskwire::spawn`].
    pub fn worker(&self, name: &str, options: &WorkerOptions<'_>) -> anyhow::Result<Process> {
        self.worker_with_env(name, options, &[("RUST_LOG", &child_log_filter())])
    }

    /// `taskwire worker` named `name` (its worker id too), with `env` added to a cleaned
    /// environment as in [`Taskwire::spawn_with_env`].
    pub fn worker_with_env(
        &self,
        name: &str,
        options: &WorkerOptions<'_>,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Process> {
        let concurrency = options.concurrency.to_string();
        let ack_wait = options.ack_wait.map(|a| format!("{}ms", a.as_millis()));
        let drain_grace = format!("{}ms", options.drain_grace.as_millis());
        let workspace = options.workspace.to_string_lossy();
        let http_listen = options.http_listen.map(|a| a.to_string());
        let workspaces = self.workspaces.path().to_string_lossy();
        let mut args = vec![
            "worker",
            "--nats-url",
            options.nats_url,
            "--model-base-url",
            options.model_base_url,
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
            "--claim-timeout",
            "2s",
            "--drain-grace",
            &drain_grace,
            // The scripted conversations under test would see the title request
            // among theirs; titles have tests of their own.
            "--no-titles",
        ];
        if let Some(addr) = &http_listen {
            args.extend(["--http-listen", addr]);
        }
        if let Some(ack_wait) = &ack_wait {
            args.extend(["--ack-wait", ack_wait]);
        }
        self.spawn_with_env(name, &args, env)
    }

    /// Starts `taskwire <args>` logging at info level (`TASKWIRE_CHILD_LOG` overrides
    /// the filter), in an environment cleaned as in [`Taskwire::spawn_with_env`].
    pub fn spawn(&self, name: &str, args: &[&str]) -> anyhow::Result<Process> {
        self.spawn_with_env(name, args, &[("RUST_LOG", &child_log_filter())])
    }

    /// Starts `taskwire <args>` with `env` added to an environment that has none of
    /// the test's `TASKWIRE_*` settings, log filter or trust store (`SSL_CERT_*`). It
    /// runs in its log directory, with `XDG_CONFIG_HOME` there too, so a coordinator
    /// discovers no agents or commands of the machine's.
    pub fn spawn_with_env(
        &self,
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Process> {
        self.spawn_in(name, self.logs.path(), args, env)
    }

    /// The `taskwire` binary.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// Starts `program <args>` (a wrapper that runs taskwire, such as util-linux
    /// `script`) as [`Taskwire::spawn_with_env`] starts taskwire.
    pub fn spawn_program(&self, program: &str, args: &[&str]) -> anyhow::Result<Process> {
        self.spawn_command(program, Path::new(program), self.logs.path(), args, &[])
    }

    /// [`Taskwire::spawn_with_env`] in the working directory `cwd`.
    pub fn spawn_in(
        &self,
        name: &str,
        cwd: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Process> {
        self.spawn_command(name, &self.bin, cwd, args, env)
    }

    fn spawn_command(
        &self,
        name: &str,
        program: &Path,
        cwd: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Process> {
        let stdout = self.logs.path().join(format!("{name}.stdout"));
        let stderr = self.logs.path().join(format!("{name}.stderr"));
        let create = |p: &Path| {
            std::fs::File::create(p).with_context(|| format!("failed to create {}", p.display()))
        };
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(create(&stdout)?)
            .stderr(create(&stderr)?);
        for (key, _) in std::env::vars_os() {
            let key_text = key.to_string_lossy();
            if key_text.starts_with("TASKWIRE_")
                || key_text.starts_with("OTEL_")
                || key_text == "RUST_LOG"
                || key_text.starts_with("SSL_CERT_")
            {
                command.env_remove(&key);
            }
        }
        command
            .current_dir(cwd)
            .env("XDG_CONFIG_HOME", self.logs.path().join("config"));
        // Coordinators serve HTTP on 127.0.0.1:8080 by default: tests run side by side,
        // so each gets a port of its own unless the test chooses one.
        if args.first() == Some(&"coordinator") {
            command.env("TASKWIRE_HTTP_LISTEN", "127.0.0.1:0");
        }
        command.envs(env.iter().copied());
        let child = command
            .spawn()
            .with_context(|| format!("failed to start {} {}", program.display(), args[0]))?;
        Ok(Process {
            name: name.to_owned(),
            child: Some(child),
            stdout,
            stderr,
        })
    }

    /// Runs `taskwire <args>` as [`Taskwire::spawn_with_env`] does, to its end (within
    /// [`PATIENCE`]).
    pub async fn run(
        &self,
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Process> {
        let mut process = self.spawn_with_env(name, args, env)?;
        process.wait().await?;
        Ok(process)
    }
}

fn child_log_filter() -> String {
    std::env::var("TASKWIRE_CHILD_LOG").unwrap_or_else(|_| "info".to_owned())
}

/// Warns when the binary is older than this test executable: it may predate the code
/// under test (`cargo test -p taskwire-e2e` does not rebuild it).
fn warn_if_stale(bin: &Path) {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let test_exe = std::env::current_exe().ok();
    if let (Some(bin_time), Some(exe_time)) =
        (modified(bin), test_exe.as_deref().and_then(modified))
        && bin_time < exe_time
    {
        eprintln!(
            "warning: {} is older than the test executable; run `cargo build -p taskwire-cli` \
             if the coordinator or worker changed",
            bin.display()
        );
    }
}

/// What a worker process is started with.
pub struct WorkerOptions<'a> {
    pub nats_url: &'a str,
    pub model_base_url: &'a str,
    pub workspace: &'a Path,
    pub concurrency: usize,
    /// The shared consumer's ack wait (each worker sets it on the consumer at start, so
    /// give every worker the same); `None`: the worker's default, no flag.
    pub ack_wait: Option<Duration>,
    /// How long sessions may finish after SIGTERM before their tasks are released.
    pub drain_grace: Duration,
    /// Where the worker serves `/healthz` and `/readyz`, if anywhere.
    pub http_listen: Option<SocketAddr>,
}

impl<'a> WorkerOptions<'a> {
    /// One session at a time, a 10 s ack wait, a 1 s drain grace and no HTTP listener.
    pub fn new(nats_url: &'a str, model_base_url: &'a str, workspace: &'a Path) -> Self {
        Self {
            nats_url,
            model_base_url,
            workspace,
            concurrency: 1,
            ack_wait: Some(Duration::from_secs(10)),
            drain_grace: Duration::from_secs(1),
            http_listen: None,
        }
    }
}

/// A child process and its captured output; killed (SIGKILL) when dropped.
pub struct Process {
    name: String,
    child: Option<Child>,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Process {
    /// Waits until a worker process says it pulls tasks; fails if it exits first or
    /// takes longer than [`crate::PATIENCE`], quoting its log.
    pub async fn pulling(&mut self) -> anyhow::Result<()> {
        let deadline = std::time::Instant::now() + crate::PATIENCE;
        while !self.stderr().contains("worker pulling tasks") {
            self.check_running()?;
            if std::time::Instant::now() > deadline {
                bail!("{} never pulled tasks; log:\n{}", self.name, self.tail(30));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

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
                self.tail(30)
            );
        }
        Ok(())
    }

    /// Waits (polling, within [`PATIENCE`]) for the process to exit.
    pub async fn wait(&mut self) -> anyhow::Result<ExitStatus> {
        let Some(child) = self.child.as_mut() else {
            bail!("{} was killed", self.name)
        };
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(status) = child.try_wait().context("failed to poll a child")? {
                return Ok(status);
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "{} did not exit within {PATIENCE:?}:\n{}",
                    self.name,
                    self.tail(30)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Freezes the process (SIGSTOP): it holds its connections but does nothing, like
    /// a machine that stalls, until [`Process::resume`].
    pub fn pause(&self) -> anyhow::Result<()> {
        self.signal(rustix::process::Signal::STOP)
    }

    /// Lets a paused process run again (SIGCONT).
    pub fn resume(&self) -> anyhow::Result<()> {
        self.signal(rustix::process::Signal::CONT)
    }

    fn signal(&self, signal: rustix::process::Signal) -> anyhow::Result<()> {
        let Some(child) = self.child.as_ref() else {
            bail!("{} was killed", self.name)
        };
        rustix::process::kill_process(rustix::process::Pid::from_child(child), signal)
            .with_context(|| format!("failed to send {signal:?} to {}", self.name))
    }

    /// Asks the process to stop (SIGTERM) and waits for it to exit.
    pub async fn terminate(&mut self) -> anyhow::Result<ExitStatus> {
        self.sigterm()?;
        self.wait().await
    }

    /// Asks the process to stop (SIGTERM), as an orchestrator does, without waiting.
    pub fn sigterm(&self) -> anyhow::Result<()> {
        self.signal(rustix::process::Signal::TERM)
    }

    /// Everything it wrote to stdout so far.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// Everything it wrote to stderr (its log) so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The last `lines` lines of its stderr.
    pub fn tail(&self, lines: usize) -> String {
        let text = self.stderr();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `GET http://{addr}{path}`: the status code and the body. HTTP/1.0, so the answer
/// ends with the connection and needs no chunked decoding.
pub async fn http_get(addr: SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("failed to connect to {addr}"))?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut response = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut response))
        .await
        .with_context(|| format!("GET {path} on {addr} did not end"))??;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .with_context(|| format!("no end of headers in {response:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("no status in {head:?}"))?;
    Ok((status, body.to_owned()))
}

/// A loopback address that was free a moment ago.
pub fn free_addr() -> anyhow::Result<SocketAddr> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("failed to find a free port")?;
    Ok(listener.local_addr()?)
}

/// Waits until the coordinator at `addr` answers `ListAgents` (sent with `token` as its
/// bearer token, when there is one), failing early (with its log) if `process` exits.
pub async fn wait_serving(
    process: &mut Process,
    addr: SocketAddr,
    token: Option<&str>,
) -> anyhow::Result<TaskServiceClient<tonic::transport::Channel>> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        process.check_running()?;
        if let Ok(mut client) = TaskServiceClient::connect(format!("http://{addr}")).await {
            let mut request = tonic::Request::new(pb::ListAgentsRequest::default());
            if let Some(token) = token {
                let bearer = format!("Bearer {token}")
                    .parse()
                    .context("a bearer token is ascii")?;
                request.metadata_mut().insert("authorization", bearer);
            }
            if client.list_agents(request).await.is_ok() {
                return Ok(client);
            }
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "coordinator at {addr} did not serve within {PATIENCE:?}; log:\n{}",
                process.tail(30)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
