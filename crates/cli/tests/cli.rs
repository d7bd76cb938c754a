//! The `taskwire` binary as scripts and deployments use it, without services: config
//! layering through `--print-config`, secret redaction, exit statuses and signals.
//! Every run starts from an empty environment so the machine's `TASKWIRE_*` cannot leak in.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn taskwire() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_taskwire"));
    cmd.env_clear();
    cmd
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("taskwire runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("utf-8 stderr")
}

fn config_file(text: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(text.as_bytes()).expect("write config");
    file
}

/// `taskwire worker --print-config` with `env` and `flags`: the effective config.
fn print_worker(env: &[(&str, &str)], flags: &[&str]) -> String {
    let out = run(taskwire()
        .args(["worker", "--print-config"])
        .args(flags)
        .envs(env.iter().copied()));
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("local addr").port()
}

#[test]
fn worker_settings_layer_flag_over_env_over_file_over_default() {
    let file = config_file("[worker]\nconcurrency = 2\nqueue = \"from-file\"\n");
    let path = file.path().to_str().expect("utf-8 path");

    assert!(
        print_worker(&[], &[]).contains("concurrency = 16\n"),
        "default"
    );
    let from_file = print_worker(&[], &["--config", path]);
    assert!(
        from_file.contains("concurrency = 2\n") && from_file.contains("queue = \"from-file\""),
        "{from_file}"
    );
    let env = [("TASKWIRE_CONFIG", path), ("TASKWIRE_CONCURRENCY", "4")];
    let from_env = print_worker(&env, &[]);
    assert!(
        from_env.contains("concurrency = 4\n"),
        "env beats file: {from_env}"
    );
    assert!(
        from_env.contains("queue = \"from-file\""),
        "the file still fills other fields: {from_env}"
    );
    assert!(
        print_worker(&env, &["--concurrency", "8"]).contains("concurrency = 8\n"),
        "flag beats env"
    );
}

#[test]
fn unsafe_no_sandbox_is_off_by_default_and_set_by_flag_env_or_file() {
    assert!(print_worker(&[], &[]).contains("unsafe_no_sandbox = false\n"));
    assert!(print_worker(&[], &["--unsafe-no-sandbox"]).contains("unsafe_no_sandbox = true\n"));
    assert!(
        print_worker(&[("TASKWIRE_UNSAFE_NO_SANDBOX", "true")], &[])
            .contains("unsafe_no_sandbox = true\n")
    );
    let file = config_file("[worker]\nunsafe_no_sandbox = true\n");
    let path = file.path().to_str().expect("utf-8 path");
    assert!(print_worker(&[], &["--config", path]).contains("unsafe_no_sandbox = true\n"));
    assert!(
        print_worker(&[], &["--config", path, "--unsafe-no-sandbox=false"])
            .contains("unsafe_no_sandbox = false\n")
    );
}

#[test]
fn no_stream_is_a_bare_flag_or_a_boolish_env_value() {
    assert!(print_worker(&[], &[]).contains("no_stream = false\n"));
    assert!(print_worker(&[], &["--no-stream"]).contains("no_stream = true\n"));
    assert!(print_worker(&[("TASKWIRE_NO_STREAM", "1")], &[]).contains("no_stream = true\n"));
    assert!(
        print_worker(&[("TASKWIRE_NO_STREAM", "1")], &["--no-stream=false"])
            .contains("no_stream = false\n")
    );
}

#[test]
fn drain_grace_and_http_listen_come_from_env_under_the_old_name_too() {
    let default = print_worker(&[], &[]);
    assert!(default.contains("drain_grace = \"30s\"\n"), "{default}");
    assert!(
        !default.contains("http_listen"),
        "off unless set: {default}"
    );
    let env = [
        ("TASKWIRE_DRAIN_GRACE", "45s"),
        ("TASKWIRE_HTTP_LISTEN", "0.0.0.0:8080"),
    ];
    let printed = print_worker(&env, &[]);
    assert!(printed.contains("drain_grace = \"45s\"\n"), "{printed}");
    assert!(
        printed.contains("http_listen = \"0.0.0.0:8080\"\n"),
        "{printed}"
    );
    let old = print_worker(&[("TASKWIRE_SHUTDOWN_GRACE", "50s")], &[]);
    assert!(old.contains("drain_grace = \"50s\"\n"), "{old}");
    assert!(
        print_worker(
            &[("TASKWIRE_SHUTDOWN_GRACE", "50s")],
            &["--drain-grace", "5s"]
        )
        .contains("drain_grace = \"5s\"\n")
    );
}

#[test]
fn workspaces_dir_and_keep_workspaces_are_flags_env_and_printed() {
    let default = print_worker(&[], &[]);
    assert!(
        default.contains("workspaces_dir = \"/tmp/taskwire-workspaces\"\n")
            && default.contains("keep_workspaces = false\n"),
        "{default}"
    );
    let env = [
        ("TASKWIRE_WORKSPACES_DIR", "/srv/ws"),
        ("TASKWIRE_KEEP_WORKSPACES", "1"),
    ];
    let from_env = print_worker(&env, &[]);
    assert!(
        from_env.contains("workspaces_dir = \"/srv/ws\"\n")
            && from_env.contains("keep_workspaces = true\n"),
        "{from_env}"
    );
    let from_flags = print_worker(
        &env,
        &["--workspaces-dir", "/fast/ws", "--keep-workspaces=false"],
    );
    assert!(
        from_flags.contains("workspaces_dir = \"/fast/ws\"\n")
            && from_flags.contains("keep_workspaces = false\n"),
        "flags beat env: {from_flags}"
    );
    assert!(print_worker(&[], &["--keep-workspaces"]).contains("keep_workspaces = true\n"));
}

#[test]
fn coordinator_print_config_is_a_config_file() {
    let file = config_file("[coordinator]\nlisten = \"0.0.0.0:6000\"\nack_wait = 45\n");
    let out = run(taskwire()
        .args(["coordinator", "--print-config", "--prefix", "tw1"])
        .env("TASKWIRE_CONFIG", file.path())
        .env(
            "TASKWIRE_DATABASE_URL",
            "postgres://app:hunter2@db/taskwire",
        ));
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = stdout(&out);
    assert!(printed.starts_with("[coordinator]\n"), "{printed}");
    for line in [
        "listen = \"0.0.0.0:6000\"",
        "ack_wait = \"45s\"",
        "prefix = \"tw1\"",
        "database_url = \"postgres://app:<redacted>@db/taskwire\"",
    ] {
        assert!(printed.contains(line), "missing {line:?} in {printed}");
    }
    assert!(!printed.contains("hunter2"));
}

#[test]
fn coordinator_print_config_lists_the_discovered_directories_or_the_configured_one() {
    let (project, home) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let print = |extra: &[&str], env: &[(&str, &std::path::Path)]| {
        let out = run(taskwire()
            .current_dir(project.path())
            .args(["coordinator", "--print-config"])
            .args(extra)
            .envs(env.iter().copied()));
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let project_dir = format!("#   {}/.taskwire\n", project.path().display());

    let printed = print(&[], &[("HOME", home.path())]);
    let user_dir = format!("#   {}/.config/taskwire\n", home.path().display());
    assert!(
        printed.ends_with(&format!("{user_dir}{project_dir}")),
        "{printed}"
    );

    let xdg = home.path().join("xdg");
    let printed = print(&[], &[("HOME", home.path()), ("XDG_CONFIG_HOME", &xdg)]);
    let user_dir = format!("#   {}/taskwire\n", xdg.display());
    assert!(
        printed.ends_with(&format!("{user_dir}{project_dir}")),
        "{printed}"
    );

    let printed = print(&["--config-dir", "/etc/taskwire"], &[("HOME", home.path())]);
    assert!(printed.ends_with("#   /etc/taskwire\n"), "{printed}");
    assert!(!printed.contains(".taskwire"), "{printed}");
}

#[test]
fn the_model_api_key_is_never_printed() {
    // From the environment: `--print-config` redacts it, `--help` names the variable only.
    for (flag, shown) in [
        ("--print-config", "model_api_key = \"<redacted>\""),
        ("--help", "TASKWIRE_MODEL_API_KEY"),
    ] {
        let out = run(taskwire()
            .args(["worker", flag])
            .env("TASKWIRE_MODEL_API_KEY", "sk-from-env"));
        let printed = stdout(&out);
        assert!(printed.contains(shown), "{printed}");
        assert!(!printed.contains("sk-from-env"), "{printed}");
    }

    let out = run(taskwire().args([
        "worker",
        "--print-config",
        "--model-api-key",
        "sk-from-flag",
    ]));
    assert!(!stdout(&out).contains("sk-from-flag"));
}

#[test]
fn a_missing_config_file_is_an_error_that_names_it() {
    let out = run(taskwire().args([
        "worker",
        "--print-config",
        "--config",
        "/nonexistent/taskwire.toml",
    ]));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("/nonexistent/taskwire.toml"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_unreachable_coordinator_is_a_grpc_error_with_status_2() {
    let addr = format!("http://127.0.0.1:{}", closed_port());
    for args in [
        vec!["get", "0193f1c2-0000-7000-8000-000000000001"],
        vec!["ls", "--output", "json"],
        vec!["agents"],
        vec!["replay", "0193f1c2-0000-7000-8000-000000000001"],
        vec!["approve", "0193f1c2-0000-7000-8000-000000000001", "r1"],
        vec!["run", "/review", "src"],
    ] {
        let out = run(taskwire().args(&args).args(["--addr", &addr]));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with("error: unavailable: failed to connect to"),
            "{}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty(), "nothing on stdout");
    }
    let out = run(taskwire().args(["agents"]).env("TASKWIRE_ADDR", &addr));
    assert_eq!(
        out.status.code(),
        Some(2),
        "TASKWIRE_ADDR is read: {}",
        stderr(&out)
    );
}

#[test]
fn invalid_flag_values_are_usage_errors() {
    for args in [
        vec!["submit", "--agent", "a", "--deadline", "tomorrow", "go"],
        vec!["submit", "--agent", "a", "--input", "[1]", "go"],
        vec!["ls", "--status", "done"],
        vec!["worker", "--ack-wait", "5x", "--print-config"],
        vec!["get", "id", "--output", "yaml"],
        vec!["approve", "task", "request", "--answer", "yes"],
        vec!["run", "/"],
        vec!["submit", "--agent", "a", "--max-attempts", "0", "go"],
    ] {
        let out = run(taskwire().args(&args));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn https_without_a_ca_is_refused_before_connecting() {
    let addr = format!("https://127.0.0.1:{}", closed_port());
    let out = run(taskwire().args(["agents", "--addr", &addr]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error: invalid_argument:") && stderr(&out).contains("--tls-ca"),
        "{}",
        stderr(&out)
    );

    let ca = config_file("not a certificate\n");
    let out = run(taskwire()
        .args(["agents", "--addr", &addr])
        .env("TASKWIRE_TLS_CA", ca.path()));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&ca.path().display().to_string()),
        "TASKWIRE_TLS_CA is read: {}",
        stderr(&out)
    );
}

#[test]
fn a_second_sigterm_stops_a_worker_at_once() {
    // A worker still starting may finish its graceful shutdown before the second signal
    // arrives (status 0, nothing to test); the scenario is run again until the second
    // signal lands while it is still shutting down, and then it must exit at once.
    for _ in 0..10 {
        match sigterm_twice() {
            SecondSignal::Landed(code) => {
                assert_eq!(code, Some(128 + 15), "exit status after the second signal");
                return;
            }
            SecondSignal::TooLate => continue,
        }
    }
    panic!("the worker always finished shutting down before the second signal arrived");
}

enum SecondSignal {
    /// The worker logged the second signal; its exit status.
    Landed(Option<i32>),
    /// The worker had already shut down gracefully.
    TooLate,
}

fn sigterm_twice() -> SecondSignal {
    // No NATS listens there, so the worker is still starting when the signals arrive.
    let mut child = taskwire()
        .args([
            "worker",
            "--log-format",
            "json",
            "--nats-url",
            &format!("nats://127.0.0.1:{}", closed_port()),
        ])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("worker starts");
    let (tx, lines) = mpsc::channel();
    let stderr = child.stderr.take().expect("piped stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let wait_for = |needle: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return,
                Ok(_) => {}
                Err(e) => panic!("no log line with {needle:?}: {e}"),
            }
        }
    };
    let pid = child.id().to_string();
    let sigterm = || {
        // The process may be gone already (a graceful shutdown that was quick).
        let _ = Command::new("kill")
            .args(["-TERM", &pid])
            .stderr(Stdio::null())
            .status()
            .expect("kill runs");
    };

    wait_for("starting worker"); // logged once the signal handler is in place
    sigterm();
    wait_for("shutting down gracefully");
    sigterm();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait on worker") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "worker still running after the second signal"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let landed = std::iter::from_fn(|| lines.recv_timeout(Duration::from_secs(1)).ok())
        .any(|line| line.contains("second signal"));
    if landed {
        SecondSignal::Landed(status.code())
    } else {
        assert_eq!(status.code(), Some(0), "a graceful shutdown exits 0");
        SecondSignal::TooLate
    }
}

#[test]
fn the_model_catalogue_merges_env_over_file_and_compaction_settings_are_printed() {
    let file = config_file(
        "[worker.models.small]\ncontext_window = 4000\ninput_usd_per_mtok = 0.1\noutput_usd_per_mtok = 0.2\n\
         [worker.models.\"anthropic/big\"]\ncontext_window = 200000\nmax_output_tokens = 8000\n\
         input_usd_per_mtok = 3\noutput_usd_per_mtok = 15\ncached_input_usd_per_mtok = 0.3\n",
    );
    let config = file.path().to_string_lossy().into_owned();
    let env = [
        ("TASKWIRE_CONFIG", config.as_str()),
        (
            "TASKWIRE_MODELS",
            r#"{"small": {"context_window": 8000, "input_usd_per_mtok": 0, "output_usd_per_mtok": 0}}"#,
        ),
    ];
    let printed = print_worker(&env, &["--compaction-threshold", "0.5"]);
    let file: toml::Table = toml::from_str(&printed).expect("print-config is toml");
    let worker = &file["worker"];
    assert_eq!(
        worker["models"]["small"]["context_window"].as_integer(),
        Some(8000),
        "env replaces the file's entry: {printed}"
    );
    let big = &worker["models"]["anthropic/big"];
    assert_eq!(
        big["context_window"].as_integer(),
        Some(200_000),
        "{printed}"
    );
    assert_eq!(big["cached_input_usd_per_mtok"].as_float(), Some(0.3));
    assert_eq!(worker["compaction_threshold"].as_float(), Some(0.5));
    assert_eq!(worker["no_compaction"].as_bool(), Some(false));
    assert_eq!(worker["no_titles"].as_bool(), Some(false));

    let defaults = print_worker(&[], &["--no-compaction", "--no-titles"]);
    assert!(
        defaults.contains("compaction_threshold = 0.8\n")
            && defaults.contains("no_compaction = true\n")
            && defaults.contains("no_titles = true\n"),
        "{defaults}"
    );
}

#[test]
fn invalid_catalogue_values_are_refused_at_start_naming_the_key() {
    let zero = config_file(
        "[worker.models.m]\ncontext_window = 0\ninput_usd_per_mtok = 1\noutput_usd_per_mtok = 1\n",
    );
    let out = run(taskwire()
        .args(["worker", "--config"])
        .arg(zero.path())
        .args(["--nats-url", &format!("nats://127.0.0.1:{}", closed_port())]));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(r#"models."m".context_window"#),
        "{}",
        stderr(&out)
    );

    let unknown = config_file(
        "[worker.models.m]\ncontext_windw = 10\ninput_usd_per_mtok = 1\noutput_usd_per_mtok = 1\n",
    );
    let out = run(taskwire()
        .args(["worker", "--print-config", "--config"])
        .arg(unknown.path()));
    assert!(!out.status.success());
    assert!(stderr(&out).contains("context_windw"), "{}", stderr(&out));

    let negative =
        r#"{"m": {"context_window": 10, "input_usd_per_mtok": -1, "output_usd_per_mtok": 1}}"#;
    let out = run(taskwire()
        .args(["worker", "--print-config"])
        .env("TASKWIRE_MODELS", negative));
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(
        stderr(&out).contains(r#"models."m".input_usd_per_mtok"#),
        "{}",
        stderr(&out)
    );

    let out = run(taskwire().args(["worker", "--print-config", "--compaction-threshold", "1.5"]));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("compaction_threshold"),
        "{}",
        stderr(&out)
    );
}
