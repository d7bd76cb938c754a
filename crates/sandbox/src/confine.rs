//! [`Sandbox`]: the per-worker state (open system paths, compiled filters, the pids
//! cgroup) and [`Sandbox::confine`], which makes one command start confined.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use seccompiler::BpfProgram;

use crate::cgroup::{CommandCgroup, PidsCgroup};
use crate::error::SandboxError;
use crate::paths::SystemPaths;
use crate::policy::{Network, SandboxPolicy};
use crate::probe::{ProcessLimit, Support};
use crate::sys::{ChildSetup, Limit};
use crate::{ruleset, seccomp, sys};

/// Confines the commands of one worker. Build it once (it opens the system trees and
/// compiles the filters) and share it; [`Sandbox::confine`] is cheap.
#[derive(Debug)]
pub struct Sandbox {
    support: Support,
    system: SystemPaths,
    closed: Arc<Vec<BpfProgram>>,
    proxied: Arc<Vec<BpfProgram>>,
    cgroup: Option<PidsCgroup>,
    privileged: bool,
}

impl Sandbox {
    /// A sandbox for a kernel with `support`, hiding `hidden` (credentials, keys, the
    /// config file) from every command even where they sit in a readable system tree.
    /// Fails when `support` lacks a required mechanism.
    pub fn new(support: Support, hidden: &[PathBuf]) -> Result<Self, SandboxError> {
        support.check()?;
        let cgroup = match support.process_limit {
            ProcessLimit::Cgroup => PidsCgroup::create(),
            ProcessLimit::Rlimit | ProcessLimit::Unenforced => None,
        };
        Ok(Self {
            support,
            system: SystemPaths::open(hidden)?,
            closed: Arc::new(seccomp::programs(false)?),
            proxied: Arc::new(seccomp::programs(true)?),
            cgroup,
            privileged: rustix::process::geteuid().is_root(),
        })
    }

    /// Probes the kernel and builds a sandbox hiding nothing extra: for tests and
    /// tools that have no credentials of their own.
    pub fn probe_and_build() -> Result<Self, SandboxError> {
        Self::new(crate::probe(), &[])
    }

    pub fn support(&self) -> Support {
        self.support
    }

    /// Makes `command` start confined by `policy`: it joins its own pids cgroup, lowers
    /// its limits, drops every capability, and enters the Landlock domain and the
    /// seccomp filters, between fork and exec. The caller sets the environment and
    /// working directory (the environment should be cleared). Keep the returned
    /// [`Confinement`] until the command and everything it started have ended.
    pub fn confine(
        &self,
        command: &mut Command,
        policy: &SandboxPolicy,
    ) -> Result<Confinement, SandboxError> {
        let ruleset = ruleset::build(self.support.landlock_abi, &self.system, policy)?;
        let mut cgroup =
            self.cgroup
                .as_ref()
                .and_then(|cgroup| match cgroup.command(policy.limits.processes) {
                    Ok(group) => Some(group),
                    Err(error) => {
                        tracing::warn!(%error, "failed to create a command cgroup, using rlimits");
                        None
                    }
                });
        let cgroup_procs = cgroup.as_mut().and_then(CommandCgroup::take_procs);
        let l = policy.limits;
        let limit = |resource, soft: u64, hard: u64| Limit {
            resource,
            soft,
            hard,
        };
        let mut limits = vec![
            limit(
                libc::RLIMIT_CPU,
                l.cpu_seconds,
                l.cpu_seconds.saturating_add(1),
            ),
            limit(libc::RLIMIT_DATA, l.memory_bytes, l.memory_bytes),
            limit(libc::RLIMIT_FSIZE, l.file_size_bytes, l.file_size_bytes),
            limit(libc::RLIMIT_NOFILE, l.open_files, l.open_files),
            limit(libc::RLIMIT_CORE, 0, 0),
        ];
        if cgroup_procs.is_none() {
            limits.push(limit(libc::RLIMIT_NPROC, l.processes, l.processes));
        }
        let filters = match policy.network {
            Network::Closed => self.closed.clone(),
            Network::Proxy { .. } => self.proxied.clone(),
        };
        sys::install(
            command,
            ChildSetup {
                ruleset,
                filters,
                limits,
                cgroup_procs,
                privileged: self.privileged,
            },
        );
        Ok(Confinement { _cgroup: cgroup })
    }
}

/// What must live as long as a confined command: its cgroup, whose remaining
/// processes are killed and which is removed on drop (blocking briefly while the
/// kernel releases them).
#[derive(Debug)]
pub struct Confinement {
    _cgroup: Option<CommandCgroup>,
}

/// A command's private temp directory (`TMPDIR`), readable by no other command and
/// removed with everything in it on drop.
#[derive(Debug)]
pub struct PrivateTemp(tempfile::TempDir);

impl PrivateTemp {
    /// Creates `taskwire-cmd-*` (mode 0700) in the worker's temp directory.
    pub fn create() -> Result<Self, SandboxError> {
        tempfile::Builder::new()
            .prefix("taskwire-cmd-")
            .tempdir()
            .map(Self)
            .map_err(SandboxError::io("create a private temp directory"))
    }

    pub fn path(&self) -> &std::path::Path {
        self.0.path()
    }
}
