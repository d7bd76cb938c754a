//! Settings of `taskwire coordinator` and `taskwire worker`, in layers:
//! defaults → TOML file → `TASKWIRE_*` env → flags.
//!
//! The defaults are the library config types', except where [`Defaults`] moves them:
//! `TASKWIRE_DEFAULT_LISTEN_IP`, which the image sets, puts the default listeners on all
//! interfaces without outranking a file (see `defaults`).
//!
//! Each section is one struct of `Option`s that serves twice: clap fills it from flags
//! and env (a flag beats its env variable), and serde fills it from the file's
//! `[coordinator]` or `[worker]` table, whose keys are the flag names in snake_case. The
//! layers are merged with [`CoordinatorSettings::over`] and put on the defaults with
//! `apply`, so the defaults live in one place: the library config types.
//! Both structs are declared with `settings!`, which writes the NATS options they share.
//!
//! ```toml
//! [coordinator]
//! database_url = "postgres://postgres@127.0.0.1:5432/taskwire"
//! ack_wait = "30s"
//!
//! [worker]
//! concurrency = 8
//! model = "qwen3-coder"
//! ```

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use taskwire_coordinator::CoordinatorConfig;
use taskwire_worker::WorkerConfig;

/// What `--print-config` shows instead of a secret.
pub const REDACTED: &str = "<redacted>";

/// The config file.
#[derive(Debug, Default, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordinator: Option<CoordinatorSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<WorkerSettings>,
}

impl FileConfig {
    /// Reads `path`, or returns an empty file config when there is none.
    pub fn load(path: Option<&Path>) -> anyhow::Result<Self> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("failed to read config file {}", path.display()))?;
        Self::parse(&text)
            .with_context(|| format!("failed to parse config file {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }
}

/// Declares a settings struct and its `over`: the fields written in the invocation, then
/// the NATS connection options the coordinator and the worker share
/// (`nats_credentials_file`, `nats_token`, `nats_tls_ca`, `nats_require_tls`). Every field
/// is an `Option`, left out of `--print-config` when unset. `for Config` names the
/// section's library config, whose `nats` options `apply_nats` writes and
/// `printable_nats` reads; `apply` and `printable`, written per section, call them.
///
/// The NATS fields are pasted in rather than kept in a struct both sections flatten:
/// serde's `flatten` does not work with `deny_unknown_fields`, and the flags, env variables
/// and file keys must stay flat (`--nats-token`, `TASKWIRE_NATS_TOKEN`, `nats_token`).
macro_rules! settings {
    (
        $(#[$meta:meta])*
        pub struct $name:ident for $config:ty { $($fields:tt)+ }
    ) => {
        settings! {
            @struct $(#[$meta])* $name { $($fields)+
                /// NATS credentials file (JWT and NKey seed)
                #[arg(long, env = "TASKWIRE_NATS_CREDENTIALS_FILE", value_name = "FILE")]
                pub nats_credentials_file: Option<std::path::PathBuf>,
                /// NATS token; never printed
                #[arg(
                    long,
                    env = "TASKWIRE_NATS_TOKEN",
                    value_name = "TOKEN",
                    hide_env_values = true
                )]
                pub nats_token: Option<String>,
                /// PEM root certificates to trust for the NATS server
                #[arg(long, env = "TASKWIRE_NATS_TLS_CA", value_name = "FILE")]
                pub nats_tls_ca: Option<std::path::PathBuf>,
                /// Refuse to connect to NATS without TLS [default: false]
                #[arg(
                    long,
                    env = "TASKWIRE_NATS_REQUIRE_TLS",
                    value_name = "BOOL",
                    num_args = 0..=1,
                    require_equals = true,
                    default_missing_value = "true",
                    value_parser = clap::builder::BoolishValueParser::new()
                )]
                pub nats_require_tls: Option<bool>,
            }
        }

        impl $name {
            /// Puts the NATS options set here in `c.nats`.
            fn apply_nats(&self, c: &mut $config) {
                use $crate::config::{set, set_some};
                set_some(&mut c.nats.credentials_file, self.nats_credentials_file.clone());
                set_some(&mut c.nats.token, self.nats_token.clone());
                set_some(&mut c.nats.tls_ca, self.nats_tls_ca.clone());
                set(&mut c.nats.require_tls, self.nats_require_tls);
            }

            /// The NATS options of `c`, the token redacted; the other fields unset.
            fn printable_nats(c: &$config) -> Self {
                Self {
                    nats_credentials_file: c.nats.credentials_file.clone(),
                    nats_token: $crate::config::redacted(c.nats.token.as_deref()),
                    nats_tls_ca: c.nats.tls_ca.clone(),
                    nats_require_tls: Some(c.nats.require_tls),
                    ..Self::default()
                }
            }
        }
    };
    (
        @struct $(#[$meta:meta])* $name:ident {
            $($(#[$field_meta:meta])* pub $field:ident: $ty:ty,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Default, Clone, PartialEq, clap::Args, serde::Deserialize, serde::Serialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $(
                $(#[$field_meta])*
                #[serde(skip_serializing_if = "Option::is_none")]
                pub $field: $ty,
            )+
        }

        impl $name {
            /// Layers `self` over `lower`: a field set in `self` wins.
            pub fn over(self, lower: Self) -> Self {
                Self { $($field: self.$field.or(lower.$field)),+ }
            }
        }
    };
}

mod coordinator;
mod defaults;
mod worker;

pub use coordinator::CoordinatorSettings;
pub use defaults::{DEFAULT_LISTEN_IP_ENV, Defaults, WORKER_HTTP_PORT};
pub use worker::WorkerSettings;

/// Puts a set value in its slot.
fn set<T>(slot: &mut T, value: Option<impl Into<T>>) {
    if let Some(value) = value {
        *slot = value.into();
    }
}

/// Puts a set value in an optional slot.
fn set_some<T>(slot: &mut Option<T>, value: Option<T>) {
    if value.is_some() {
        *slot = value;
    }
}

/// What `--print-config` shows for a secret: [`REDACTED`] when it is set.
fn redacted(secret: Option<&str>) -> Option<String> {
    secret.map(|_| REDACTED.to_owned())
}

/// The effective coordinator config: `flags` (flags and env, as clap read them) over the
/// file's `[coordinator]` table over `defaults`.
pub fn coordinator_config(
    flags: CoordinatorSettings,
    file: &FileConfig,
    defaults: Defaults,
) -> anyhow::Result<CoordinatorConfig> {
    let file = file.coordinator.clone().unwrap_or_default();
    let config = flags.over(file).apply(defaults.coordinator());
    if config.ack_wait.is_zero() {
        bail!("invalid coordinator config: ack_wait must be more than zero");
    }
    if config.sweep_interval.is_zero() {
        bail!("invalid coordinator config: sweep_interval must be more than zero");
    }
    if config.patches_max_age.is_zero() {
        bail!("invalid coordinator config: patches_max_age must be more than zero");
    }
    if config.patches_max_bytes
        < i64::try_from(taskwire_protocol::MAX_PATCH_BYTES).unwrap_or(i64::MAX)
    {
        bail!(
            "invalid coordinator config: patches_max_bytes must be at least {} (the largest patch)",
            taskwire_protocol::MAX_PATCH_BYTES
        );
    }
    Ok(config)
}

/// The effective worker config: `flags` (flags and env) over the file's `[worker]` table
/// over `defaults`.
pub fn worker_config(
    flags: WorkerSettings,
    file: &FileConfig,
    defaults: Defaults,
) -> anyhow::Result<WorkerConfig> {
    let file = file.worker.clone().unwrap_or_default().with_old_names();
    let config = flags
        .with_old_names()
        .merged_over(file)
        .apply(defaults.worker());
    if config.concurrency == 0 {
        bail!("invalid worker config: concurrency must be at least 1");
    }
    if config.ack_wait.is_zero() {
        bail!("invalid worker config: ack_wait must be more than zero");
    }
    if config.model.base_url.is_empty() {
        bail!("invalid worker config: model_base_url is empty");
    }
    if let Some(share) = config.compaction_threshold
        && !(share > 0.0 && share <= 1.0)
    {
        bail!(
            "invalid worker config: compaction_threshold must be more than 0 and at most 1, not {share}"
        );
    }
    Ok(config)
}

/// The directories a coordinator started here discovers agents and commands in when no
/// `config_dir` is set (see [`taskwire_coordinator::config::discover_config_dirs`]): the
/// one place that reads the working directory, `XDG_CONFIG_HOME` and `HOME`.
pub fn discovered_config_dirs() -> anyhow::Result<Vec<PathBuf>> {
    let cwd = std::env::current_dir().context("failed to read the working directory")?;
    Ok(taskwire_coordinator::config::discover_config_dirs(
        &cwd,
        std::env::var_os("XDG_CONFIG_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    ))
}

/// The effective coordinator config as a config file, ending with a comment that lists
/// the directories agents and commands are read from.
pub fn render_coordinator(config: &CoordinatorConfig) -> anyhow::Result<String> {
    let file = FileConfig {
        coordinator: Some(CoordinatorSettings::printable(config)),
        worker: None,
    };
    let mut text = toml::to_string(&file).context("failed to render the coordinator config")?;
    let dirs = config.config_dirs();
    if dirs.is_empty() {
        text.push_str("\n# agents and commands: the built-ins only\n");
    } else {
        text.push_str(
            "\n# agents and commands: the built-ins, overridden by these directories in order\n",
        );
        for dir in dirs {
            text.push_str(&format!("#   {}\n", dir.display()));
        }
    }
    Ok(text)
}

/// The effective worker config as a config file, the API key redacted.
pub fn render_worker(config: &WorkerConfig) -> anyhow::Result<String> {
    let file = FileConfig {
        coordinator: None,
        worker: Some(WorkerSettings::printable(config)),
    };
    toml::to_string(&file).context("failed to render the worker config")
}

/// `scheme://user:secret@host/...` → `scheme://user:<redacted>@host/...`; other strings
/// are returned unchanged. Database and NATS URLs may carry passwords; a list of NATS
/// servers (`nats://u:p@a:4222,nats://u:p@b:4222`) has each redacted. A URL with a
/// password is shown as the `url` crate writes it.
pub fn redact_url_password(url: &str) -> String {
    if !url.contains(',') || url::Url::parse(url.trim()).is_ok() {
        return redact_one_url_password(url).unwrap_or_else(|| url.to_owned());
    }
    url.split(',')
        .map(|server| redact_one_url_password(server).unwrap_or_else(|| server.to_owned()))
        .collect::<Vec<_>>()
        .join(",")
}

/// [`redact_url_password`] of one URL; `None` when it is no URL.
fn redact_one_url_password(text: &str) -> Option<String> {
    if !text.contains("://") {
        return None;
    }
    let Ok(url) = url::Url::parse(text.trim()) else {
        // Not readable as a URL, yet it may hold a password: fail closed.
        return text.contains('@').then(|| {
            let scheme = text.split("://").next().unwrap_or_default();
            format!("{scheme}://{REDACTED}")
        });
    };
    Some(match url.password() {
        Some(_) => format!(
            "{}{REDACTED}{}",
            &url[..url::Position::BeforePassword],
            &url[url::Position::AfterPassword..]
        ),
        None => text.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;

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
        let config =
            worker_config(WorkerSettings::default(), &file, Defaults::LIBRARY).expect("valid");
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
        let config =
            worker_config(flags, &FileConfig::default(), Defaults::LIBRARY).expect("valid");
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
            ..CoordinatorSettings::default()
        };
        let config = coordinator_config(coordinator, &FileConfig::default(), Defaults::LIBRARY)
            .expect("valid");
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
        let config =
            worker_config(worker, &FileConfig::default(), Defaults::LIBRARY).expect("valid");
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
        let config =
            worker_config(WorkerSettings::default(), &file, Defaults::LIBRARY).expect("valid");
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
    fn zero_concurrency_is_rejected() {
        let err = worker_config(
            worker(Some(0), None),
            &FileConfig::default(),
            Defaults::LIBRARY,
        )
        .expect_err("invalid");
        assert!(err.to_string().contains("concurrency"), "{err}");
    }
}
