//! A `nats-server` with JetStream per test: its own free port and its own temp store.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// A running `nats-server` child process, killed on drop.
pub struct NatsServer {
    child: Option<Child>,
    dir: tempfile::TempDir,
    port: u16,
    /// Flags beyond JetStream, port and store, given again on restart.
    args: Vec<OsString>,
    /// Environment variables set for the server process, set again on restart.
    env: Vec<(OsString, OsString)>,
}

impl NatsServer {
    /// Starts `nats-server -js` on a free port (`-p -1`) with a temp store directory.
    ///
    /// The binary is `$TASKWIRE_NATS_SERVER` or `nats-server` on `PATH`; install it with
    /// `apt-get install -y nats-server`.
    pub fn start() -> anyhow::Result<Self> {
        Self::start_with_args(Vec::<OsString>::new())
    }

    /// [`NatsServer::start`] with more flags, such as `--tls`; [`NatsServer::restart`]
    /// passes them again.
    pub fn start_with_args(
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> anyhow::Result<Self> {
        Self::start_with_env(args, Vec::<(OsString, OsString)>::new())
    }

    /// [`NatsServer::start_with_args`] with environment variables for the server, such
    /// as the passwords a configuration file (`-c FILE`) reads with `$VAR`. The port,
    /// address and store flags still win over the file's `listen` and `store_dir`.
    pub fn start_with_env(
        args: impl IntoIterator<Item = impl Into<OsString>>,
        env: impl IntoIterator<Item = (impl Into<OsString>, impl Into<OsString>)>,
    ) -> anyhow::Result<Self> {
        let args = args.into_iter().map(Into::into).collect::<Vec<_>>();
        let env = env
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect::<Vec<_>>();
        let dir = tempfile::tempdir().context("failed to create nats store directory")?;
        let (child, port) = spawn(dir.path(), None, &args, &env)?;
        Ok(Self {
            child: Some(child),
            dir,
            port,
            args,
            env,
        })
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id, while it runs (the benchmark reads its CPU time).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The HTTP monitoring endpoint (`http://127.0.0.1:PORT`), when the server was
    /// started with one (`-m -1` picks a free port); read from its ports file.
    pub fn monitoring_url(&self) -> Option<String> {
        let pid = self.pid()?;
        let text = std::fs::read_to_string(
            self.dir
                .path()
                .join("ports")
                .join(format!("nats-server_{pid}.ports")),
        )
        .ok()?;
        parse_monitoring(&text)
    }

    /// Kills the server (SIGKILL): for tests of what survives a broker failure.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port with the same store and flags.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        let (child, _) = spawn(self.dir.path(), Some(self.port), &self.args, &self.env)?;
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

/// Starts nats-server with its store in `dir` on `port` (a free one when `None`) and
/// returns it with its client port once it listens; a server that does not come up is
/// killed.
fn spawn(
    dir: &Path,
    port: Option<u16>,
    args: &[OsString],
    env: &[(OsString, OsString)],
) -> anyhow::Result<(Child, u16)> {
    let ports_dir = dir.join("ports");
    std::fs::create_dir_all(&ports_dir).context("failed to create ports directory")?;
    let port_arg = port.map_or_else(|| "-1".to_owned(), |p| p.to_string());
    // Kept so that a server that will not start says why (a bad configuration file).
    let stderr_path = dir.join("nats-server.stderr");
    let stderr = std::fs::File::create(&stderr_path).context("failed to create stderr file")?;
    let mut child = Command::new(binary())
        .args(["-js", "-a", "127.0.0.1", "-p", &port_arg, "-sd"])
        .arg(dir.join("store"))
        .arg("--ports_file_dir")
        .arg(&ports_dir)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .with_context(|| {
            format!(
                "failed to start {} (install it with `apt-get install -y nats-server`)",
                binary()
            )
        })?;
    match wait_for_port(&mut child, &ports_dir) {
        Ok(port) => Ok((child, port)),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            let said = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            let tail: Vec<&str> = said.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            Err(e.context(format!("nats-server said:\n{}", tail.join("\n"))))
        }
    }
}

/// Waits for the ports file nats-server writes once its listener is up.
fn wait_for_port(child: &mut Child, ports_dir: &Path) -> anyhow::Result<u16> {
    let ports_file = ports_dir.join(format!("nats-server_{}.ports", child.id()));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(&ports_file)
            && let Some(port) = parse_port(&text)
        {
            return Ok(port);
        }
        if let Some(status) = child.try_wait().context("failed to poll nats-server")? {
            bail!("nats-server exited during start-up with {status}");
        }
        if Instant::now() > deadline {
            bail!(
                "nats-server did not write {} within 10s",
                ports_file.display()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The client port in a ports file: `{"nats":["nats://127.0.0.1:40123"], ...}`.
fn parse_port(text: &str) -> Option<u16> {
    first_url(text, "nats")?.rsplit(':').next()?.parse().ok()
}

/// The first monitoring URL of a ports file, if the server has one.
fn parse_monitoring(text: &str) -> Option<String> {
    first_url(text, "monitoring")
}

/// The first URL a ports file lists under `kind` (`nats`, `monitoring`).
fn first_url(text: &str, kind: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    Some(v.get(kind)?.as_array()?.first()?.as_str()?.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_file_yields_the_client_port() {
        let text = r#"{"nats":["nats://127.0.0.1:40123"],"monitoring":[]}"#;
        assert_eq!(parse_port(text), Some(40123));
        assert_eq!(parse_monitoring(text), None);
        let text = r#"{"nats":["nats://127.0.0.1:40123"],"monitoring":["http://127.0.0.1:40124"]}"#;
        assert_eq!(
            parse_monitoring(text).as_deref(),
            Some("http://127.0.0.1:40124")
        );
    }

    /// The first line a client gets: `INFO {...}`, which names the server.
    fn info_line(server: &NatsServer) -> String {
        use std::io::BufRead;
        let stream = std::net::TcpStream::connect(("127.0.0.1", server.port())).expect("connects");
        let mut line = String::new();
        std::io::BufReader::new(stream)
            .read_line(&mut line)
            .expect("reads INFO");
        line
    }

    #[test]
    fn restart_keeps_the_port_and_the_extra_flags() {
        let mut server =
            NatsServer::start_with_args(["--server_name", "probe-server"]).expect("starts");
        let port = server.port();
        assert!(info_line(&server).contains(r#""server_name":"probe-server""#));
        server.restart().expect("restarts");
        assert_eq!(server.port(), port);
        assert!(info_line(&server).contains(r#""server_name":"probe-server""#));
    }

    #[test]
    fn a_server_that_will_not_start_says_why() {
        let err = NatsServer::start_with_args(["--no_such_flag"])
            .err()
            .expect("an unknown flag stops nats-server");
        assert!(format!("{err:#}").contains("no_such_flag"), "{err:#}");
    }

    #[test]
    fn a_tls_ports_file_yields_the_client_port() {
        let text = r#"{"nats":["tls://127.0.0.1:40123"],"monitoring":[]}"#;
        assert_eq!(parse_port(text), Some(40123));
    }
}
