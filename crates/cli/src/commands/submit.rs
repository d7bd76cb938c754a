//! `taskwire submit --agent NAME PROMPT...`: submits a task and prints its id; with
//! `--wait`, follows it (progress on stderr) and prints its result.

use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::Args;
use taskwire_protocol::value::json_to_struct;
use taskwire_protocol::{pb, time};

use crate::cli::ClientArgs;
use crate::commands::{Client, connect, exit_status, follow};
use crate::duration::Deadline;
use crate::errors::ArgError;
use crate::output::text::{self, ProgressPrinter};
use crate::output::{OutputFormat, json, write_json};

#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    #[command(flatten)]
    pub task: TaskOptions,
    /// Tenant the task belongs to [default: default]
    #[arg(long, display_order = 101)]
    pub tenant: Option<String>,
    /// Submitting again with the same key returns the first task instead of a new one
    #[arg(long, value_name = "KEY", display_order = 102)]
    pub idempotency_key: Option<String>,
    /// Finish by: a duration from now (30s, 5m, 1h30m) or an RFC 3339 time
    #[arg(long, value_name = "WHEN", display_order = 103)]
    pub deadline: Option<Deadline>,
    /// Make the task a subtask of this one (it joins the parent's trace)
    #[arg(long, value_name = "TASK_ID", display_order = 109)]
    pub parent: Option<String>,
    /// Continue this session: the task sees its earlier conversation
    #[arg(long, value_name = "ID", display_order = 110)]
    pub session: Option<String>,
    /// Start at this time (RFC 3339, e.g. 2026-12-01T03:00:00Z): the task waits `scheduled` until then and may be cancelled before it [default: at once]
    #[arg(long, value_name = "TIME", value_parser = parse_start_at, conflicts_with = "start_in", display_order = 115)]
    pub at: Option<DateTime<Utc>>,
    /// Start this long from now (30m, 2h): as --at
    #[arg(long = "in", value_name = "DURATION", display_order = 116)]
    pub start_in: Option<crate::duration::HumanDuration>,
    /// Follow the task until it finishes and print its result; exits 1 unless it completed
    #[arg(long, display_order = 118)]
    pub wait: bool,
    /// The prompt; its words are joined with spaces, and `-` reads it from stdin
    #[arg(required = true, value_name = "PROMPT")]
    pub prompt: Vec<String>,
}

/// The flags of the task itself, shared by `taskwire submit` and by `taskwire schedule
/// create|update` (the task each tick submits), so that both take them alike.
///
/// The display orders (100 and up) keep `taskwire submit --help` in the order it always
/// had: submit's own flags take the numbers in between.
#[derive(Debug, Args)]
pub struct TaskOptions {
    /// Agent that runs the task
    #[arg(long, value_name = "NAME", display_order = 100)]
    pub agent: String,
    /// Most model steps the session may take [default: the agent's]
    #[arg(long, value_name = "N", display_order = 104)]
    pub max_steps: Option<u32>,
    /// Most the task and all its descendants may spend, in US dollars at the workers' catalogue prices; when spent, running sessions end `budget_exceeded` (resumable) and no new child starts [default: the parent's, else no limit]
    #[arg(long, value_name = "USD", display_order = 105)]
    pub max_cost_usd: Option<f64>,
    /// Most tokens (input and output) the task and all its descendants may use; as --max-cost-usd [default: the parent's, else no limit]
    #[arg(long, value_name = "N", display_order = 106)]
    pub max_tokens: Option<u64>,
    /// Priority, 1 (highest) to 5 (lowest): orders the task's model calls waiting for a rate-limit slot; a child keeps or lowers its parent's [default: 3, or the parent's]
    #[arg(long, value_name = "1-5", value_parser = clap::value_parser!(u32).range(1..=5), display_order = 107)]
    pub priority: Option<u32>,
    /// Model to use [default: the agent's, else the worker's]
    #[arg(long, display_order = 108)]
    pub model: Option<String>,
    /// Most attempts (first run and retries) before the task is dead-lettered [default: the coordinator's, 3]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), display_order = 111)]
    pub max_attempts: Option<u32>,
    /// Capability (such as a tool name) the task is granted; repeatable, within the token's and the parent's [default: the parent's, else the token's]
    #[arg(long = "scope", value_name = "CAP", display_order = 112)]
    pub scopes: Vec<String>,
    /// Structured input: a JSON object, or @FILE to read one from a file
    #[arg(long, value_name = "JSON", value_parser = parse_input, display_order = 113)]
    pub input: Option<serde_json::Value>,
    /// JSON Schema file the final answer must satisfy; the answer is returned as JSON (`structured`)
    #[arg(long, value_name = "FILE", value_parser = read_output_schema, display_order = 114)]
    pub output_schema: Option<String>,
    /// POST the result to this URL when the task ends, signed with the tenant's webhook secret (https, public addresses, unless the coordinator allows others)
    #[arg(long, value_name = "URL", display_order = 117)]
    pub callback_url: Option<String>,
}

impl TaskOptions {
    /// A request with `prompt` and these options; every other field is left unset.
    pub fn request(&self, prompt: String) -> pb::SubmitRequest {
        pb::SubmitRequest {
            agent: self.agent.clone(),
            prompt,
            model: self.model.clone(),
            max_steps: self.max_steps,
            max_cost_usd: self.max_cost_usd,
            max_tokens: self.max_tokens,
            priority: self.priority.unwrap_or(0),
            max_attempts: self.max_attempts,
            auth_scope: self.scopes.clone(),
            input: self.input.as_ref().map(json_to_struct),
            output_schema: self.output_schema.clone().unwrap_or_default(),
            callback_url: self.callback_url.clone().unwrap_or_default(),
            ..Default::default()
        }
    }
}

pub async fn run(args: SubmitArgs) -> anyhow::Result<ExitCode> {
    let prompt = read_prompt(&args.prompt)?;
    let request = build_request(&args, prompt, Utc::now())?;
    let mut client = connect(&args.client).await?;
    let submitted = client.submit(request).await?.into_inner();
    print_or_follow(&mut client, submitted, args.client.output, args.wait).await
}

/// What `submit`, `run` and `schedule trigger` do once the task is accepted: print its id, or with `wait`
/// follow it (progress on stderr) and print its result, exiting 1 unless it completed.
pub async fn print_or_follow(
    client: &mut Client,
    submitted: pb::SubmitResponse,
    output: OutputFormat,
    wait: bool,
) -> anyhow::Result<ExitCode> {
    let as_json = output == OutputFormat::Json;
    if !wait {
        let mut out = std::io::stdout().lock();
        if as_json {
            write_json(&mut out, &json::submitted(&submitted))?;
        } else {
            writeln!(out, "{}", submitted.task_id)?;
        }
        return Ok(ExitCode::SUCCESS);
    }

    if !as_json {
        let note = if submitted.created {
            ""
        } else {
            " (already submitted with this idempotency key)"
        };
        eprintln!("task {} submitted{note}", submitted.task_id);
    }
    // The answer goes to stdout at the end, so the progress on stderr leaves out the
    // text deltas rather than showing the answer twice.
    let mut progress = ProgressPrinter::new(std::io::stderr(), false);
    let mut result = follow(client, &submitted.task_id, |p| {
        if as_json { Ok(()) } else { progress.event(p) }
    })
    .await?;
    progress.finish()?;
    if result.task_id.is_empty() {
        result.task_id = submitted.task_id;
    }
    if result.trace_id.is_empty() {
        result.trace_id = submitted.trace_id;
    }

    let mut out = std::io::stdout().lock();
    if as_json {
        write_json(&mut out, &json::result(&result))?;
    } else {
        eprintln!("{}", text::result_status_line(&result));
        eprint!("{}", text::error_lines(&result));
        out.write_all(text::answer(&result).as_bytes())?;
    }
    Ok(exit_status(&result))
}

/// The request for `args`, a deadline given as a duration counting from `now`.
fn build_request(
    args: &SubmitArgs,
    prompt: String,
    now: DateTime<Utc>,
) -> anyhow::Result<pb::SubmitRequest> {
    let deadline = args
        .deadline
        .map(|d| d.resolve(now))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let not_before = match (args.at, args.start_in) {
        (Some(at), _) => Some(at),
        (None, Some(d)) => Some(
            chrono::TimeDelta::from_std(d.0)
                .ok()
                .and_then(|d| now.checked_add_signed(d))
                .context("--in is too far in the future")?,
        ),
        (None, None) => None,
    };
    Ok(pb::SubmitRequest {
        tenant: args.tenant.clone().unwrap_or_default(),
        idempotency_key: args.idempotency_key.clone().unwrap_or_default(),
        deadline: deadline.map(time::to_wire),
        parent_task_id: args.parent.clone().unwrap_or_default(),
        resume_token: args.session.clone().unwrap_or_default(),
        not_before: not_before.map(time::to_wire),
        ..args.task.request(prompt)
    })
}

/// `--at TIME`: an RFC 3339 time.
fn parse_start_at(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("{e}; --at takes an RFC 3339 time such as 2026-12-01T03:00:00Z"))
}

/// `--output-schema FILE`: the file's text, which must be JSON (the coordinator checks
/// that it is a JSON Schema for an object).
pub fn read_output_schema(path: &str) -> Result<String, ArgError> {
    let text = std::fs::read_to_string(path).map_err(|source| ArgError::Read {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str::<serde_json::Value>(&text).map_err(|source| ArgError::NotJson {
        origin: path.to_owned(),
        source,
    })?;
    Ok(text)
}

/// The prompt words joined with spaces, or stdin for a lone `-`.
pub fn read_prompt(words: &[String]) -> anyhow::Result<String> {
    let prompt = if words == ["-"] {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("failed to read the prompt from stdin")?;
        s.trim_end().to_owned()
    } else {
        words.join(" ")
    };
    if prompt.trim().is_empty() {
        bail!("the prompt is empty");
    }
    Ok(prompt)
}

/// `--input`: a JSON object inline, or `@FILE`.
fn parse_input(s: &str) -> Result<serde_json::Value, ArgError> {
    let (text, origin) = match s.strip_prefix('@') {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| ArgError::Read {
                path: path.to_owned(),
                source,
            })?;
            (text, path.to_owned())
        }
        None => (s.to_owned(), "--input".to_owned()),
    };
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(source) => return Err(ArgError::NotJson { origin, source }),
    };
    if !value.is_object() {
        return Err(ArgError::NotObject { origin });
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        args: SubmitArgs,
    }

    fn parse(argv: &[&str]) -> SubmitArgs {
        crate::testing::parse::<Probe>(std::iter::once("submit").chain(argv.iter().copied()))
            .expect("valid flags")
            .args
    }

    #[test]
    fn prompt_words_are_joined_and_flags_fill_the_request() {
        let args = parse(&[
            "--agent",
            "build",
            "--max-steps",
            "5",
            "--max-cost-usd",
            "0.5",
            "--max-tokens",
            "20000",
            "--priority",
            "1",
            "--model",
            "m",
            "--input",
            r#"{"path": "src"}"#,
            "fix",
            "the",
            "bug",
        ]);
        let prompt = read_prompt(&args.prompt).expect("prompt");
        let req = build_request(&args, prompt, Utc::now()).expect("request");
        assert_eq!(req.agent, "build");
        assert_eq!(req.prompt, "fix the bug");
        assert_eq!(req.max_steps, Some(5));
        assert_eq!(req.max_cost_usd, Some(0.5));
        assert_eq!(req.max_tokens, Some(20_000));
        assert_eq!(req.priority, 1);
        assert_eq!(req.model.as_deref(), Some("m"));
        assert!(req.input.expect("input").fields.contains_key("path"));
        assert_eq!(req.deadline, None);
        assert!(req.tenant.is_empty() && req.parent_task_id.is_empty());
    }

    #[test]
    fn relative_deadline_is_sent_as_an_absolute_time() {
        let args = parse(&["--agent", "a", "--deadline", "5m", "go"]);
        let now = DateTime::from_timestamp(1_767_366_245, 0).expect("valid time");
        let req = build_request(&args, "go".to_owned(), now).expect("request");
        assert_eq!(req.deadline.map(|d| d.seconds), Some(1_767_366_245 + 300));
    }

    #[test]
    fn input_must_be_a_json_object() {
        assert!(parse_input(r#"{"a": 1}"#).is_ok());
        assert!(
            parse_input("[1, 2]")
                .expect_err("array")
                .to_string()
                .contains("json object")
        );
        assert!(
            parse_input("{nope")
                .expect_err("invalid")
                .to_string()
                .contains("not valid json")
        );
        assert!(
            crate::testing::parse::<Probe>(["submit", "--agent", "a", "--input", "3", "go"])
                .is_err()
        );
    }

    #[test]
    fn a_delayed_start_is_a_time_or_a_duration_from_now_never_both() {
        let now = Utc::now();
        let args = parse(&["--agent", "a", "--in", "30m", "go"]);
        let req = build_request(&args, "go".to_owned(), now).expect("request");
        assert_eq!(
            req.not_before.map(|t| t.seconds),
            Some((now + chrono::TimeDelta::minutes(30)).timestamp())
        );
        let args = parse(&["--agent", "a", "--at", "2026-12-01T03:00:00Z", "go"]);
        let req = build_request(&args, "go".to_owned(), now).expect("request");
        assert_eq!(req.not_before.map(|t| t.seconds), Some(1_796_094_000));
        let both = crate::testing::parse::<Probe>([
            "submit",
            "--agent",
            "a",
            "--at",
            "2026-12-01T03:00:00Z",
            "--in",
            "5m",
            "go",
        ]);
        assert!(both.is_err(), "--at and --in together are refused");
        let bad =
            crate::testing::parse::<Probe>(["submit", "--agent", "a", "--at", "tomorrow", "go"]);
        assert!(bad.is_err());
        let none =
            build_request(&parse(&["--agent", "a", "go"]), "go".to_owned(), now).expect("request");
        assert_eq!(none.not_before, None);
    }

    #[test]
    fn output_schema_is_read_from_a_json_file() {
        let dir = tempfile::tempdir().expect("dir");
        let schema = dir.path().join("schema.json");
        std::fs::write(&schema, r#"{"type": "object"}"#).expect("write");
        let path = schema.to_str().expect("utf-8 path");
        let args = parse(&["--agent", "a", "--output-schema", path, "go"]);
        let req = build_request(&args, "go".to_owned(), Utc::now()).expect("request");
        assert_eq!(req.output_schema, r#"{"type": "object"}"#);

        std::fs::write(&schema, "{nope").expect("write");
        let err = read_output_schema(path).expect_err("not json").to_string();
        assert!(err.contains("not valid json"), "{err}");
        assert!(
            read_output_schema("/nonexistent/schema.json")
                .expect_err("missing")
                .to_string()
                .contains("failed to read")
        );
    }

    #[test]
    fn help_lists_the_flags_in_their_usual_order() {
        // The task's flags are shared with `schedule create` (`TaskOptions`); their
        // display orders keep submit's own flags where they always were.
        let mut cli = <crate::Cli as clap::CommandFactory>::command();
        cli.build();
        let help = cli
            .find_subcommand_mut("submit")
            .expect("submit")
            .render_long_help()
            .to_string();
        let flags: Vec<&str> = help
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("--"))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(
            flags,
            [
                "addr",
                "output",
                "token",
                "tls-ca",
                "agent",
                "tenant",
                "idempotency-key",
                "deadline",
                "max-steps",
                "max-cost-usd",
                "max-tokens",
                "priority",
                "model",
                "parent",
                "session",
                "max-attempts",
                "scope",
                "input",
                "output-schema",
                "at",
                "in",
                "callback-url",
                "wait",
                "log-format",
            ]
        );
    }

    #[test]
    fn a_prompt_is_required() {
        assert!(crate::testing::parse::<Probe>(["submit", "--agent", "a"]).is_err());
        assert!(read_prompt(&["  ".to_owned()]).is_err());
    }
}
