//! The command line: subcommands, and the flags they share. Flag names are a public
//! interface; scripts and deployments depend on them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use tracing_subscriber::filter::LevelFilter;

use crate::commands::{
    agents, approve, cancel, coordinator, get, ls, mcp, replay, run_command, schedule, submit,
    watch, worker,
};
use crate::output::OutputFormat;
use crate::telemetry::LogFormat;

/// taskwire: a distributed job queue for AI agent sessions.
#[derive(Debug, Parser)]
#[command(name = "taskwire", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log format on stderr; the level comes from RUST_LOG
    #[arg(
        long,
        global = true,
        value_enum,
        env = "TASKWIRE_LOG_FORMAT",
        default_value_t = LogFormat::Text,
        display_order = 1000
    )]
    pub log_format: LogFormat,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the coordinator: the gRPC API, outbox relay, claims, results and sweeper
    Coordinator(coordinator::CoordinatorArgs),
    /// Run a worker: pull tasks from a queue and run their agent sessions
    Worker(worker::WorkerArgs),
    /// Submit a task and print its id, or with --wait follow it and print its result
    Submit(submit::SubmitArgs),
    /// Show a task and, once finished, its result
    Get(get::GetArgs),
    /// Follow a task's progress until its result
    Watch(watch::WatchArgs),
    /// Cancel a task and its subtasks
    Cancel(cancel::CancelArgs),
    /// Answer a running task's request for approval of a tool call
    Approve(approve::ApproveArgs),
    /// Run a dead-lettered or failed task again, with a fresh attempt budget
    Replay(replay::ReplayArgs),
    /// Run a slash command (/NAME ARGS...) and print the task's id, or with --wait its result
    Run(run_command::RunArgs),
    /// List tasks, newest first
    Ls(ls::ListArgs),
    /// List the agents tasks can be sent to
    Agents(agents::AgentsArgs),
    /// Manage schedules: tasks the coordinator submits on a cron or interval cadence
    Schedule(schedule::ScheduleArgs),
    /// Serve taskwire as an MCP server over stdio, for a local harness (Claude Code,
    /// OpenCode, Codex): submit tasks, read results, list agents, cancel, approve
    Mcp(mcp::McpArgs),
}

impl Command {
    /// Log level when RUST_LOG is not set: servers report their life, while client
    /// commands stay quiet so that stderr carries only progress and errors.
    pub fn default_log_level(&self) -> LevelFilter {
        match self {
            Self::Coordinator(_) | Self::Worker(_) => LevelFilter::INFO,
            _ => LevelFilter::WARN,
        }
    }
}

/// Flags of every command that talks to a coordinator.
#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// Coordinator address; https:// needs --tls-ca
    #[arg(
        long,
        env = "TASKWIRE_ADDR",
        default_value = "http://127.0.0.1:50051",
        value_name = "URL"
    )]
    pub addr: String,
    /// Output format of the data printed on stdout
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Bearer token, for a coordinator started with --auth-tokens-file
    #[arg(long, env = "TASKWIRE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// PEM certificate(s) of the CA that signed the coordinator's certificate, for https://
    #[arg(long, env = "TASKWIRE_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn client_flags_follow_the_subcommand() {
        let cli: Cli = crate::testing::parse([
            "taskwire",
            "get",
            "--addr",
            "http://h:1",
            "--output",
            "json",
            "id",
        ])
        .expect("valid command line");
        let Command::Get(args) = cli.command else {
            panic!("expected get")
        };
        assert_eq!(args.client.addr, "http://h:1");
        assert_eq!(args.client.output, OutputFormat::Json);
    }

    #[test]
    fn servers_log_info_and_clients_warn_by_default() {
        let server: Cli = crate::testing::parse(["taskwire", "worker"]).expect("valid");
        assert_eq!(server.command.default_log_level(), LevelFilter::INFO);
        let client: Cli = crate::testing::parse(["taskwire", "agents"]).expect("valid");
        assert_eq!(client.command.default_log_level(), LevelFilter::WARN);
    }
}
