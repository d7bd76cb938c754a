//! `taskwire schedule create|update|ls|get|pause|resume|trigger|rm`: schedules, tasks
//! the coordinator submits at every tick of a cron expression or an interval.
//!
//! `create` and `update` take the task's flags as `submit` does ([`TaskOptions`]), and
//! `--deadline` as a duration after each tick (the spec's `task_timeout`); `update`
//! replaces the whole spec. The commands that answer a schedule print it as `get` does
//! ([`text::schedule_summary`], [`json::schedule`]); `trigger` prints the task it
//! submitted as `submit` does.

#[cfg(test)]
mod tests;

use std::io::Write;
use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand, ValueEnum};
use taskwire_protocol::pb;

use crate::cli::ClientArgs;
use crate::commands::connect;
use crate::commands::submit::{TaskOptions, print_or_follow, read_prompt};
use crate::duration::{HumanDuration, parse_duration};
use crate::output::{OutputFormat, json, text, write_json};

#[derive(Debug, Args)]
pub struct ScheduleArgs {
    #[command(subcommand)]
    pub command: ScheduleCommand,
}

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Create a schedule: the coordinator submits its task at every tick of a cron expression or an interval
    Create(SpecArgs),
    /// Replace a schedule's whole spec (flags left out take their defaults); its next tick is the first after now
    Update(SpecArgs),
    /// List schedules by name, with their next tick and last run
    Ls(ListArgs),
    /// Show a schedule: its spec, next ticks and recent runs
    Get(NameArgs),
    /// Stop a schedule's ticks until it is resumed; ticks while it is paused never fire
    Pause(NameArgs),
    /// Resume a paused schedule from its first tick after now
    Resume(NameArgs),
    /// Fire a schedule now, outside its cadence, and print the task's id, or with --wait its result
    Trigger(TriggerArgs),
    /// Delete a schedule; the tasks it started are left as they are
    Rm(NameArgs),
}

/// The spec of `create` and `update`.
#[derive(Debug, Args)]
pub struct SpecArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The schedule's name, unique within its tenant: letters, digits, '-', '_' and '.'
    #[arg(value_name = "NAME")]
    pub name: String,
    #[command(flatten)]
    pub cadence: CadenceArgs,
    /// IANA time zone the cron expression is read in, such as Europe/Berlin [default: UTC]
    #[arg(long = "tz", value_name = "ZONE")]
    pub time_zone: Option<String>,
    /// What a tick does while the previous run's task is still going
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = Overlap::Skip)]
    pub overlap: Overlap,
    /// What happens to ticks missed while no coordinator ran
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = CatchUp::Skip)]
    pub catch_up: CatchUp,
    /// With --catch-up all: how far back a missed tick still runs [default: 1h]
    #[arg(long, value_name = "DURATION")]
    pub catch_up_window: Option<HumanDuration>,
    /// Leave the schedule paused until `taskwire schedule resume`; an update without it leaves the schedule active
    #[arg(long)]
    pub paused: bool,
    /// Tenant the schedule and its tasks belong to [default: default]
    #[arg(long)]
    pub tenant: Option<String>,
    #[command(flatten)]
    pub task: TaskOptions,
    /// Each task must finish this long after its tick (30m, 2h) [default: no deadline]
    #[arg(long, value_name = "DURATION", value_parser = parse_task_timeout, display_order = 103)]
    pub deadline: Option<HumanDuration>,
    /// The prompt each tick submits; its words are joined with spaces, and `-` reads it from stdin
    #[arg(required = true, value_name = "PROMPT")]
    pub prompt: Vec<String>,
}

/// When a schedule ticks: exactly one of a cron expression and an interval.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct CadenceArgs {
    /// Cron expression, read in --tz: 5 fields (minute first), 6 (seconds first) or an alias such as @hourly
    #[arg(long, value_name = "EXPR")]
    pub cron: Option<String>,
    /// Interval, at least 1s (30s, 15m, 1h): ticks at its multiples since the Unix epoch
    #[arg(long, value_name = "DURATION")]
    pub every: Option<HumanDuration>,
}

/// `--overlap`: what a tick does while the previous run's task is still going.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum Overlap {
    /// Start the tick's task anyway
    Allow,
    /// Do not start this tick
    Skip,
    /// Cancel the previous task, then start
    CancelPrevious,
    /// Start this tick when the previous task ends; at most one tick waits
    QueueOne,
}

impl From<Overlap> for pb::ScheduleOverlap {
    fn from(o: Overlap) -> Self {
        match o {
            Overlap::Allow => Self::Allow,
            Overlap::Skip => Self::Skip,
            Overlap::CancelPrevious => Self::CancelPrevious,
            Overlap::QueueOne => Self::QueueOne,
        }
    }
}

/// `--catch-up`: what happens to ticks missed while no coordinator ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum CatchUp {
    /// Missed ticks never run
    Skip,
    /// The latest missed tick runs once
    One,
    /// Every missed tick within --catch-up-window runs, oldest first
    All,
}

impl From<CatchUp> for pb::ScheduleCatchUp {
    fn from(c: CatchUp) -> Self {
        match c {
            CatchUp::Skip => Self::Skip,
            CatchUp::One => Self::One,
            CatchUp::All => Self::All,
        }
    }
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Only this tenant's schedules [default: the token's tenant; every tenant's when the coordinator has no authentication]
    #[arg(long)]
    pub tenant: Option<String>,
}

/// A schedule named within its tenant.
#[derive(Debug, Args)]
pub struct NameArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Tenant the schedule belongs to [default: default]
    #[arg(long)]
    pub tenant: Option<String>,
    /// The schedule's name
    #[arg(value_name = "NAME")]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct TriggerArgs {
    #[command(flatten)]
    pub schedule: NameArgs,
    /// Follow the task until it finishes and print its result; exits 1 unless it completed
    #[arg(long)]
    pub wait: bool,
}

pub async fn run(args: ScheduleArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ScheduleCommand::Create(args) => create_or_update(args, false).await,
        ScheduleCommand::Update(args) => create_or_update(args, true).await,
        ScheduleCommand::Ls(args) => list(args).await,
        ScheduleCommand::Get(args) => {
            let mut client = connect(&args.client).await?;
            let request = pb::GetScheduleRequest {
                name: args.name,
                tenant: args.tenant.unwrap_or_default(),
            };
            let schedule = client.get_schedule(request).await?.into_inner();
            write_schedule(args.client.output, &schedule)
        }
        ScheduleCommand::Pause(args) => {
            let mut client = connect(&args.client).await?;
            let request = pb::PauseScheduleRequest {
                name: args.name,
                tenant: args.tenant.unwrap_or_default(),
            };
            let schedule = client.pause_schedule(request).await?.into_inner();
            write_schedule(args.client.output, &schedule)
        }
        ScheduleCommand::Resume(args) => {
            let mut client = connect(&args.client).await?;
            let request = pb::ResumeScheduleRequest {
                name: args.name,
                tenant: args.tenant.unwrap_or_default(),
            };
            let schedule = client.resume_schedule(request).await?.into_inner();
            write_schedule(args.client.output, &schedule)
        }
        ScheduleCommand::Trigger(TriggerArgs { schedule, wait }) => {
            let mut client = connect(&schedule.client).await?;
            let request = pb::TriggerScheduleRequest {
                name: schedule.name,
                tenant: schedule.tenant.unwrap_or_default(),
            };
            let submitted = client.trigger_schedule(request).await?.into_inner();
            print_or_follow(&mut client, submitted, schedule.client.output, wait).await
        }
        ScheduleCommand::Rm(args) => {
            let mut client = connect(&args.client).await?;
            let request = pb::DeleteScheduleRequest {
                name: args.name.clone(),
                tenant: args.tenant.unwrap_or_default(),
            };
            client.delete_schedule(request).await?;
            if args.client.output == OutputFormat::Text {
                eprintln!("deleted schedule {}", args.name);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn create_or_update(args: SpecArgs, update: bool) -> anyhow::Result<ExitCode> {
    let prompt = read_prompt(&args.prompt)?;
    let spec = Some(build_spec(&args, prompt));
    let mut client = connect(&args.client).await?;
    let schedule = if update {
        client
            .update_schedule(pb::UpdateScheduleRequest { spec })
            .await?
    } else {
        client
            .create_schedule(pb::CreateScheduleRequest { spec })
            .await?
    };
    write_schedule(args.client.output, &schedule.into_inner())
}

async fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let mut client = connect(&args.client).await?;
    let request = pb::ListSchedulesRequest {
        tenant: args.tenant.unwrap_or_default(),
    };
    let schedules = client.list_schedules(request).await?.into_inner().schedules;
    let mut out = std::io::stdout().lock();
    match args.client.output {
        OutputFormat::Json => {
            write_json(&mut out, &schedules.iter().map(json::schedule).collect())?
        }
        OutputFormat::Text => out.write_all(text::schedule_table(&schedules).as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints a schedule as `get` shows it: a text summary, or one JSON object.
fn write_schedule(output: OutputFormat, schedule: &pb::Schedule) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match output {
        OutputFormat::Json => write_json(&mut out, &json::schedule(schedule))?,
        OutputFormat::Text => {
            out.write_all(text::schedule_summary(schedule, Utc::now()).as_bytes())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The spec `create` or `update` sends for `args`, each tick submitting `prompt`. The
/// tenant names both the schedule and its task.
pub fn build_spec(args: &SpecArgs, prompt: String) -> pb::ScheduleSpec {
    use pb::schedule_spec::Cadence;
    let tenant = args.tenant.clone().unwrap_or_default();
    // clap lets exactly one through.
    let cadence = match (&args.cadence.cron, args.cadence.every) {
        (Some(cron), _) => Some(Cadence::Cron(cron.clone())),
        (None, Some(every)) => Some(Cadence::Every(wire_duration(every))),
        (None, None) => None,
    };
    pb::ScheduleSpec {
        name: args.name.clone(),
        cadence,
        time_zone: args.time_zone.clone().unwrap_or_default(),
        overlap: pb::ScheduleOverlap::from(args.overlap) as i32,
        catch_up: pb::ScheduleCatchUp::from(args.catch_up) as i32,
        catch_up_window: args.catch_up_window.map(wire_duration),
        task: Some(pb::SubmitRequest {
            tenant: tenant.clone(),
            ..args.task.request(prompt)
        }),
        task_timeout: args.deadline.map(wire_duration),
        tenant,
        paused: args.paused,
    }
}

/// A duration as the API takes it; one too long for it is sent as the longest it
/// takes, for the coordinator to refuse.
fn wire_duration(d: HumanDuration) -> prost_types::Duration {
    prost_types::Duration::try_from(d.0).unwrap_or(prost_types::Duration {
        seconds: i64::MAX,
        nanos: 999_999_999,
    })
}

/// `--deadline` of a schedule: a duration, counted from each tick. An RFC 3339 time,
/// which `submit --deadline` takes, is refused by name: a schedule's tasks each have
/// their own deadline.
fn parse_task_timeout(s: &str) -> Result<HumanDuration, String> {
    if DateTime::parse_from_rfc3339(s.trim()).is_ok() {
        return Err(
            "a schedule's --deadline is a duration after each tick, such as 30m or \
             2h, not a time: each task must finish that long after its tick"
                .to_owned(),
        );
    }
    let d = parse_duration(s).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err(format!("invalid deadline {s:?}: it must be more than zero"));
    }
    Ok(HumanDuration(d))
}
