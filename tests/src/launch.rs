//! `taskwire` child processes started with an environment of the test's choosing (a log
//! level, a trust store, secrets), whose whole stdout and stderr a test reads back.
//!
//! [`crate::process`] starts its children at `RUST_LOG=info` with no way to add a
//! variable; this finds the binary the same way (`$TASKWIRE_BIN`, or `taskwire` next to
//! the test executable's directory; `cargo build -p taskwire-cli`). Children are
//! killed (SIGKILL) when dropped; [`Launched::terminate`] stops one with SIGTERM.
//! `TASKWIRE_KEEP_LOGS=1` keeps the output files and prints where they are.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::PATIENCE;

/// Where the binary is, and where its children's output goes.
pub struct Launcher {
    bin: PathBuf,
    out: tempfile::TempDir,
}

impl Launcher {
    /// Finds the binary; fails with how to build it when it is missing.
    pub fn locate() -> anyhow::Result<Self> {
        let bin = match std::env::var_os("TASKWIRE_BIN") {
            Some(bin) => PathBuf::from(bin),
            None => std::env::current_exe()
                .context("failed to find the test executable")?
                .parent()
                .and_then(Path::parent)
                .map(|d| d.join("taskwire"))
                .context("unexpected test path")?,
        };
        if !bin.is_file() {
            bail!(
                "the taskwire binary is missing at {}: run `cargo build -p taskwire-cli` first \
                 (or set TASKWIRE_BIN)",
                bin.display()
            );
        }
        let mut out = tempfile::Builder::new()
            .prefix("taskwire-output-")
            .tempdir()
            .context("failed to create an output dir")?;
        if std::env::var_os("TASKWIRE_KEEP_LOGS").is_some() {
            // Kept for a look after the test; the path is printed.
            out.disable_cleanup(true);
            eprintln!("taskwire process output: {}", out.path().display());
        }
        Ok(Self { bin, out })
    }

    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut command = Command::new(&self.bin);
        command.args(args).stdin(Stdio::null());
        // Only what the test says: no inherited settings, log level or trust store.
        for (key, _) in std::env::vars_os() {
            let key_text = key.to_string_lossy();
            if key_text.starts_with("TASKWIRE_")
                || key_text == "RUST_LOG"
                || key_text.starts_with("SSL_CERT_")
            {
                command.env_remove(&key);
            }
        }
        command.envs(env.iter().copied());
        command
    }

    /// Starts `taskwire <args>` with `env` added to a cleaned environment.
    pub fn spawn(
        &self,
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Launched> {
        let stdout = self.out.path().join(format!("{name}.stdout"));
        let stderr = self.out.path().join(format!("{name}.stderr"));
        let create = |p: &Path| {
            std::fs::File::create(p).with_context(|| format!("failed to create {}", p.display()))
        };
        let child = self
            .command(args, env)
            .stdout(create(&stdout)?)
            .stderr(create(&stderr)?)
            .spawn()
            .with_context(|| format!("failed to start {} {}", self.bin.display(), args[0]))?;
        Ok(Launched {
            name: name.to_owned(),
            child: Some(child),
            stdout,
            stderr,
        })
    }

    /// Runs `taskwire <args>` to its end (within [`PATIENCE`]).
    pub async fn run(
        &self,
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Launched> {
        let mut launched = self.spawn(name, args, env)?;
        launched.wait().await?;
        Ok(launched)
    }
}

/// A child process and its captured output; killed (SIGKILL) when dropped.
pub struct Launched {
    name: String,
    child: Option<Child>,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Launched {
    /// Fails if the process has exited, quoting its output.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        let child = self.child.as_mut().context("the process was reaped")?;
        if let Some(status) = child.try_wait().context("failed to poll a child")? {
            bail!("{} exited with {status}:\n{}", self.name, self.tail(30));
        }
        Ok(())
    }

    /// Waits (polling, within [`PATIENCE`]) for the process to exit.
    pub async fn wait(&mut self) -> anyhow::Result<ExitStatus> {
        let child = self.child.as_mut().context("the process was reaped")?;
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

    /// Asks the process to stop (SIGTERM) and waits for it to exit.
    pub async fn terminate(&mut self) -> anyhow::Result<ExitStatus> {
        let child = self.child.as_ref().context("the process was reaped")?;
        rustix::process::kill_process(
            rustix::process::Pid::from_child(child),
            rustix::process::Signal::TERM,
        )
        .with_context(|| format!("failed to send SIGTERM to {}", self.name))?;
        self.wait().await
    }

    /// Everything it wrote to stdout so far.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// Everything it wrote to stderr so far.
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

impl Drop for Launched {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
