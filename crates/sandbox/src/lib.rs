//! Confinement of the commands that tools start (the `bash` tool), with the kernel's
//! own mechanisms. Linux only.
//!
//! A confined command can write only its workspace and a private temp directory;
//! read the system trees (`/usr`, `/etc` without its secrets, ...) and the
//! workspace, and nothing of the worker (`/proc` is closed, credentials and the home
//! directory are not granted); open no socket but a Unix socket pair, unless its
//! policy opens TCP towards the filtering [`proxy`]; make none of the system calls
//! that escape or spy (`ptrace`, namespaces, `mount`, `bpf`, keyrings, ...); and use
//! bounded CPU, memory, processes, file size and open files. It keeps no capability,
//! even when the worker runs as root.
//!
//! Use: [`probe`] at start, then [`Sandbox::new`] once; per command, a
//! [`SandboxPolicy`] and [`Sandbox::confine`] on the `Command` before spawning it.
//!
//! Modules:
//! - [`policy`]: [`SandboxPolicy`], [`Network`], [`Limits`].
//! - [`probe`](mod@probe): [`probe`], [`Support`], [`ProcessLimit`].
//! - [`proxy`]: the HTTP proxy through which an opened network is filtered by host.
//! - `confine`: [`Sandbox`], [`Confinement`], [`PrivateTemp`].
//! - `paths`: the system trees, with hidden paths carved out.
//! - `ruleset`: the Landlock ruleset of one command.
//! - `seccomp`: the seccomp programs.
//! - `cgroup`: the per-command pids cgroup.
//! - [`mounts`]: a mount namespace of the worker's own, for its workspaces' overlays.
//! - `sys`: the only unsafe code: raw system calls and the pre-exec hook.
//! - [`error`](mod@error): [`SandboxError`].

mod cgroup;
mod confine;
pub mod error;
pub mod mounts;
mod paths;
pub mod policy;
pub mod probe;
pub mod proxy;
mod ruleset;
mod seccomp;
mod sys;

pub use confine::{Confinement, PrivateTemp, Sandbox};
pub use error::SandboxError;
pub use policy::{Limits, Network, SandboxPolicy};
pub use probe::{MIN_LANDLOCK_ABI, ProcessLimit, Support, probe};

/// Makes the calling process non-dumpable, so that processes of the same user cannot
/// read its memory or `/proc/<pid>/environ` (where a worker keeps its model API key),
/// a layer under the sandbox, which already closes `/proc`.
pub fn protect_current_process() -> Result<(), SandboxError> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable).map_err(
        |e| SandboxError::Io {
            action: "make the worker non-dumpable",
            source: e.into(),
        },
    )
}
