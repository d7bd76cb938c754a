//! `taskwire get TASK_ID`: a task's state and, once finished, its result.

use std::process::ExitCode;

use clap::Args;
use taskwire_protocol::pb;

use crate::cli::ClientArgs;
use crate::commands::connect;
use crate::output::write_task;

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
    write_task(&mut std::io::stdout().lock(), args.client.output, &task)?;
    Ok(ExitCode::SUCCESS)
}
