//! `taskwire ls`: tasks, newest first, filtered by trace, parent, status, agent or tenant.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use taskwire_protocol::{TaskStatus, pb};

use crate::cli::ClientArgs;
use crate::commands::connect;
use crate::errors::ArgError;
use crate::output::{OutputFormat, json, text, write_json};

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Only tasks of this trace
    #[arg(long, value_name = "TRACE_ID")]
    pub trace: Option<String>,
    /// Only direct subtasks of this task
    #[arg(long, value_name = "TASK_ID")]
    pub parent: Option<String>,
    /// Only tasks in this status (queued, running, completed, error, ...)
    #[arg(long, value_parser = parse_status)]
    pub status: Option<TaskStatus>,
    /// Only tasks of this agent
    #[arg(long)]
    pub agent: Option<String>,
    /// Only tasks of this tenant
    #[arg(long)]
    pub tenant: Option<String>,
    /// Most tasks to list; the coordinator caps it at 1000 [default: 50]
    #[arg(long, value_name = "N")]
    pub limit: Option<u32>,
}

pub async fn run(args: ListArgs) -> anyhow::Result<ExitCode> {
    let request = pb::ListRequest {
        trace_id: args.trace.unwrap_or_default(),
        parent_task_id: args.parent.unwrap_or_default(),
        // UNSPECIFIED (0) means any status.
        status: args.status.map_or(0, |s| pb::TaskStatus::from(s) as i32),
        agent: args.agent.unwrap_or_default(),
        limit: args.limit.unwrap_or(0),
        tenant: args.tenant.unwrap_or_default(),
    };
    let mut client = connect(&args.client).await?;
    let tasks = client.list(request).await?.into_inner().tasks;
    let mut out = std::io::stdout().lock();
    match args.client.output {
        OutputFormat::Json => write_json(&mut out, &tasks.iter().map(json::task).collect())?,
        OutputFormat::Text => out.write_all(text::task_table(&tasks).as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}

/// A status name as the API prints it; the error lists the valid ones.
fn parse_status(s: &str) -> Result<TaskStatus, ArgError> {
    s.parse().map_err(|_| {
        let names: Vec<&str> = TaskStatus::ALL.iter().map(|st| st.as_str()).collect();
        ArgError::UnknownStatus {
            status: s.to_owned(),
            expected: names.join(", "),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_filter_reads_api_names_and_lists_them_on_error() {
        assert_eq!(
            parse_status("deadline_exceeded").ok(),
            Some(TaskStatus::DeadlineExceeded)
        );
        let err = parse_status("done").expect_err("not a status").to_string();
        assert!(
            err.contains("completed") && err.contains("dead_lettered"),
            "{err}"
        );
    }
}
