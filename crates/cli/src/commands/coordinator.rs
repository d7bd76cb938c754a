//! `taskwire coordinator`: serves the gRPC API until SIGINT or SIGTERM.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::config::{self, CoordinatorSettings, Defaults, FileConfig};
use crate::shutdown;

#[derive(Debug, Args)]
pub struct CoordinatorArgs {
    #[command(flatten)]
    pub settings: CoordinatorSettings,
    /// TOML config file; its [coordinator] table sits under env and flags
    #[arg(long, env = "TASKWIRE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the effective config (as TOML, secrets redacted) and exit
    #[arg(long)]
    pub print_config: bool,
}

pub async fn run(args: CoordinatorArgs) -> anyhow::Result<ExitCode> {
    let file = FileConfig::load(args.config.as_deref())?;
    let defaults = Defaults::from_env(|name| std::env::var(name).ok())?;
    let mut config = config::coordinator_config(args.settings, &file, defaults)?;
    if config.config_dir.is_none() {
        config.discovered_config_dirs = config::discovered_config_dirs()?;
    }
    if args.print_config {
        std::io::stdout()
            .lock()
            .write_all(config::render_coordinator(&config)?.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let shutdown = CancellationToken::new();
    shutdown::cancel_on_signals(shutdown.clone())?;
    tracing::info!(listen = %config.listen, prefix = %config.prefix, queue = %config.queue, "starting coordinator");
    taskwire_coordinator::run(config, shutdown)
        .await
        .context("coordinator failed")?;
    Ok(ExitCode::SUCCESS)
}
