use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::duration::HumanDuration;

fn worker(concurrency: Option<usize>, model: Option<&str>) -> WorkerSettings {
    WorkerSettings {
        concurrency,
        model: model.map(str::to_owned),
        ..WorkerSettings::default()
    }
}

#[test]
fn defaults_apply_when_nothing_is_set() {
    let config = worker_config(
        WorkerSettings::default(),
        &FileConfig::default(),
        Defaults::LIBRARY,
    )
    .expect("valid");
    assert_eq!(config.concurrency, 16);
    assert_eq!(config.workspace, PathBuf::from("."));
    assert!(config.model.stream);
    let config = coordinator_config(
        CoordinatorSettings::default(),
        &FileConfig::default(),
        Defaults::LIBRARY,
    )
    .expect("valid");
    assert_eq!(config.listen, SocketAddr::from(([127, 0, 0, 1], 50051)));
    assert_eq!(config.prefix, "taskwire");
}

#[test]
fn file_beats_defaults() {
    let file =
        FileConfig::parse("[worker]\nconcurrency = 2\nno_stream = true\n").expect("valid toml");
    let config = worker_config(WorkerSettings::default(), &file, Defaults::LIBRARY).expect("valid");
    assert_eq!(config.concurrency, 2);
    assert!(!config.model.stream);
    assert_eq!(config.model.default_model, "default");
}

#[test]
fn env_and_flags_beat_the_file_field_by_field() {
    // Clap fills one struct from env and flags (flag first), so this layer is one value.
    let file = FileConfig::parse("[worker]\nconcurrency = 2\nmodel = \"from-file\"\n")
        .expect("valid toml");
    let config = worker_config(worker(Some(8), None), &file, Defaults::LIBRARY).expect("valid");
    assert_eq!(config.concurrency, 8);
    assert_eq!(config.model.default_model, "from-file");
}

#[test]
fn parsed_flags_beat_the_file_which_beats_defaults() {
    #[derive(clap::Parser)]
    struct Probe {
        #[command(flatten)]
        settings: CoordinatorSettings,
    }
    let file = FileConfig::parse(
        "[coordinator]\nqueue = \"file\"\nprefix = \"file\"\nack_wait = \"1m\"\n",
    )
    .expect("valid toml");
    let flags: Probe = crate::testing::parse(["probe", "--queue", "flag", "--ack-wait", "2m"])
        .expect("valid flags");
    let config = coordinator_config(flags.settings, &file, Defaults::LIBRARY).expect("valid");
    assert_eq!(config.queue, "flag");
    assert_eq!(config.ack_wait, Duration::from_secs(120));
    assert_eq!(config.prefix, "file");
    assert_eq!(config.nats_url, "nats://127.0.0.1:4222");
}

/// Coordinator settings from command-line `args` alone.
fn coordinator_flags(args: &[&str]) -> CoordinatorSettings {
    #[derive(clap::Parser)]
    struct Probe {
        #[command(flatten)]
        settings: CoordinatorSettings,
    }
    let args = std::iter::once("probe").chain(args.iter().copied());
    let probe: Probe = crate::testing::parse(args).expect("valid flags");
    probe.settings
}

#[test]
fn the_patch_buckets_limits_layer_print_and_refuse_nonsense() {
    let defaults = coordinator_config(
        CoordinatorSettings::default(),
        &FileConfig::default(),
        Defaults::LIBRARY,
    )
    .expect("valid");
    assert_eq!(defaults.patches_max_age, Duration::from_secs(7 * 24 * 3600));
    assert_eq!(defaults.patches_max_bytes, 1024 * 1024 * 1024);
    let printed = render_coordinator(&defaults).expect("renders");
    assert!(printed.contains("patches_max_age = \"168h\""), "{printed}");
    assert!(
        printed.contains("patches_max_bytes = 1073741824"),
        "{printed}"
    );

    let file = FileConfig::parse(
        "[coordinator]\npatches_max_age = \"2d\"\npatches_max_bytes = 100000000\n",
    )
    .expect("valid toml");
    let flags = coordinator_flags(&["--patches-max-age", "12h"]);
    let config = coordinator_config(flags, &file, Defaults::LIBRARY).expect("valid");
    assert_eq!(config.patches_max_age, Duration::from_secs(12 * 3600));
    assert_eq!(config.patches_max_bytes, 100_000_000);

    let small = coordinator_flags(&["--patches-max-bytes", "1000"]);
    let err = coordinator_config(small, &FileConfig::default(), Defaults::LIBRARY)
        .expect_err("smaller than one patch");
    assert!(err.to_string().contains("patches_max_bytes"), "{err}");
}

#[test]
fn inline_agent_specs_are_off_unless_set_and_layer_like_every_setting() {
    let defaults = coordinator_config(
        CoordinatorSettings::default(),
        &FileConfig::default(),
        Defaults::LIBRARY,
    )
    .expect("valid");
    assert!(!defaults.inline_agent_specs);
    let printed = render_coordinator(&defaults).expect("renders");
    assert!(printed.contains("inline_agent_specs = false"), "{printed}");

    let file = FileConfig::parse("[coordinator]\ninline_agent_specs = true\n").expect("toml");
    let config = coordinator_config(CoordinatorSettings::default(), &file, Defaults::LIBRARY)
        .expect("valid");
    assert!(config.inline_agent_specs, "from the file");
    let flags = coordinator_flags(&["--inline-agent-specs=false"]);
    let config = coordinator_config(flags, &file, Defaults::LIBRARY).expect("valid");
    assert!(!config.inline_agent_specs, "a flag beats the file");
    let bare = coordinator_flags(&["--inline-agent-specs"]);
    let config =
        coordinator_config(bare, &FileConfig::default(), Defaults::LIBRARY).expect("valid");
    assert!(config.inline_agent_specs, "the bare flag turns it on");
}

#[test]
fn coordinator_sections_round_trip_through_print_config() {
    let config = CoordinatorConfig {
        listen: SocketAddr::from(([0, 0, 0, 0], 6000)),
        ack_wait: Duration::from_secs(90),
        ..CoordinatorConfig::default()
    };
    let printed = render_coordinator(&config).expect("renders");
    assert!(printed.starts_with("[coordinator]"), "{printed}");
    assert!(printed.contains("ack_wait = \"1m30s\""), "{printed}");
    let reread = coordinator_config(
        CoordinatorSettings::default(),
        &FileConfig::parse(&printed).expect("parses"),
        Defaults::LIBRARY,
    )
    .expect("valid");
    assert_eq!(reread.listen, config.listen);
    assert_eq!(reread.ack_wait, config.ack_wait);
}

#[test]
fn print_config_lists_the_directories_in_effect() {
    let discovered = vec![
        PathBuf::from("/home/ada/.config/taskwire"),
        PathBuf::from("/work/project/.taskwire"),
    ];
    let mut config = coordinator_config(
        CoordinatorSettings::default(),
        &FileConfig::default(),
        Defaults::LIBRARY,
    )
    .expect("valid");
    config.discovered_config_dirs = discovered;
    let printed = render_coordinator(&config).expect("renders");
    assert!(
        printed.ends_with("#   /home/ada/.config/taskwire\n#   /work/project/.taskwire\n"),
        "{printed}"
    );
    assert!(!printed.contains("config_dir ="), "{printed}");

    config.config_dir = Some(PathBuf::from("/etc/taskwire"));
    let printed = render_coordinator(&config).expect("renders");
    assert!(
        printed.contains("config_dir = \"/etc/taskwire\""),
        "{printed}"
    );
    assert!(printed.ends_with("#   /etc/taskwire\n"), "{printed}");
    assert!(!printed.contains("/work/project"), "{printed}");
    // The comment keeps it a config file.
    assert!(FileConfig::parse(&printed).is_ok());
}

#[test]
fn print_config_redacts_the_api_key_and_url_passwords() {
    let flags = WorkerSettings {
        model_api_key: Some("sk-secret".to_owned()),
        nats_url: Some("nats://app:hunter2@nats:4222".to_owned()),
        ..WorkerSettings::default()
    };
    let config = worker_config(flags, &FileConfig::default(), Defaults::LIBRARY).expect("valid");
    assert_eq!(config.model.api_key.as_deref(), Some("sk-secret"));
    let printed = render_worker(&config).expect("renders");
    assert!(
        !printed.contains("sk-secret") && !printed.contains("hunter2"),
        "{printed}"
    );
    assert!(
        printed.contains("model_api_key = \"<redacted>\""),
        "{printed}"
    );
    assert!(
        printed.contains("nats://app:<redacted>@nats:4222"),
        "{printed}"
    );
}

#[test]
fn print_config_redacts_the_nats_token_and_keeps_other_nats_options() {
    let flags = CoordinatorSettings {
        nats_token: Some("s3cret".to_owned()),
        nats_require_tls: Some(true),
        ..CoordinatorSettings::default()
    };
    let config =
        coordinator_config(flags, &FileConfig::default(), Defaults::LIBRARY).expect("valid");
    assert_eq!(config.nats.token.as_deref(), Some("s3cret"));
    let printed = render_coordinator(&config).expect("renders");
    assert!(!printed.contains("s3cret"), "{printed}");
    assert!(printed.contains("nats_token = \"<redacted>\""), "{printed}");
    assert!(printed.contains("nats_require_tls = true"), "{printed}");
}

/// Asserts that `section` of a rendered config has a key for every flag of `A`
/// (hidden ones are old names, printed under their new name).
fn assert_prints_every_setting<A: clap::Args>(printed: &str, section: &str) {
    let mut flags: Vec<String> = A::augment_args(clap::Command::new("probe"))
        .get_arguments()
        .filter(|arg| !arg.is_hide_set())
        .map(|arg| arg.get_id().to_string())
        .collect();
    let file: toml::Table = toml::from_str(printed).expect("renders valid toml");
    let mut keys: Vec<String> = file[section]
        .as_table()
        .expect("a table per section")
        .keys()
        .cloned()
        .collect();
    flags.sort();
    keys.sort();
    assert_eq!(keys, flags, "{printed}");
}

#[test]
fn print_config_shows_every_setting_once_all_are_set() {
    let path = || Some(PathBuf::from("/file"));
    let coordinator = CoordinatorSettings {
        config_dir: path(),
        max_running_per_tenant: Some(2),
        auth_tokens_file: path(),
        tls_cert: path(),
        tls_key: path(),
        nats_credentials_file: path(),
        nats_token: Some("token".to_owned()),
        nats_tls_ca: path(),
        webhook_secrets_file: path(),
        ..CoordinatorSettings::default()
    };
    let config =
        coordinator_config(coordinator, &FileConfig::default(), Defaults::LIBRARY).expect("valid");
    let printed = render_coordinator(&config).expect("renders");
    assert_prints_every_setting::<CoordinatorSettings>(&printed, "coordinator");

    let worker = WorkerSettings {
        worker_id: Some("w".to_owned()),
        model_api_key: Some("key".to_owned()),
        anthropic_base_url: Some("http://anthropic".to_owned()),
        anthropic_api_key: Some("key".to_owned()),
        small_model: Some("small".to_owned()),
        nats_credentials_file: path(),
        nats_token: Some("token".to_owned()),
        nats_tls_ca: path(),
        http_listen: Some(SocketAddr::from(([0, 0, 0, 0], 8080))),
        ..WorkerSettings::default()
    };
    let config = worker_config(worker, &FileConfig::default(), Defaults::LIBRARY).expect("valid");
    let printed = render_worker(&config).expect("renders");
    assert_prints_every_setting::<WorkerSettings>(&printed, "worker");
}

#[test]
fn url_passwords_are_redacted_and_other_urls_kept() {
    assert_eq!(
        redact_url_password("postgres://u:p@h:5432/db?x=1"),
        "postgres://u:<redacted>@h:5432/db?x=1"
    );
    assert_eq!(
        redact_url_password("postgres://u@h/db"),
        "postgres://u@h/db"
    );
    assert_eq!(
        redact_url_password("nats://127.0.0.1:4222"),
        "nats://127.0.0.1:4222"
    );
    assert_eq!(redact_url_password("http://h/p@x:y"), "http://h/p@x:y");
    assert_eq!(redact_url_password("not a url"), "not a url");
    assert_eq!(
        redact_url_password("postgres://u:secret@h:99999/db"),
        "postgres://<redacted>",
        "an unreadable url with credentials is hidden whole"
    );
    assert_eq!(
        redact_url_password("nats://u:p@a:4222,nats://v:q@b:4222"),
        "nats://u:<redacted>@a:4222,nats://v:<redacted>@b:4222"
    );
    assert_eq!(
        redact_url_password("postgres://u:p@ss@h/db"),
        "postgres://u:<redacted>@h/db"
    );
}

#[test]
fn unknown_keys_in_the_file_are_errors() {
    let err = FileConfig::parse("[worker]\nconcurency = 2\n").expect_err("typo");
    assert!(err.to_string().contains("concurency"), "{err}");
    assert!(FileConfig::parse("[cordinator]\n").is_err());
}

#[test]
fn drain_grace_keeps_its_old_name_and_layers_under_either() {
    #[derive(clap::Parser)]
    struct Probe {
        #[command(flatten)]
        settings: WorkerSettings,
    }
    let flags = |args: &[&str]| {
        crate::testing::parse::<Probe>(["probe"].iter().chain(args))
            .expect("valid flags")
            .settings
    };
    let none = FileConfig::default();
    let grace = |flags, file: &FileConfig| {
        worker_config(flags, file, Defaults::LIBRARY)
            .expect("valid")
            .drain_grace
    };
    assert_eq!(grace(flags(&[]), &none), Duration::from_secs(30));
    assert_eq!(
        grace(flags(&["--drain-grace", "7s"]), &none),
        Duration::from_secs(7)
    );
    assert_eq!(
        grace(flags(&["--shutdown-grace", "8s"]), &none),
        Duration::from_secs(8)
    );
    assert_eq!(
        grace(
            flags(&["--shutdown-grace", "8s", "--drain-grace", "7s"]),
            &none
        ),
        Duration::from_secs(7),
        "the new name wins within a layer"
    );
    let old_file = FileConfig::parse("[worker]\nshutdown_grace = \"9s\"\n").expect("toml");
    assert_eq!(grace(flags(&[]), &old_file), Duration::from_secs(9));
    let new_file = FileConfig::parse("[worker]\ndrain_grace = \"9s\"\n").expect("toml");
    assert_eq!(
        grace(flags(&["--shutdown-grace", "8s"]), &new_file),
        Duration::from_secs(8),
        "a flag under the old name still beats the file"
    );
    let printed = render_worker(
        &worker_config(flags(&["--shutdown-grace", "8s"]), &none, Defaults::LIBRARY)
            .expect("valid"),
    )
    .expect("renders");
    assert!(printed.contains("drain_grace = \"8s\""), "{printed}");
    assert!(!printed.contains("shutdown_grace"), "{printed}");
}

#[test]
fn workspaces_dir_and_keep_default_to_temp_and_off_and_layer_like_the_rest() {
    let config = worker_config(
        WorkerSettings::default(),
        &FileConfig::default(),
        Defaults::LIBRARY,
    )
    .expect("valid");
    assert_eq!(
        config.workspaces_dir,
        std::env::temp_dir().join("taskwire-workspaces")
    );
    assert!(!config.keep_workspaces);
    let file =
        FileConfig::parse("[worker]\nworkspaces_dir = \"/srv/ws\"\nkeep_workspaces = true\n")
            .expect("valid toml");
    let config = worker_config(WorkerSettings::default(), &file, Defaults::LIBRARY).expect("valid");
    assert_eq!(config.workspaces_dir, PathBuf::from("/srv/ws"));
    assert!(config.keep_workspaces);
    let flags = WorkerSettings {
        workspaces_dir: Some(PathBuf::from("/fast/ws")),
        keep_workspaces: Some(false),
        ..WorkerSettings::default()
    };
    let config = worker_config(flags, &file, Defaults::LIBRARY).expect("valid");
    assert_eq!(config.workspaces_dir, PathBuf::from("/fast/ws"));
    assert!(!config.keep_workspaces, "a flag beats the file");
}

#[test]
fn a_higher_layers_model_entry_replaces_the_lower_ones_whole() {
    let file = FileConfig::parse(
        "[worker.models.m]\ncontext_window = 4000\nmax_output_tokens = 1000\n\
         input_usd_per_mtok = 1\noutput_usd_per_mtok = 2\n\
         [worker.models.other]\ncontext_window = 10\ninput_usd_per_mtok = 0\noutput_usd_per_mtok = 0\n",
    )
    .expect("valid toml");
    let flags = WorkerSettings {
        models: Some(
            serde_json::from_str(
                r#"{"m": {"context_window": 500, "input_usd_per_mtok": 0, "output_usd_per_mtok": 0}}"#,
            )
            .expect("valid catalogue"),
        ),
        ..WorkerSettings::default()
    };
    let config = worker_config(flags, &file, Defaults::LIBRARY).expect("valid");
    let m = config.models.get("m").expect("the flag's entry");
    assert_eq!(m.context_window, 500);
    assert_eq!(m.max_output_tokens, None, "not merged key by key");
    assert!(
        config.models.get("other").is_some(),
        "the file's other entry"
    );
}

/// A distinct duration per field.
fn secs(n: u64) -> Option<HumanDuration> {
    Some(HumanDuration(Duration::from_secs(n)))
}

#[test]
fn every_setting_lands_in_its_own_slot_and_prints_back() {
    let path = |p: &str| Some(PathBuf::from(p));
    let addr = |port: u16| Some(SocketAddr::from(([10, 0, 0, 1], port)));
    let coordinator = CoordinatorSettings {
        database_url: Some("postgres://db/x".to_owned()),
        nats_url: Some("nats://n:1".to_owned()),
        listen: addr(1),
        http_listen: addr(2),
        prefix: Some("p".to_owned()),
        queue: Some("q".to_owned()),
        max_prompt_bytes: Some(11),
        max_request_bytes: Some(12),
        max_queued_tasks: Some(13),
        max_backlog: Some(27),
        dispatch_window: Some(14),
        ack_wait: secs(15),
        db_max_connections: Some(16),
        sweep_interval: secs(17),
        default_max_attempts: Some(18),
        config_dir: path("/config"),
        default_agent: Some("a".to_owned()),
        max_depth: Some(19),
        max_running_per_tenant: Some(20),
        auth_tokens_file: path("/tokens"),
        tls_cert: path("/cert"),
        tls_key: path("/key"),
        patches_max_age: secs(21),
        patches_max_bytes: Some(22),
        inline_agent_specs: Some(true),
        nats_credentials_file: path("/creds"),
        nats_token: Some("token".to_owned()),
        nats_tls_ca: path("/ca"),
        nats_require_tls: Some(true),
        webhook_secrets_file: path("/secrets"),
        webhook_allow_http: Some(true),
        webhook_allow_private: Some(true),
        webhook_max_attempts: Some(23),
        webhook_timeout: secs(24),
        schedule_interval: secs(25),
        schedule_grace: secs(26),
    };
    let printed =
        CoordinatorSettings::printable(&coordinator.clone().apply(CoordinatorConfig::default()));
    assert_eq!(
        printed,
        CoordinatorSettings {
            nats_token: Some(REDACTED.to_owned()),
            ..coordinator
        }
    );

    let worker = WorkerSettings {
        nats_url: Some("nats://n:1".to_owned()),
        prefix: Some("p".to_owned()),
        queue: Some("q".to_owned()),
        concurrency: Some(3),
        workspace: path("/base"),
        workspaces_dir: path("/ws"),
        keep_workspaces: Some(true),
        worker_id: Some("w".to_owned()),
        model_base_url: Some("http://model/v1".to_owned()),
        model_api_key: Some("key".to_owned()),
        model: Some("m".to_owned()),
        no_stream: Some(true),
        model_timeout: secs(4),
        model_max_retries: Some(5),
        ack_wait: secs(6),
        claim_timeout: secs(7),
        drain_grace: secs(8),
        shutdown_grace: None,
        http_listen: addr(9),
        retry_base_delay: secs(10),
        retry_max_delay: secs(11),
        approval_timeout: secs(12),
        anthropic_base_url: Some("http://anthropic".to_owned()),
        anthropic_api_key: Some("key".to_owned()),
        instructions: Some(vec!["a.md".to_owned()]),
        hook_urls: Some(vec!["https://hooks.example.com/".to_owned()]),
        unsafe_no_sandbox: Some(true),
        models: Some(
            serde_json::from_str(
                r#"{"m": {"context_window": 10, "input_usd_per_mtok": 1, "output_usd_per_mtok": 2}}"#,
            )
            .expect("valid catalogue"),
        ),
        compaction_threshold: Some(0.5),
        no_compaction: Some(false),
        no_titles: Some(true),
        small_model: Some("small".to_owned()),
        compact_with_small_model: Some(true),
        no_prompt_caching: Some(true),
        no_workspace_overlays: Some(true),
        nats_credentials_file: path("/creds"),
        nats_token: Some("token".to_owned()),
        nats_tls_ca: path("/ca"),
        nats_require_tls: Some(true),
    };
    let printed = WorkerSettings::printable(&worker.clone().apply(WorkerConfig::default()));
    assert_eq!(
        printed,
        WorkerSettings {
            model_api_key: Some(REDACTED.to_owned()),
            anthropic_api_key: Some(REDACTED.to_owned()),
            nats_token: Some(REDACTED.to_owned()),
            ..worker
        }
    );
}

#[test]
fn zero_concurrency_is_rejected() {
    let err = worker_config(
        worker(Some(0), None),
        &FileConfig::default(),
        Defaults::LIBRARY,
    )
    .expect_err("invalid");
    assert!(err.to_string().contains("concurrency"), "{err}");
}
