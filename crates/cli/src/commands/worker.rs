//! `taskwire worker`: pulls and runs tasks until SIGINT or SIGTERM, then lets running
//! sessions finish within the shutdown grace.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::config::{self, Defaults, FileConfig, WorkerSettings};
use crate::shutdown;

#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub settings: WorkerSettings,
    /// TOML config file; its [worker] table sits under env and flags
    #[arg(long, env = "TASKWIRE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the effective config (as TOML, secrets redacted) and exit
    #[arg(long)]
    pub print_config: bool,
}

/// The worker's id, as its configuration names it; when nothing does, a new one, set
/// as if given by flag so that the worker runs under the id its telemetry reports.
pub fn settle_worker_id(args: &mut WorkerArgs) -> String {
    // The defaults the environment moves are listen addresses, never the id.
    let configured = FileConfig::load(args.config.as_deref())
        .and_then(|file| config::worker_config(args.settings.clone(), &file, Defaults::LIBRARY))
        .ok()
        .and_then(|c| c.worker_id);
    match configured {
        Some(id) => id,
        None => {
            let id = taskwire_protocol::WorkerId::generate().to_string();
            args.settings.worker_id = Some(id.clone());
            id
        }
    }
}

/// Whether the worker's configuration (file, environment and flags; its listen
/// defaults aside) asks for overlay workspaces. An unreadable file says no: the worker
/// then reports it at start.
pub fn wants_overlays(args: &WorkerArgs) -> bool {
    FileConfig::load(args.config.as_deref())
        .and_then(|file| config::worker_config(args.settings.clone(), &file, Defaults::LIBRARY))
        .is_ok_and(|c| c.workspace_overlays)
}

/// Needs a rustls crypto provider installed first (the binary's `main` does it): the
/// model client is built without one.
pub async fn run(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    let file = FileConfig::load(args.config.as_deref())?;
    let defaults = Defaults::from_env(|name| std::env::var(name).ok())?;
    let mut config = config::worker_config(args.settings, &file, defaults)?;
    // It may hold the model API key: no command may read it.
    config.hidden_paths.extend(args.config.clone());
    if args.print_config {
        std::io::stdout()
            .lock()
            .write_all(config::render_worker(&config)?.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let shutdown = CancellationToken::new();
    shutdown::cancel_on_signals(shutdown.clone())?;
    tracing::info!(
        queue = %config.queue,
        concurrency = config.concurrency,
        workspace = %config.workspace.display(),
        workspaces_dir = %config.workspaces_dir.display(),
        model = %config.model.default_model,
        unsafe_no_sandbox = config.unsafe_no_sandbox,
        "starting worker"
    );
    taskwire_worker::run(config, shutdown)
        .await
        .context("worker failed")?;
    Ok(ExitCode::SUCCESS)
}
