//! `taskwire replay TASK_ID`: runs a dead-lettered or failed task again with a fresh
//! attempt budget, and prints the task as `get` does.

use std::process::ExitCode;

use clap::Args;
use taskwire_protocol::pb;

use crate::cli::ClientArgs;
use crate::commands::connect;
use crate::output::write_task;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The task's id
    pub task_id: String,
}

pub async fn run(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let mut client = connect(&args.client).await?;
    let task = client
        .replay(pb::ReplayRequest {
            task_id: args.task_id,
        })
        .await?
        .into_inner();
    write_task(&mut std::io::stdout().lock(), args.client.output, &task)?;
    Ok(ExitCode::SUCCESS)
}
