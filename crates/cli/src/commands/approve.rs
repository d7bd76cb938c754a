//! `taskwire approve TASK_ID REQUEST_ID`: answers a running task's `approval_required`
//! event (`watch` prints the request id), and prints the task's status afterwards.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use taskwire_protocol::pb;

use crate::cli::ClientArgs;
use crate::commands::connect;
use crate::output::{OutputFormat, json, status_name, write_json};

#[derive(Debug, Args)]
pub struct ApproveArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// How to answer
    #[arg(long, value_enum, default_value_t = Answer::Once)]
    pub answer: Answer,
    /// Note for the model, such as why a call was rejected and what to do instead
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    /// The task that asked
    pub task_id: String,
    /// The request's id, from its approval_required event
    pub request_id: String,
}

/// The `--answer` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Answer {
    /// Allow this call
    Once,
    /// Allow this call and matching ones for the rest of the session
    Always,
    /// Refuse the call; --message tells the model why
    Reject,
}

impl From<Answer> for pb::ApprovalAnswer {
    fn from(a: Answer) -> Self {
        match a {
            Answer::Once => Self::Once,
            Answer::Always => Self::Always,
            Answer::Reject => Self::Reject,
        }
    }
}

pub async fn run(args: ApproveArgs) -> anyhow::Result<ExitCode> {
    let request = build_request(&args);
    let mut client = connect(&args.client).await?;
    let response = client.approve(request).await?.into_inner();
    let mut out = std::io::stdout().lock();
    match args.client.output {
        OutputFormat::Json => write_json(
            &mut out,
            &json::approved(&args.task_id, &args.request_id, &response),
        )?,
        OutputFormat::Text => writeln!(out, "{} {}", args.task_id, status_name(response.status))?,
    }
    Ok(ExitCode::SUCCESS)
}

fn build_request(args: &ApproveArgs) -> pb::ApproveRequest {
    pb::ApproveRequest {
        task_id: args.task_id.clone(),
        request_id: args.request_id.clone(),
        answer: pb::ApprovalAnswer::from(args.answer) as i32,
        message: args.message.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        args: ApproveArgs,
    }

    fn parse(argv: &[&str]) -> Result<ApproveArgs, clap::Error> {
        crate::testing::parse::<Probe>(std::iter::once("approve").chain(argv.iter().copied()))
            .map(|p| p.args)
    }

    #[test]
    fn answer_defaults_to_once() {
        let req = build_request(&parse(&["t1", "r1"]).expect("valid"));
        assert_eq!(req.task_id, "t1");
        assert_eq!(req.request_id, "r1");
        assert_eq!(req.answer, pb::ApprovalAnswer::Once as i32);
        assert_eq!(req.message, "");
    }

    #[test]
    fn answers_map_to_their_wire_values() {
        for (name, wire) in [
            ("once", pb::ApprovalAnswer::Once),
            ("always", pb::ApprovalAnswer::Always),
            ("reject", pb::ApprovalAnswer::Reject),
        ] {
            let args = parse(&["--answer", name, "t1", "r1"]).expect("valid");
            assert_eq!(build_request(&args).answer, wire as i32, "{name}");
        }
    }

    #[test]
    fn unknown_answers_are_usage_errors() {
        for bad in ["yes", "unspecified", ""] {
            assert!(parse(&["--answer", bad, "t1", "r1"]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_rejection_carries_its_message() {
        let args = parse(&[
            "t1",
            "r1",
            "--answer",
            "reject",
            "--message",
            "use the staging database",
        ])
        .expect("valid");
        let req = build_request(&args);
        assert_eq!(req.answer, pb::ApprovalAnswer::Reject as i32);
        assert_eq!(req.message, "use the staging database");
    }

    #[test]
    fn both_ids_are_required() {
        assert!(parse(&["t1"]).is_err());
    }
}
