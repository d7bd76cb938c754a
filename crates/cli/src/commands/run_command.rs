//! `taskwire run /NAME [ARGS...]`: runs a slash command, defined in the coordinator's
//! `commands/*.md`, as a task; prints its id, or with `--wait` follows it and prints
//! its result exactly as `submit --wait` does.
//!
//! The words after the name are joined with spaces into the command's arguments
//! (`$ARGUMENTS`, `$1`..`$9` in its template); put them after `--` when one starts with
//! a dash (`taskwire run /test --wait -- -v`).

use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::Args;
use taskwire_protocol::{pb, time};

use crate::cli::ClientArgs;
use crate::commands::connect;
use crate::commands::submit::print_or_follow;
use crate::duration::Deadline;
use crate::errors::ArgError;

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Tenant the task belongs to [default: default]
    #[arg(long)]
    pub tenant: Option<String>,
    /// Continue this session (for commands that prompt their agent)
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Make the task a subtask of this one (it joins the parent's trace)
    #[arg(long, value_name = "TASK_ID")]
    pub parent: Option<String>,
    /// Model to use [default: the command's, else the agent's, else the worker's]
    #[arg(long)]
    pub model: Option<String>,
    /// Finish by: a duration from now (30s, 5m, 1h30m) or an RFC 3339 time
    #[arg(long, value_name = "WHEN")]
    pub deadline: Option<Deadline>,
    /// Running again with the same key returns the first task instead of a new one
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
    /// JSON Schema file the final answer must satisfy; the answer is returned as JSON (`structured`)
    #[arg(long, value_name = "FILE", value_parser = crate::commands::submit::read_output_schema)]
    pub output_schema: Option<String>,
    /// Follow the task until it finishes and print its result; exits 1 unless it completed
    #[arg(long)]
    pub wait: bool,
    /// The command's name, with or without the leading `/`
    #[arg(value_name = "NAME", value_parser = parse_command_name)]
    pub command: String,
    /// The command's arguments; the words are joined with spaces
    #[arg(value_name = "ARGS")]
    pub arguments: Vec<String>,
}

pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let request = build_request(&args, Utc::now())?;
    let mut client = connect(&args.client).await?;
    let submitted = client.run_command(request).await?.into_inner();
    print_or_follow(&mut client, submitted, args.client.output, args.wait).await
}

/// The request for `args`, a deadline given as a duration counting from `now`.
fn build_request(args: &RunArgs, now: DateTime<Utc>) -> anyhow::Result<pb::RunCommandRequest> {
    let deadline = args
        .deadline
        .map(|d| d.resolve(now))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    Ok(pb::RunCommandRequest {
        command: args.command.clone(),
        arguments: join_arguments(&args.arguments),
        tenant: args.tenant.clone().unwrap_or_default(),
        parent_task_id: args.parent.clone().unwrap_or_default(),
        session_id: args.session.clone().unwrap_or_default(),
        model: args.model.clone(),
        deadline: deadline.map(time::to_wire),
        idempotency_key: args.idempotency_key.clone().unwrap_or_default(),
        output_schema: args.output_schema.clone().unwrap_or_default(),
    })
}

/// The words joined with spaces; a word the shell kept whole though it holds spaces
/// or quotes (`taskwire run /x "two words"`) is quoted again, so it stays one
/// argument (`$1`) for the template.
fn join_arguments(words: &[String]) -> String {
    let quoted: Vec<String> = words
        .iter()
        .map(|w| {
            if w.is_empty() || w.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
                format!("\"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""))
            } else {
                w.clone()
            }
        })
        .collect();
    quoted.join(" ")
}

/// `/review` or `review`, kept as typed; a lone `/` or blank name is a usage error.
fn parse_command_name(s: &str) -> Result<String, ArgError> {
    let name = s.trim();
    if name.trim_start_matches('/').is_empty() {
        return Err(ArgError::EmptyCommandName);
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        args: RunArgs,
    }

    fn parse(argv: &[&str]) -> Result<RunArgs, clap::Error> {
        crate::testing::parse::<Probe>(std::iter::once("run").chain(argv.iter().copied()))
            .map(|p| p.args)
    }

    fn request(argv: &[&str]) -> pb::RunCommandRequest {
        build_request(&parse(argv).expect("valid command line"), Utc::now()).expect("request")
    }

    #[test]
    fn words_after_the_name_are_joined_into_the_arguments() {
        let req = request(&["/review", "src/lib.rs", "be", "strict"]);
        assert_eq!(req.command, "/review");
        assert_eq!(req.arguments, "src/lib.rs be strict");
    }

    #[test]
    fn an_argument_the_shell_kept_whole_stays_one_word() {
        let req = request(&["/rename", "old name", "new", r#"say "hi""#]);
        assert_eq!(req.arguments, r#""old name" new "say \"hi\"""#);
    }

    #[test]
    fn the_name_may_omit_the_slash() {
        let req = request(&["review"]);
        assert_eq!(req.command, "review");
        assert_eq!(req.arguments, "");
    }

    #[test]
    fn flags_fill_the_request_wherever_they_stand() {
        let req = request(&[
            "/test",
            "--session",
            "s-1",
            "unit",
            "--parent",
            "p-1",
            "--model",
            "m",
            "--idempotency-key",
            "k",
            "--tenant",
            "acme",
            "--wait",
        ]);
        assert_eq!(req.command, "/test");
        assert_eq!(req.arguments, "unit");
        assert_eq!(req.session_id, "s-1");
        assert_eq!(req.parent_task_id, "p-1");
        assert_eq!(req.model.as_deref(), Some("m"));
        assert_eq!(req.idempotency_key, "k");
        assert_eq!(req.tenant, "acme");
        assert!(parse(&["/test", "--wait"]).expect("valid").wait);
    }

    #[test]
    fn unset_flags_leave_the_server_defaults() {
        let req = request(&["/test"]);
        assert_eq!(req.model, None);
        assert_eq!(req.deadline, None);
        assert!(req.session_id.is_empty() && req.parent_task_id.is_empty());
        assert!(req.tenant.is_empty() && req.idempotency_key.is_empty());
    }

    #[test]
    fn arguments_that_look_like_flags_follow_a_double_dash() {
        let req = request(&["/test", "--", "-v", "--release"]);
        assert_eq!(req.arguments, "-v --release");
        assert!(parse(&["/test", "-v"]).is_err());
    }

    #[test]
    fn relative_deadline_is_sent_as_an_absolute_time() {
        let args = parse(&["/test", "--deadline", "5m"]).expect("valid");
        let now = DateTime::from_timestamp(1_767_366_245, 0).expect("valid time");
        let req = build_request(&args, now).expect("request");
        assert_eq!(req.deadline.map(|d| d.seconds), Some(1_767_366_245 + 300));
    }

    #[test]
    fn a_command_name_is_required() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["/"]).is_err());
        assert!(parse(&[" "]).is_err());
    }
}
