//! `taskwire agents`: the agents tasks can be sent to.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use taskwire_protocol::pb;

use crate::cli::ClientArgs;
use crate::commands::connect;
use crate::output::{OutputFormat, json, text, write_json};

#[derive(Debug, Args)]
pub struct AgentsArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Include hidden agents (internal helpers such as title or summary writers)
    #[arg(long)]
    pub all: bool,
}

pub async fn run(args: AgentsArgs) -> anyhow::Result<ExitCode> {
    let mut client = connect(&args.client).await?;
    let agents = client
        .list_agents(pb::ListAgentsRequest {
            include_hidden: args.all,
        })
        .await?
        .into_inner()
        .agents;
    let mut out = std::io::stdout().lock();
    match args.client.output {
        OutputFormat::Json => write_json(&mut out, &agents.iter().map(json::agent).collect())?,
        OutputFormat::Text => out.write_all(text::agent_table(&agents).as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}
