//! A `nats-server` with JetStream per test: its own free port and its own temp store.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// A running `nats-server` child process, killed on drop.
pub struct NatsServer {
    child: Option<Child>,
    dir: tempfile::TempDir,
    port: u16,
}

impl NatsServer {
    /// Starts `nats-server -js` on a free port (`-p -1`) with a temp store directory.
    ///
    /// The binary is `$TASKWIRE_NATS_SERVER` or `nats-server` on `PATH`; install it with
    /// `apt-get install -y nats-server`.
    pub fn start() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir().context("failed to create nats store directory")?;
        let (child, port) = spawn(dir.path(), None)?;
        Ok(Self {
            child: Some(child),
            dir,
            port,
        })
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL): for tests of what survives a broker failure.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port with the same store.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        let (child, _) = spawn(self.dir.path(), Some(self.port))?;
        self.child = Some(child);
        Ok(())
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn binary() -> String {
    std::env::var("TASKWIRE_NATS_SERVER").unwrap_or_else(|_| "nats-server".to_owned())
}

fn spawn(dir: &Path, port: Option<u16>) -> anyhow::Result<(Child, u16)> {
    let ports_dir = dir.join("ports");
    std::fs::create_dir_all(&ports_dir).context("failed to create ports directory")?;
    let port_arg = port.map_or_else(|| "-1".to_owned(), |p| p.to_string());
    let mut child = Command::new(binary())
        .args(["-js", "-a", "127.0.0.1", "-p", &port_arg, "-sd"])
        .arg(dir.join("store"))
        .arg("--ports_file_dir")
        .arg(&ports_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| {
            format!(
                "failed to start {} (install it with `apt-get install -y nats-server`)",
                binary()
            )
        })?;
    let ports_file: PathBuf = ports_dir.join(format!("nats-server_{}.ports", child.id()));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(&ports_file)
            && let Some(port) = parse_port(&text)
        {
            // The ports file is written once the listener is up.
            return Ok((child, port));
        }
        if let Some(status) = child.try_wait().context("failed to poll nats-server")? {
            bail!("nats-server exited during start-up with {status}");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!(
                "nats-server did not write {} within 10s",
                ports_file.display()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn parse_port(text: &str) -> Option<u16> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let url = v.get("nats")?.as_array()?.first()?.as_str()?;
    url.rsplit(':').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_file_yields_the_client_port() {
        let text = r#"{"nats":["nats://127.0.0.1:40123"],"monitoring":[]}"#;
        assert_eq!(parse_port(text), Some(40123));
    }
}
