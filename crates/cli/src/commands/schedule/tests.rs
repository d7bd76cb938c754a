use std::time::Duration;

use clap::CommandFactory;
use pb::schedule_spec::Cadence;

use super::*;
use crate::cli::{Cli, Command};

fn parse(argv: &[&str]) -> Result<ScheduleCommand, clap::Error> {
    let cli: Cli = crate::testing::parse(["taskwire", "schedule"].iter().chain(argv).copied())?;
    let Command::Schedule(args) = cli.command else {
        panic!("expected schedule")
    };
    Ok(args.command)
}

fn create(argv: &[&str]) -> SpecArgs {
    match parse(&[&["create"], argv].concat()).expect("valid flags") {
        ScheduleCommand::Create(args) => args,
        other => panic!("expected create, got {other:?}"),
    }
}

fn spec(argv: &[&str]) -> pb::ScheduleSpec {
    let args = create(argv);
    let prompt = read_prompt(&args.prompt).expect("prompt");
    build_spec(&args, prompt)
}

fn error(argv: &[&str]) -> String {
    parse(argv).expect_err("refused").to_string()
}

#[test]
fn create_takes_a_cron_expression_or_an_interval() {
    let cron = spec(&["nightly", "--cron", "0 3 * * *", "--agent", "a", "go"]);
    assert_eq!(cron.cadence, Some(Cadence::Cron("0 3 * * *".to_owned())));
    let every = spec(&["poll", "--every", "15m", "--agent", "a", "go"]);
    assert_eq!(
        every.cadence,
        Some(Cadence::Every(prost_types::Duration {
            seconds: 900,
            nanos: 0
        }))
    );
    let bad = error(&["create", "poll", "--every", "soon", "--agent", "a", "go"]);
    assert!(bad.contains("invalid duration"), "{bad}");
}

#[test]
fn create_takes_exactly_one_of_cron_and_every() {
    let both = error(&[
        "create",
        "n",
        "--cron",
        "* * * * *",
        "--every",
        "1s",
        "--agent",
        "a",
        "go",
    ]);
    assert!(both.contains("cannot be used with"), "{both}");
    let neither = error(&["create", "n", "--agent", "a", "go"]);
    assert!(
        neither.contains("--cron <EXPR>|--every <DURATION>"),
        "{neither}"
    );
}

#[test]
fn policies_take_their_names_and_default_to_skip() {
    let defaults = spec(&["n", "--every", "1m", "--agent", "a", "go"]);
    assert_eq!(defaults.overlap, pb::ScheduleOverlap::Skip as i32);
    assert_eq!(defaults.catch_up, pb::ScheduleCatchUp::Skip as i32);
    assert_eq!(defaults.catch_up_window, None);
    for (name, overlap) in [
        ("allow", pb::ScheduleOverlap::Allow),
        ("skip", pb::ScheduleOverlap::Skip),
        ("cancel_previous", pb::ScheduleOverlap::CancelPrevious),
        ("queue_one", pb::ScheduleOverlap::QueueOne),
    ] {
        let s = spec(&[
            "n",
            "--every",
            "1m",
            "--overlap",
            name,
            "--agent",
            "a",
            "go",
        ]);
        assert_eq!(s.overlap, overlap as i32, "{name}");
    }
    for (name, catch_up) in [
        ("skip", pb::ScheduleCatchUp::Skip),
        ("one", pb::ScheduleCatchUp::One),
        ("all", pb::ScheduleCatchUp::All),
    ] {
        let s = spec(&[
            "n",
            "--every",
            "1m",
            "--catch-up",
            name,
            "--agent",
            "a",
            "go",
        ]);
        assert_eq!(s.catch_up, catch_up as i32, "{name}");
    }
    let kebab = error(&[
        "create",
        "n",
        "--every",
        "1m",
        "--overlap",
        "cancel-previous",
        "--agent",
        "a",
        "go",
    ]);
    assert!(kebab.contains("cancel_previous"), "{kebab}");
    let windowed = spec(&[
        "n",
        "--every",
        "1m",
        "--catch-up",
        "all",
        "--catch-up-window",
        "2h",
        "--agent",
        "a",
        "go",
    ]);
    assert_eq!(
        windowed.catch_up_window,
        Some(prost_types::Duration {
            seconds: 7200,
            nanos: 0
        })
    );
}

#[test]
fn deadline_is_a_duration_after_each_tick_never_a_time() {
    let s = spec(&[
        "n",
        "--every",
        "1h",
        "--deadline",
        "30m",
        "--agent",
        "a",
        "go",
    ]);
    assert_eq!(
        s.task_timeout,
        Some(prost_types::Duration {
            seconds: 1800,
            nanos: 0
        })
    );
    let task = s.task.expect("task");
    assert_eq!(task.deadline, None, "the coordinator sets it at each tick");
    let time = error(&[
        "create",
        "n",
        "--every",
        "1h",
        "--deadline",
        "2026-12-01T03:00:00Z",
        "--agent",
        "a",
        "go",
    ]);
    assert!(
        time.contains("duration after each tick") && time.contains("not a time"),
        "{time}"
    );
    let zero = error(&[
        "create",
        "n",
        "--every",
        "1h",
        "--deadline",
        "0s",
        "--agent",
        "a",
        "go",
    ]);
    assert!(zero.contains("more than zero"), "{zero}");
    assert_eq!(
        parse_task_timeout("1h30m").ok(),
        Some(HumanDuration(Duration::from_secs(5400)))
    );
}

#[test]
fn prompt_words_are_joined_and_task_flags_fill_the_spec() {
    let s = spec(&[
        "nightly",
        "--cron",
        "0 3 * * *",
        "--tz",
        "Europe/Berlin",
        "--paused",
        "--agent",
        "general",
        "--max-steps",
        "5",
        "--max-cost-usd",
        "0.5",
        "--max-tokens",
        "20000",
        "--priority",
        "2",
        "--model",
        "m",
        "--max-attempts",
        "1",
        "--scope",
        "read",
        "--scope",
        "grep",
        "--input",
        r#"{"path": "src"}"#,
        "--callback-url",
        "https://example.com/hook",
        "summarise",
        "the",
        "day",
    ]);
    assert_eq!(s.name, "nightly");
    assert_eq!(s.time_zone, "Europe/Berlin");
    assert!(s.paused);
    assert_eq!(s.task_timeout, None);
    let task = s.task.expect("task");
    assert_eq!(task.agent, "general");
    assert_eq!(task.prompt, "summarise the day");
    assert_eq!(task.max_steps, Some(5));
    assert_eq!(task.max_cost_usd, Some(0.5));
    assert_eq!(task.max_tokens, Some(20_000));
    assert_eq!(task.priority, 2);
    assert_eq!(task.model.as_deref(), Some("m"));
    assert_eq!(task.max_attempts, Some(1));
    assert_eq!(task.auth_scope, ["read", "grep"]);
    assert!(task.input.expect("input").fields.contains_key("path"));
    assert_eq!(task.callback_url, "https://example.com/hook");
    assert!(task.idempotency_key.is_empty() && task.not_before.is_none());
    assert!(task.parent_task_id.is_empty() && task.resume_token.is_empty());
}

#[test]
fn tenant_names_the_schedule_and_its_task() {
    let s = spec(&[
        "n", "--every", "1m", "--tenant", "acme", "--agent", "a", "go",
    ]);
    assert_eq!(s.tenant, "acme");
    assert_eq!(s.task.expect("task").tenant, "acme");
    let s = spec(&["n", "--every", "1m", "--agent", "a", "go"]);
    assert!(
        s.tenant.is_empty(),
        "the caller's, as the coordinator decides"
    );
    assert!(s.task.expect("task").tenant.is_empty());
}

#[test]
fn an_agent_and_a_prompt_are_required() {
    let no_agent = error(&["create", "n", "--every", "1m", "go"]);
    assert!(no_agent.contains("--agent"), "{no_agent}");
    let no_prompt = error(&["create", "n", "--every", "1m", "--agent", "a"]);
    assert!(no_prompt.contains("PROMPT"), "{no_prompt}");
}

#[test]
fn submit_only_flags_are_not_offered() {
    for flag in [
        ["--idempotency-key", "k"],
        ["--parent", "t1"],
        ["--session", "s1"],
        ["--at", "2026-12-01T03:00:00Z"],
        ["--in", "5m"],
    ] {
        let err = error(
            &[
                &["create", "n", "--every", "1m", "--agent", "a"][..],
                &flag,
                &["go"],
            ]
            .concat(),
        );
        assert!(err.contains("unexpected argument"), "{flag:?}: {err}");
    }
}

#[test]
fn update_takes_the_same_flags_as_create() {
    let ScheduleCommand::Update(args) = parse(&[
        "update",
        "nightly",
        "--cron",
        "0 4 * * *",
        "--overlap",
        "queue_one",
        "--agent",
        "a",
        "--deadline",
        "1h",
        "go",
    ])
    .expect("valid flags") else {
        panic!("expected update")
    };
    let s = build_spec(&args, "go".to_owned());
    assert_eq!(s.name, "nightly");
    assert_eq!(s.cadence, Some(Cadence::Cron("0 4 * * *".to_owned())));
    assert_eq!(s.overlap, pb::ScheduleOverlap::QueueOne as i32);
    assert!(s.task_timeout.is_some());
    let create = Cli::command();
    let schedule = create.find_subcommand("schedule").expect("schedule");
    let flags = |name: &str| -> Vec<String> {
        let mut ids: Vec<String> = schedule
            .find_subcommand(name)
            .expect(name)
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(flags("create"), flags("update"));
}

#[test]
fn name_commands_take_a_tenant_and_the_client_flags() {
    for command in ["get", "pause", "resume", "rm", "trigger"] {
        let parsed = parse(&[
            command,
            "--tenant",
            "acme",
            "--addr",
            "http://h:1",
            "--output",
            "json",
            "nightly",
        ])
        .expect("valid flags");
        let args = match parsed {
            ScheduleCommand::Get(a)
            | ScheduleCommand::Pause(a)
            | ScheduleCommand::Resume(a)
            | ScheduleCommand::Rm(a) => a,
            ScheduleCommand::Trigger(t) => {
                assert!(!t.wait);
                t.schedule
            }
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(args.name, "nightly", "{command}");
        assert_eq!(args.tenant.as_deref(), Some("acme"), "{command}");
        assert_eq!(args.client.addr, "http://h:1", "{command}");
        assert_eq!(args.client.output, OutputFormat::Json, "{command}");
        assert!(parse(&[command]).is_err(), "{command} needs a name");
    }
    let ScheduleCommand::Trigger(t) = parse(&["trigger", "--wait", "nightly"]).expect("valid")
    else {
        panic!("expected trigger")
    };
    assert!(t.wait);
    let ScheduleCommand::Ls(ls) = parse(&["ls", "--tenant", "acme"]).expect("valid") else {
        panic!("expected ls")
    };
    assert_eq!(ls.tenant.as_deref(), Some("acme"));
}
