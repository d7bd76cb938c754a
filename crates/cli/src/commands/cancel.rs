//! `taskwire cancel TASK_ID`: cancels a task and its subtasks, and prints the task's
//! status afterwards (a task that had already finished keeps its status).

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use taskwire_protocol::pb;

use crate::cli::ClientArgs;
use crate::commands::connect;
use crate::output::{OutputFormat, json, status_name, write_json};

#[derive(Debug, Args)]
pub struct CancelArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Why, recorded with the cancellation [default: cancelled by request]
    #[arg(long)]
    pub reason: Option<String>,
    /// The task's id
    pub task_id: String,
}

pub async fn run(args: CancelArgs) -> anyhow::Result<ExitCode> {
    let mut client = connect(&args.client).await?;
    let request = pb::CancelRequest {
        task_id: args.task_id.clone(),
        reason: args.reason.unwrap_or_default(),
    };
    let response = client.cancel(request).await?.into_inner();
    let mut out = std::io::stdout().lock();
    match args.client.output {
        OutputFormat::Json => write_json(&mut out, &json::cancelled(&args.task_id, &response))?,
        OutputFormat::Text => writeln!(out, "{} {}", args.task_id, status_name(response.status))?,
    }
    Ok(ExitCode::SUCCESS)
}
