use std::time::Instant;

use super::*;
use crate::tools::test_context;
use taskwire_definitions::permission::PermissionRule;

fn setup() -> (tempfile::TempDir, ToolContext<'static>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let workspace = Workspace::new(dir.path()).expect("workspace");
    (dir, test_context(workspace))
}

async fn bash(ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
    BashTool::default().execute(args, ctx).await
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

async fn assert_ended(dir: &tempfile::TempDir, pid_file: &str) {
    let pid = std::fs::read_to_string(dir.path().join(pid_file)).expect("pid file written");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ended(&pid) {
        assert!(
            Instant::now() < deadline,
            "process {} ({pid_file}) still running",
            pid.trim()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn bash_captures_both_streams_and_the_exit_code() {
    let (_dir, ctx) = setup();
    let out = bash(&ctx, json!({"command": "echo out; echo err >&2; exit 3"}))
        .await
        .expect("ran");
    assert!(out.output.contains("out"), "{}", out.output);
    assert!(out.output.contains("err"), "{}", out.output);
    assert!(out.output.ends_with("(exit code 3)"), "{}", out.output);
    assert_eq!(out.metadata["exit_code"], json!(3));

    let out = bash(&ctx, json!({"command": "true"})).await.expect("ran");
    assert_eq!(out.output, "(no output)\n(exit code 0)");
}

#[tokio::test]
async fn bash_runs_in_the_workspace_with_a_scrubbed_environment() {
    let (dir, ctx) = setup();
    let command = "pwd; echo \"home=$HOME term=$TERM\"; \
                   echo \"cargo=${CARGO_MANIFEST_DIR:-unset}\"; env | wc -l";
    let out = bash(&ctx, json!({"command": command})).await.expect("ran");
    let root = ctx.workspace.root().display().to_string();
    let lines: Vec<_> = out.output.lines().collect();
    assert_eq!(lines[0], root);
    assert_eq!(lines[1], format!("home={root} term=dumb"));
    // Cargo sets this for the test process; the command must not inherit it.
    assert_eq!(lines[2], "cargo=unset");
    let count: usize = lines[3].trim().parse().expect("a count");
    assert!(count <= 8, "only a handful of variables: {count}");
    drop(dir);
}

#[tokio::test]
async fn timeout_kills_the_command_and_everything_it_started() {
    let (dir, ctx) = setup();
    let started = Instant::now();
    let err = bash(
        &ctx,
        json!({
            "command": "echo $$ > leader; sleep 30 & echo $! > child; echo waiting; wait",
            "timeout": 500
        }),
    )
    .await
    .expect_err("timed out");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "returned promptly"
    );
    let message = err.to_string();
    assert!(
        message.starts_with("command timed out after 500 ms and was killed"),
        "{message}"
    );
    assert!(
        message.contains("waiting"),
        "output so far is kept: {message}"
    );
    assert_ended(&dir, "leader").await;
    assert_ended(&dir, "child").await;
}

#[tokio::test]
async fn cancellation_kills_the_command() {
    let (dir, ctx) = setup();
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let err = bash(
        &ctx,
        json!({"command": "echo $$ > leader; sleep 30 & echo $! > child; wait"}),
    )
    .await
    .expect_err("cancelled");
    assert!(matches!(err, ToolError::Cancelled), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_ended(&dir, "leader").await;
    assert_ended(&dir, "child").await;
}

#[tokio::test]
async fn dropping_the_call_kills_the_command() {
    let (dir, ctx) = setup();
    let call = bash(&ctx, json!({"command": "echo $$ > leader; sleep 30"}));
    // The session drops unfinished calls when it is cancelled mid-turn.
    let _ = tokio::time::timeout(Duration::from_millis(300), call).await;
    assert_ended(&dir, "leader").await;
}

#[tokio::test]
async fn background_jobs_do_not_outlive_the_call() {
    let (dir, ctx) = setup();
    let started = Instant::now();
    let out = bash(
        &ctx,
        json!({"command": "sleep 30 & echo $! > bg; echo started"}),
    )
    .await
    .expect("ran");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "did not wait for the job"
    );
    assert_eq!(out.output, "started\n(exit code 0)");
    assert_ended(&dir, "bg").await;
}

#[tokio::test]
async fn long_output_is_capped_keeping_head_and_tail() {
    let (_dir, ctx) = setup();
    let out = bash(
        &ctx,
        json!({"command": "echo first; head -c 200000 /dev/zero | tr '\\0' 'x'; echo; echo last"}),
    )
    .await
    .expect("ran");
    assert!(out.output.starts_with("first\n"), "head kept");
    assert!(out.output.ends_with("last\n(exit code 0)"), "tail kept");
    assert!(out.output.contains("bytes omitted"));
    assert!(out.output.len() < 31 * 1024, "{}", out.output.len());
    assert_eq!(out.metadata["truncated"], json!(true));
}

#[test]
fn patterns_are_the_simple_commands_and_titles_prefer_the_description() {
    let dir = tempfile::tempdir().expect("temp dir");
    let workspace = Workspace::new(dir.path()).expect("workspace");
    let args = json!({"command": " git status && rm -rf build ", "description": "Clean up"});
    assert_eq!(
        BashTool::default().patterns(&args, &workspace),
        ["git status", "rm -rf build"]
    );
    assert_eq!(
        BashTool::default().subject(&args, &workspace),
        "git status && rm -rf build"
    );
    assert_eq!(BashTool::default().title(&args), "Clean up");
    assert_eq!(BashTool::default().title(&json!({"command": "ls"})), "ls");
    assert_eq!(
        BashTool::default().patterns(&json!({"command": ""}), &workspace),
        [""]
    );
}

#[tokio::test]
async fn bad_timeouts_are_refused_and_huge_ones_capped() {
    let (_dir, ctx) = setup();
    let err = bash(&ctx, json!({"command": "true", "timeout": 0}))
        .await
        .expect_err("zero");
    assert!(err.to_string().contains("at least 1 ms"), "{err}");
    bash(&ctx, json!({"command": "true", "timeout": 99_999_999}))
        .await
        .expect("capped, not refused");
}

fn support_without_landlock() -> taskwire_sandbox::Support {
    taskwire_sandbox::Support {
        landlock_abi: 0,
        seccomp: true,
        process_limit: taskwire_sandbox::ProcessLimit::Rlimit,
    }
}

#[tokio::test]
async fn commands_are_refused_without_landlock_unless_the_sandbox_is_disabled() {
    let (dir, ctx) = setup();
    let args = json!({"command": "touch ran; echo ran"});
    let refusing = BashTool::new(CommandSandbox::new(
        support_without_landlock(),
        false,
        &[],
        Vec::new(),
    ));
    let err = refusing
        .execute(args.clone(), &ctx)
        .await
        .expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("landlock"), "{text}");
    assert!(text.contains("--unsafe-no-sandbox"), "{text}");
    assert!(!dir.path().join("ran").exists(), "the command ran");

    let unsafe_tool = BashTool::new(CommandSandbox::new(
        support_without_landlock(),
        true,
        &[],
        Vec::new(),
    ));
    let out = unsafe_tool.execute(args, &ctx).await.expect("ran");
    assert!(out.output.starts_with("ran"), "{}", out.output);
    assert!(dir.path().join("ran").exists());
}

#[tokio::test]
async fn a_network_rule_for_another_host_does_not_open_local_services() {
    let sandbox = CommandSandbox::probed();
    if let CommandSandbox::Refused { reason } = &sandbox {
        assert!(
            std::env::var_os("CI").is_none(),
            "sandbox required under CI: {reason}"
        );
        eprintln!("skipped: {reason}");
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("stand-in for nats");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let (_dir, ctx) = setup();
    let rules: &'static [PermissionRule] = Box::leak(Box::new([PermissionRule::new(
        "network",
        "example.com",
        taskwire_definitions::permission::PermissionAction::Allow,
    )]));
    let ctx = ToolContext {
        permissions: taskwire_definitions::permission::Permissions::new(rules, &[]),
        ..ctx
    };
    let command = format!(
        "echo \"proxy=${{HTTPS_PROXY:+set}}\"; exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected; \
         curl -sS --max-time 5 -o /dev/null -w '%{{http_code}}\\n' http://127.0.0.1:{port}/"
    );
    let out = BashTool::new(sandbox)
        .execute(json!({ "command": command }), &ctx)
        .await
        .expect("ran");
    assert!(out.output.contains("proxy=set"), "{}", out.output);
    assert!(!out.output.contains("connected"), "{}", out.output);
    assert!(out.output.contains("403"), "{}", out.output);
    assert!(listener.accept().is_err(), "reached: {}", out.output);
}
