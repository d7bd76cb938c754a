//! A Postgres server owned by one test, for tests that stop and start the database.
//!
//! [`TestDatabase`](crate::TestDatabase) shares one server between tests, which a test
//! must not stop. [`PrivatePostgres`] runs `initdb` and `pg_ctl` from the newest
//! `/usr/lib/postgresql/*/bin` (or `$TASKWIRE_PG_BIN`) on a free port, with its data
//! directory and socket in a temp directory under `/tmp`. Both programs refuse to run as
//! root, so as root they run as the `postgres` user (`su postgres`), which then owns
//! the temp directory. Everything is stopped and removed on drop.

use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// How many free ports `start` tries before it gives up (another process may take the
/// port between the probe and the server's bind).
const START_TRIES: usize = 3;

/// A Postgres server of this test's own; stopped and deleted on drop.
pub struct PrivatePostgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    /// Run the Postgres programs through `su postgres` (the test runs as root).
    as_postgres_user: bool,
    /// `-c name=value` settings given after the defaults, so they win.
    settings: Vec<String>,
    running: bool,
}

impl PrivatePostgres {
    /// Initialises a cluster (user `postgres`, trust authentication, `fsync=off`) and
    /// starts it on a free port; returns once it accepts connections.
    pub fn start() -> anyhow::Result<Self> {
        Self::start_with_settings(&[])
    }

    /// [`PrivatePostgres::start`] with server settings (`("fsync", "on")`) that override
    /// the defaults, kept across [`start_again`](Self::start_again).
    pub fn start_with_settings(settings: &[(&str, &str)]) -> anyhow::Result<Self> {
        let settings = settings
            .iter()
            .map(|(name, value)| format!(" -c {name}={value}"))
            .collect();
        let bin = pg_bin()?;
        let dir = tempfile::Builder::new()
            .prefix("taskwire-pg-")
            .tempdir_in("/tmp")
            .context("failed to create the private postgres directory")?;
        let as_postgres_user = std::fs::metadata(dir.path())
            .context("failed to read the private postgres directory")?
            .uid()
            == 0;
        if as_postgres_user {
            run(
                Command::new("chown").arg("postgres").arg(dir.path()),
                "chown the postgres directory to postgres",
            )?;
        }
        let mut pg = Self {
            bin,
            dir,
            port: 0,
            as_postgres_user,
            settings,
            running: false,
        };
        let data = pg.data_dir();
        let initdb = pg.bin.join("initdb");
        pg.run_pg(
            &[
                initdb.as_os_str(),
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "--auth=trust".as_ref(),
                "--no-sync".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
            ],
            "initdb",
        )?;
        let mut last_error = None;
        for _ in 0..START_TRIES {
            pg.port = free_port()?;
            match pg.start_again() {
                Ok(()) => return Ok(pg),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.expect("at least one start was tried"))
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`: a superuser on the `postgres`
    /// database, which a test may use as its own.
    pub fn url(&self) -> String {
        self.url_for("postgres")
    }

    /// The URL of database `name` on this server (it need not exist yet).
    pub fn url_for(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// The port it listens on (kept across [`stop`](Self::stop) and
    /// [`start_again`](Self::start_again)).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server (`pg_ctl stop -m fast`: sessions are disconnected, nothing
    /// committed is lost) and waits until it is down.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        self.pg_ctl_stop("fast")
    }

    /// Starts the server again on the same port and data; returns once it accepts
    /// connections.
    pub fn start_again(&mut self) -> anyhow::Result<()> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200{}",
            self.port,
            self.dir.path().display(),
            self.settings.concat()
        );
        let pg_ctl = self.bin.join("pg_ctl");
        let data = self.data_dir();
        let log = self.log_file();
        let started = self.run_pg(
            &[
                pg_ctl.as_os_str(),
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-w".as_ref(),
                "-t".as_ref(),
                "30".as_ref(),
                "-o".as_ref(),
                options.as_ref(),
                "start".as_ref(),
            ],
            "start postgres",
        );
        match started {
            Ok(()) => {
                self.running = true;
                Ok(())
            }
            Err(e) => Err(e.context(format!("server log:\n{}", self.log_tail(20)))),
        }
    }

    /// The postmaster's process id (the first line of `postmaster.pid`), while it runs:
    /// the parent of every backend, for the benchmark's CPU accounting.
    pub fn postmaster_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.data_dir().join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    /// The last `lines` lines of the server log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_file()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn pg_ctl_stop(&mut self, mode: &str) -> anyhow::Result<()> {
        if !self.running {
            return Ok(());
        }
        let pg_ctl = self.bin.join("pg_ctl");
        let data = self.data_dir();
        self.run_pg(
            &[
                pg_ctl.as_os_str(),
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                mode.as_ref(),
                "-w".as_ref(),
                "stop".as_ref(),
            ],
            "stop postgres",
        )?;
        self.running = false;
        Ok(())
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_file(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// Runs a Postgres program, as the `postgres` user when the test is root.
    fn run_pg(&self, argv: &[&std::ffi::OsStr], what: &str) -> anyhow::Result<()> {
        let mut command = if self.as_postgres_user {
            let line: Vec<String> = argv
                .iter()
                .map(|a| shell_quote(&a.to_string_lossy()))
                .collect();
            let mut c = Command::new("su");
            c.args(["postgres", "-s", "/bin/sh", "-c"])
                .arg(line.join(" "));
            c
        } else {
            let mut c = Command::new(argv[0]);
            c.args(&argv[1..]);
            c
        };
        run(&mut command, what)
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        if let Err(e) = self.pg_ctl_stop("immediate") {
            tracing::warn!(error = %e, "failed to stop the private postgres");
        }
    }
}

/// Runs `command` to completion; fails with its output when it fails. Its stdout is
/// discarded: the server `pg_ctl` starts must not hold a pipe of ours open.
fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let output = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| {
            format!(
                "failed to {what}: could not run {:?}",
                command.get_program()
            )
        })?;
    if !output.status.success() {
        bail!(
            "failed to {what}: {} ({})",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// `$TASKWIRE_PG_BIN`, or the newest `/usr/lib/postgresql/<version>/bin`.
fn pg_bin() -> anyhow::Result<PathBuf> {
    if let Some(bin) = std::env::var_os("TASKWIRE_PG_BIN") {
        return Ok(PathBuf::from(bin));
    }
    let root = Path::new("/usr/lib/postgresql");
    let newest = std::fs::read_dir(root)
        .ok()
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let version = version_key(&e.file_name().to_string_lossy())?;
            let bin = e.path().join("bin");
            bin.join("pg_ctl").exists().then_some((version, bin))
        })
        .max();
    match newest {
        Some((_, bin)) => Ok(bin),
        None => bail!(
            "no postgres server programs in {}/*/bin (install them with `apt-get install -y postgresql`, \
             or set TASKWIRE_PG_BIN)",
            root.display()
        ),
    }
}

/// `"15"` → `[15]`, `"9.6"` → `[9, 6]`; `None` for anything else.
fn version_key(name: &str) -> Option<Vec<u32>> {
    name.split('.').map(|p| p.parse().ok()).collect()
}

fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("failed to find a free port")?;
    Ok(listener.local_addr()?.port())
}

/// Quotes `s` for `/bin/sh`.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_numerically() {
        assert!(version_key("15") > version_key("9.6"));
        assert_eq!(version_key("main"), None);
    }

    async fn answers(url: &str) -> bool {
        use sqlx::Connection;
        match sqlx::PgConnection::connect(url).await {
            Ok(mut c) => sqlx::query("SELECT 1").execute(&mut c).await.is_ok(),
            Err(_) => false,
        }
    }

    #[tokio::test]
    async fn a_private_server_stops_and_starts_again_on_the_same_port() {
        let mut pg = PrivatePostgres::start().expect("private postgres");
        assert!(answers(&pg.url()).await, "{}", pg.log_tail(20));
        pg.stop().expect("stop");
        assert!(!answers(&pg.url()).await, "stopped, yet it answers");
        pg.start_again().expect("start again");
        assert!(answers(&pg.url()).await, "{}", pg.log_tail(20));
        let dir = pg.dir.path().to_owned();
        drop(pg);
        assert!(!dir.exists(), "{} is left behind", dir.display());
    }

    #[test]
    fn shell_quoting_survives_quotes_and_spaces() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
