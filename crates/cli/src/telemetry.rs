//! Logging: `tracing` to stderr (stdout carries only data), filtered by `RUST_LOG`,
//! as text or as JSON lines.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Installs the global subscriber. `default_level` applies when `RUST_LOG` is unset;
/// an invalid `RUST_LOG` keeps the directives that parse rather than failing start-up.
pub fn init(default_level: LevelFilter, format: LogFormat) -> anyhow::Result<()> {
    let filter = EnvFilter::builder()
        .with_default_directive(default_level.into())
        .from_env_lossy();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().with_ansi(false).try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("failed to start logging: {e}"))
}
