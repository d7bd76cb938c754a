//! `taskwire watch TASK_ID`: a task's progress from the start, live, until its result.
//!
//! Text: one line per event (`step 1 started`, `tool grep [running] grep TODO in src`),
//! the answer's text inline as it is generated, then the result's status line and text.
//! JSON: one object per event (JSON Lines), the last with `"event": "result"`.
//! `--tree`: the task and its descendants, live ([`tree`]).

pub mod tree;

use std::io::Write;
use std::process::ExitCode;

use clap::Args;

use crate::cli::ClientArgs;
use crate::commands::{connect, exit_status, follow};
use crate::output::text::{self, ProgressPrinter};
use crate::output::{OutputFormat, json, write_json};

#[derive(Debug, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The task's id
    pub task_id: String,
    /// Draw the task's tree (status, current tool call and tokens per task), redrawn
    /// in place on a terminal; plain lines per change when stdout is not a terminal
    #[arg(long)]
    pub tree: bool,
}

/// Exits 0 when the task completed, 1 when it ended otherwise.
pub async fn run(args: WatchArgs) -> anyhow::Result<ExitCode> {
    let mut client = connect(&args.client).await?;
    if args.tree {
        if matches!(args.client.output, OutputFormat::Json) {
            anyhow::bail!("--tree draws text; for JSON Lines, watch each task without --tree");
        }
        let result = tree::run(&client, &args.task_id).await?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "result: {}", text::result_status_line(&result))?;
        out.write_all(text::error_lines(&result).as_bytes())?;
        out.write_all(text::answer(&result).as_bytes())?;
        return Ok(exit_status(&result));
    }
    let result = match args.client.output {
        OutputFormat::Json => {
            let result = follow(&mut client, &args.task_id, |p| {
                write_json(&mut std::io::stdout().lock(), &json::progress(p))
            })
            .await?;
            write_json(&mut std::io::stdout().lock(), &json::watch_result(&result))?;
            result
        }
        OutputFormat::Text => {
            let mut progress = ProgressPrinter::new(std::io::stdout(), true);
            let result = follow(&mut client, &args.task_id, |p| progress.event(p)).await?;
            progress.finish()?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "result: {}", text::result_status_line(&result))?;
            out.write_all(text::error_lines(&result).as_bytes())?;
            out.write_all(text::answer(&result).as_bytes())?;
            result
        }
    };
    Ok(exit_status(&result))
}
