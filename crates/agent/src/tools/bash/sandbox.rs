//! How the `bash` tool confines its commands: [`CommandSandbox`], chosen once per
//! worker, and the per-command preparation (private temp dir, network proxy,
//! [`SandboxPolicy`]).

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use taskwire_sandbox::proxy::{Proxy, ProxyRules};
use taskwire_sandbox::{
    Confinement, Limits, Network, PrivateTemp, Sandbox, SandboxPolicy, Support,
};

use super::network::NetworkLayers;
use crate::error::ToolError;
use crate::workspace::Workspace;
use taskwire_definitions::permission::Permissions;

/// Whether and how this worker confines the commands tools start.
#[derive(Clone, Debug)]
pub enum CommandSandbox {
    /// Every command runs in the sandbox.
    Enforced(Arc<Enforced>),
    /// The kernel lacks a mechanism: commands are refused with `reason`.
    Refused { reason: String },
    /// Started with `--unsafe-no-sandbox`: commands run with the worker's powers.
    Unsandboxed,
}

/// The sandbox and what the network proxy must refuse.
#[derive(Debug)]
pub struct Enforced {
    pub sandbox: Sandbox,
    /// Addresses no command may reach even when a `network` rule allows the host
    /// (the worker's NATS servers).
    pub denied: Vec<IpAddr>,
    pub limits: Limits,
}

impl CommandSandbox {
    /// The mode for a kernel with `support`: enforced when nothing is missing,
    /// unsandboxed when `unsafe_no_sandbox`, refused otherwise. `hidden` are files no
    /// command may read (credentials, keys, the config file); `denied` addresses no
    /// command may reach (the worker's NATS servers).
    pub fn new(
        support: Support,
        unsafe_no_sandbox: bool,
        hidden: &[PathBuf],
        denied: Vec<IpAddr>,
    ) -> Self {
        if unsafe_no_sandbox {
            return Self::Unsandboxed;
        }
        match Sandbox::new(support, hidden) {
            Ok(sandbox) => Self::Enforced(Arc::new(Enforced {
                sandbox,
                denied,
                limits: Limits::default(),
            })),
            Err(err) => Self::Refused {
                reason: err.to_string(),
            },
        }
    }

    /// The default of a tool built without one: the kernel probed once per process,
    /// no unsafe fallback.
    pub fn probed() -> Self {
        static PROBED: OnceLock<CommandSandbox> = OnceLock::new();
        PROBED
            .get_or_init(|| Self::new(taskwire_sandbox::probe(), false, &[], Vec::new()))
            .clone()
    }
}

/// What one command holds while it runs: dropped (off the runtime, since removing a
/// temp tree and a cgroup blocks) once it and everything it started have ended.
pub(crate) struct Prepared {
    pub env: Vec<(&'static str, String)>,
    pub guard: Option<Guard>,
}

pub(crate) struct Guard {
    _confinement: Confinement,
    _temp: PrivateTemp,
    _proxy: Option<Proxy>,
}

impl Prepared {
    pub(crate) async fn release(self) {
        if let Some(guard) = self.guard {
            let _ = tokio::task::spawn_blocking(move || drop(guard)).await;
        }
    }
}

/// What a command may use beyond what `bash`'s commands get.
#[derive(Debug, Default)]
pub(crate) struct Extra {
    /// Trees it may read (its program's, outside the system's).
    pub read: Vec<PathBuf>,
    /// Hosts it may reach whatever the session's `network` rules say (wildcards).
    pub hosts: Vec<String>,
}

/// Confines `command` per `sandbox`, for a session in `workspace` whose agent has
/// `rules`; `Err` is the refusal the model sees.
pub(super) async fn prepare(
    sandbox: &CommandSandbox,
    workspace: &Workspace,
    permissions: Permissions<'_>,
    command: &mut std::process::Command,
) -> Result<Prepared, ToolError> {
    prepare_with(sandbox, workspace, permissions, command, Extra::default())
        .await
        .map_err(refused)
}

/// [`prepare`] with `extra`; `Err` is why the command may not start.
pub(crate) async fn prepare_with(
    sandbox: &CommandSandbox,
    workspace: &Workspace,
    permissions: Permissions<'_>,
    command: &mut std::process::Command,
    extra: Extra,
) -> Result<Prepared, String> {
    let enforced = match sandbox {
        CommandSandbox::Unsandboxed => {
            return Ok(Prepared {
                env: Vec::new(),
                guard: None,
            });
        }
        CommandSandbox::Refused { reason } => {
            return Err(format!(
                "{reason}; commands run only in the sandbox unless the worker is started \
                 with --unsafe-no-sandbox"
            ));
        }
        CommandSandbox::Enforced(enforced) => enforced.clone(),
    };
    let temp = PrivateTemp::create().map_err(|e| e.to_string())?;
    let mut env = vec![("TMPDIR", temp.path().display().to_string())];
    let layers = NetworkLayers::of(permissions);
    let hosts = extra.hosts;
    let proxy = if layers.opens() || !hosts.is_empty() {
        let proxy = Proxy::start(ProxyRules {
            allow: Arc::new(move |host, port| {
                layers.allows(host, port)
                    || hosts.iter().any(|h| {
                        taskwire_definitions::permission::wildcard_match(
                            &h.to_ascii_lowercase(),
                            host,
                        )
                    })
            }),
            denied: enforced.denied.clone(),
            refuse_local: true,
        })
        .await
        .map_err(|e| format!("failed to start the network proxy: {e}"))?;
        for name in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ] {
            env.push((name, proxy.url()));
        }
        Some(proxy)
    } else {
        None
    };
    let policy = SandboxPolicy {
        workspace: workspace.root().to_owned(),
        temp_dir: temp.path().to_owned(),
        read_only: extra.read,
        network: proxy
            .as_ref()
            .map_or(Network::Closed, |proxy| Network::Proxy {
                port: proxy.port(),
            }),
        limits: enforced.limits,
    };
    let confinement = enforced
        .sandbox
        .confine(command, &policy)
        .map_err(|e| e.to_string())?;
    Ok(Prepared {
        env,
        guard: Some(Guard {
            _confinement: confinement,
            _temp: temp,
            _proxy: proxy,
        }),
    })
}

fn refused(reason: String) -> ToolError {
    ToolError::Failed {
        tool: "bash".into(),
        reason: format!("command refused: {reason}"),
    }
}
