//! `taskwire get TASK_ID`: a task's state and, once finished, its result.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use taskwire_protocol::pb;

use crate::cli::ClientArgs;
use crate::commands::connect;
use crate::output::{OutputFormat, json, text, write_json};

#[derive(Debug, Args)]
pub struct GetArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The task's id
    pub task_id: String,
}

pub async fn run(args: GetArgs) -> anyhow::Result<ExitCode> {
    let mut client = connect(&args.client).await?;
    let task = client
        .get(pb::GetRequest {
            task_id: args.task_id,
        })
        .await?
        .into_inner();
    let mut out = std::io::stdout().lock();
    match args.client.output {
        OutputFormat::Json => write_json(&mut out, &json::task(&task))?,
        OutputFormat::Text => out.write_all(text::task_summary(&task).as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}
