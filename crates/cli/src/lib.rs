//! The `taskwire` command line: runs the coordinator and workers, and talks to a
//! coordinator over gRPC to submit, follow, inspect, cancel, approve, replay and list
//! tasks and to run slash commands.
//!
//! The binary (`src/main.rs`) only parses arguments, starts telemetry and calls [`run`].
//!
//! - [`cli`]: the command line ([`Cli`], [`Command`]) and flags shared by client commands.
//! - [`commands`]: one module per subcommand.
//! - [`config`]: layered settings of the coordinator and the worker
//!   (defaults → TOML file → `TASKWIRE_*` env → flags) and `--print-config`.
//! - [`duration`]: `30s` / `5m` durations and deadlines.
//! - [`output`]: text and JSON renderings of API messages for stdout.
//! - [`errors`]: error messages on stderr and exit statuses.
//! - [`shutdown`]: SIGINT / SIGTERM to a cancellation token.
//! - [`telemetry`]: logging to stderr; traces over OTLP when an endpoint is set.
//! - `testing` (unit tests only): flag parsing that ignores the environment.

pub mod cli;
pub mod commands;
pub mod config;
pub mod duration;
pub mod errors;
pub mod output;
pub mod shutdown;
pub mod telemetry;
#[cfg(test)]
mod testing;

use std::process::ExitCode;

pub use cli::{Cli, Command};

/// How a server exports traces, from `env` (`None`: not at all, and for client
/// commands). A worker's `service.instance.id` is its worker id: one is chosen here
/// when no flag, variable or file names it, and the worker runs under it.
pub fn trace_settings(
    cli: &mut Cli,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<Option<telemetry::TraceSettings>> {
    match &mut cli.command {
        Command::Coordinator(_) => {
            telemetry::TraceSettings::from_env(env, "taskwire-coordinator", || {
                let id = taskwire_protocol::TaskId::generate().to_string();
                format!("coordinator-{}", &id[24..])
            })
        }
        Command::Worker(args) => telemetry::TraceSettings::from_env(env, "taskwire-worker", || {
            commands::worker::settle_worker_id(args)
        }),
        _ => Ok(None),
    }
}

/// For a worker whose workspaces may be overlays, enters a mount namespace of the
/// process's own (`taskwire_worker::enter_private_mounts`). Call it before any thread
/// starts (the kernel refuses a new user namespace to a multi-threaded process); a
/// refusal is kept, and the worker logs it and makes copies.
pub fn prepare_process(cli: &Cli) {
    if let Command::Worker(args) = &cli.command
        && !args.print_config
        && commands::worker::wants_overlays(args)
    {
        let _ = taskwire_worker::enter_private_mounts();
    }
}

/// Runs the parsed command to its exit status.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Coordinator(args) => commands::coordinator::run(args).await,
        Command::Worker(args) => commands::worker::run(args).await,
        Command::Submit(args) => commands::submit::run(args).await,
        Command::Get(args) => commands::get::run(args).await,
        Command::Watch(args) => commands::watch::run(args).await,
        Command::Cancel(args) => commands::cancel::run(args).await,
        Command::Approve(args) => commands::approve::run(args).await,
        Command::Replay(args) => commands::replay::run(args).await,
        Command::Run(args) => commands::run_command::run(args).await,
        Command::Ls(args) => commands::ls::run(args).await,
        Command::Agents(args) => commands::agents::run(args).await,
        Command::Schedule(args) => commands::schedule::run(args).await,
        Command::Mcp(args) => commands::mcp::run(args).await,
    }
}
