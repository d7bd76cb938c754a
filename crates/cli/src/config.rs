//! Settings of `taskwire coordinator` and `taskwire worker`, in layers:
//! defaults → TOML file → `TASKWIRE_*` env → flags.
//!
//! The defaults are the library config types', except where [`Defaults`] moves them:
//! `TASKWIRE_DEFAULT_LISTEN_IP`, which the image sets, puts the default listeners on all
//! interfaces without outranking a file (see `defaults`).
//!
//! Each setting is declared once, as a field of a `settings!` struct of `Option`s: its
//! doc is its help text, its clap attribute its flag and env variable (a flag beats its
//! env variable), its name the key in the file's `[coordinator]` or `[worker]` table,
//! and its `=> slot as CODEC` where it goes in the library config and how
//! `--print-config` shows it (see `codec`). figment layers the flags and env, as clap
//! read them, over the file's table; the result is put on the defaults, so the defaults
//! live in one place: the library config types.
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
use figment::value::{Dict, Map};
use figment::{Figment, Metadata, Profile, Provider};
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

    /// Parses and checks the whole file (a typo in either table is an error for both
    /// commands), with the `toml` crate's messages: line, column and the keys expected.
    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }
}

/// Declares a settings struct: every field an `Option` (left out of `--print-config`
/// when unset), written `pub NAME: Option<TYPE> => SLOT [as CODEC],` where `SLOT` is
/// its place in the library config `for` names (`model.base_url`) and `CODEC` the
/// [`codec::Codec`] that puts it there and shows it ([`codec::Same`] when left out).
/// From the fields it writes `apply` (the settings put in a config) and `printable`
/// (a config's settings, secrets redacted).
///
/// The NATS connection options the coordinator and the worker share
/// (`nats_credentials_file`, `nats_token`, `nats_tls_ca`, `nats_require_tls`) are pasted
/// in after the fields given rather than kept in a struct both sections flatten: serde's
/// `flatten` does not work with `deny_unknown_fields`, and the flags, env variables and
/// file keys must stay flat (`--nats-token`, `TASKWIRE_NATS_TOKEN`, `nats_token`).
macro_rules! settings {
    (@codec) => { $crate::config::codec::Same };
    (@codec $codec:path) => { $codec };
    (
        $(#[$meta:meta])*
        pub struct $name:ident for $config:ty { $($fields:tt)+ }
    ) => {
        settings! {
            @struct $(#[$meta])* $name for $config { $($fields)+
                /// NATS credentials file (JWT and NKey seed)
                #[arg(long, env = "TASKWIRE_NATS_CREDENTIALS_FILE", value_name = "FILE")]
                pub nats_credentials_file: Option<std::path::PathBuf> => nats.credentials_file,
                /// NATS token; never printed
                #[arg(
                    long,
                    env = "TASKWIRE_NATS_TOKEN",
                    value_name = "TOKEN",
                    hide_env_values = true
                )]
                pub nats_token: Option<String> => nats.token as $crate::config::codec::Secret,
                /// PEM root certificates to trust for the NATS server
                #[arg(long, env = "TASKWIRE_NATS_TLS_CA", value_name = "FILE")]
                pub nats_tls_ca: Option<std::path::PathBuf> => nats.tls_ca,
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
                pub nats_require_tls: Option<bool> => nats.require_tls,
            }
        }
    };
    (
        @struct $(#[$meta:meta])* $name:ident for $config:ty {
            $(
                $(#[$field_meta:meta])*
                pub $field:ident: $ty:ty => $($slot:ident).+ $(as $codec:path)?,
            )+
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
            /// `c` with every field set here put in its place; what the CLI has no
            /// setting for keeps its value.
            pub fn apply(self, mut c: $config) -> $config {
                use $crate::config::codec::Codec;
                $(
                    <settings!(@codec $($codec)?) as Codec<_, _>>::put(
                        &mut c.$($slot).+,
                        self.$field,
                    );
                )+
                c
            }

            /// Every setting of `c`, secrets redacted, for `--print-config`; unset
            /// optional ones are left out (TOML has no null).
            pub fn printable(c: &$config) -> Self {
                use $crate::config::codec::Codec;
                Self {
                    $(
                        $field: <settings!(@codec $($codec)?) as Codec<_, _>>::show(
                            &c.$($slot).+,
                        ),
                    )+
                }
            }
        }
    };
}

mod codec;
mod coordinator;
mod defaults;
mod worker;

pub use coordinator::CoordinatorSettings;
pub use defaults::{DEFAULT_LISTEN_IP_ENV, Defaults, WORKER_HTTP_PORT};
pub use worker::WorkerSettings;

/// One layer of settings as figment reads it, named for figment's messages.
struct Layer<S> {
    name: &'static str,
    settings: S,
}

impl<S: serde::Serialize> Provider for Layer<S> {
    fn metadata(&self) -> Metadata {
        Metadata::named(self.name)
    }

    fn data(&self) -> figment::Result<Map<Profile, Dict>> {
        // An error here (a path that is not UTF-8) is told with this layer's name.
        figment::providers::Serialized::defaults(&self.settings).data()
    }
}

/// `flags` (flags and env, as clap read them) over `file` (the file's table of the
/// section): figment merges them, so a field set in the higher layer wins and one
/// unset there keeps the lower's value. The defaults, the bottom layer, are the library
/// config the result is applied to.
fn layered<S>(section: &str, file: S, flags: S) -> anyhow::Result<S>
where
    S: serde::Serialize + serde::de::DeserializeOwned,
{
    Figment::new()
        .merge(Layer {
            name: "the config file",
            settings: file,
        })
        .merge(Layer {
            name: "flags or TASKWIRE_* env",
            settings: flags,
        })
        .extract()
        .with_context(|| format!("invalid {section} config"))
}

/// The effective coordinator config: `flags` (flags and env, as clap read them) over the
/// file's `[coordinator]` table over `defaults`.
pub fn coordinator_config(
    flags: CoordinatorSettings,
    file: &FileConfig,
    defaults: Defaults,
) -> anyhow::Result<CoordinatorConfig> {
    let file = file.coordinator.clone().unwrap_or_default();
    let config = layered("coordinator", file, flags)?.apply(defaults.coordinator());
    if config.ack_wait.is_zero() {
        bail!("invalid coordinator config: ack_wait must be more than zero");
    }
    if config.sweep_interval.is_zero() {
        bail!("invalid coordinator config: sweep_interval must be more than zero");
    }
    if config.schedule_interval.is_zero() {
        bail!("invalid coordinator config: schedule_interval must be more than zero");
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
    let file = file.worker.clone().unwrap_or_default();
    let config = WorkerSettings::layered(file, flags)?.apply(defaults.worker());
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
mod tests;
