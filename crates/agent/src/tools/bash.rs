//! `bash`: run a shell command in the workspace.
//!
//! The command runs as `bash -c` in its own process group, with the workspace root as
//! working directory and a scrubbed environment (nothing of the worker's secrets
//! leaks: only `PATH`, `LANG`, `HOME` = the workspace and `TERM=dumb`). Output of
//! stdout and stderr is interleaved as it arrives and capped, keeping head and tail.
//! On timeout or cancellation the whole group is killed; when the call returns, for
//! whatever reason, nothing it started is left running, so background jobs cannot
//! outlive a call on a shared worker.
//!
//! The command runs confined by the worker's [`CommandSandbox`] (see `sandbox`): it
//! writes only the workspace and a private `TMPDIR`, reads nothing of the worker,
//! reaches no network unless a `network` rule opens hosts through a filtering proxy
//! (see `network`), and has bounded CPU, memory and processes. Where the kernel
//! cannot confine it, the command is refused, unless the worker was started with
//! `--unsafe-no-sandbox`.

mod network;
pub(crate) mod output;
mod sandbox;

pub(crate) use self::sandbox::{Extra, Prepared, prepare_with};

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{ExitStatus, Stdio};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rustix::process::{Pid, Signal, kill_process_group};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};

pub use self::network::NETWORK_PERMISSION;
use self::output::CappedOutput;
pub use self::sandbox::{CommandSandbox, Enforced};
use super::{Tool, ToolContext, ToolOutput, parse_args, schema::parameters, str_arg};
use crate::error::ToolError;
use crate::workspace::Workspace;
use taskwire_definitions::shell::split_commands;

const DEFAULT_TIMEOUT_MS: u64 = 120_000;
const MAX_TIMEOUT_MS: u64 = 600_000;
/// How long to wait for output after the command exited, in case a background job
/// still holds the pipes open; it is then killed with the rest of the group.
const DRAIN_GRACE: Duration = Duration::from_millis(500);
pub(crate) const DEFAULT_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const MAX_TITLE_CHARS: usize = 80;

/// Runs shell commands.
#[derive(Debug, Clone, Default)]
pub struct BashTool {
    /// `None`: the process-wide default, [`CommandSandbox::probed`].
    sandbox: Option<CommandSandbox>,
}

impl BashTool {
    /// A tool confining its commands with `sandbox`.
    pub fn new(sandbox: CommandSandbox) -> Self {
        Self {
            sandbox: Some(sandbox),
        }
    }

    fn sandbox(&self) -> CommandSandbox {
        self.sandbox.clone().unwrap_or_else(CommandSandbox::probed)
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    /// The command to run
    command: String,
    /// Timeout in milliseconds (default 120000)
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    timeout: Option<u64>,
    /// What the command does, in 5-10 words
    #[serde(default)]
    description: Option<String>,
}

#[async_trait]
impl Tool for BashTool {
    fn name(&self) -> &'static str {
        "bash"
    }

    /// Changes files: a command's writes.
    fn changes_files(&self) -> bool {
        true
    }

    fn description(&self) -> &str {
        "Runs a command with `bash -c` in the workspace root and returns its combined \
         stdout and stderr (long output keeps its start and end) and its exit code. The \
         environment is minimal (PATH, LANG, HOME set to the workspace, TERM=dumb, \
         TMPDIR private to the command) and there is no stdin. The command is \
         sandboxed: it can write only the workspace and TMPDIR, cannot read outside \
         the workspace and system directories, and has no network unless the agent's \
         `network` permission allows hosts (then through HTTPS_PROXY). `timeout` is in milliseconds: default 120000, at most \
         600000; the command and everything it started are killed when it expires. \
         Background jobs do not survive the call. Give a short `description` (5-10 \
         words) of what the command does. Prefer the read, list, glob and grep tools for \
         looking at files."
    }

    fn parameters(&self) -> Value {
        static PARAMETERS: LazyLock<Value> = LazyLock::new(parameters::<Args>);
        PARAMETERS.clone()
    }

    fn subject(&self, args: &Value, _workspace: &Workspace) -> String {
        str_arg(args, "command")
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    /// One subject per simple command, so `git status && rm -rf x` must pass the
    /// rules for `rm -rf x` too.
    fn patterns(&self, args: &Value, workspace: &Workspace) -> Vec<String> {
        let command = self.subject(args, workspace);
        let parts = split_commands(&command);
        if parts.is_empty() {
            vec![command]
        } else {
            parts
        }
    }

    fn title(&self, args: &Value) -> String {
        match str_arg(args, "description").filter(|d| !d.trim().is_empty()) {
            Some(description) => description.trim().to_owned(),
            None => {
                let command = str_arg(args, "command").unwrap_or("?").trim();
                match command.char_indices().nth(MAX_TITLE_CHARS) {
                    Some((cut, _)) => format!("{}...", &command[..cut]),
                    None => command.to_owned(),
                }
            }
        }
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let title = self.title(&args);
        let args: Args = parse_args(self.name(), args)?;
        let timeout_ms = match args.timeout {
            Some(0) => {
                return Err(ToolError::invalid_arguments(
                    self.name(),
                    "timeout must be at least 1 ms",
                ));
            }
            Some(ms) => ms.min(MAX_TIMEOUT_MS),
            None => DEFAULT_TIMEOUT_MS,
        };
        let sandbox = self.sandbox();
        // A command may change any file, while it runs and until it ends.
        ctx.workspace.wrote_anywhere();
        let run = run(
            &args.command,
            ctx,
            &sandbox,
            Duration::from_millis(timeout_ms),
        )
        .await;
        ctx.workspace.wrote_anywhere();
        let run = run?;
        match run.ending {
            Ending::Cancelled => Err(ToolError::Cancelled),
            Ending::TimedOut => Err(ToolError::CommandTimedOut {
                timeout_ms,
                output: run.output.render(),
            }),
            Ending::Exited(status) => {
                let code = status.code();
                let mut output = run.output.render();
                if output.is_empty() {
                    output.push_str("(no output)");
                }
                match (code, status.signal()) {
                    (Some(code), _) => output.push_str(&format!("\n(exit code {code})")),
                    (None, Some(signal)) => {
                        output.push_str(&format!("\n(terminated by signal {signal})"));
                    }
                    (None, None) => output.push_str("\n(exit status unknown)"),
                }
                Ok(ToolOutput {
                    title,
                    output,
                    metadata: json!({
                        "exit_code": code,
                        "bytes": run.output.total(),
                        "truncated": run.output.truncated(),
                        "description": args.description,
                    }),
                })
            }
        }
    }
}

enum Ending {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
}

struct Run {
    ending: Ending,
    output: CappedOutput,
}

async fn run(
    command: &str,
    ctx: &ToolContext<'_>,
    sandbox: &CommandSandbox,
    timeout: Duration,
) -> Result<Run, ToolError> {
    let mut std_command = bash_command(command, ctx.workspace.root(), sandbox);
    std_command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let prepared =
        self::sandbox::prepare(sandbox, &ctx.workspace, ctx.permissions, &mut std_command).await?;
    std_command.envs(prepared.env.iter().map(|(name, value)| (name, value)));
    let spawned = tokio::process::Command::from(std_command)
        .kill_on_drop(true)
        .spawn();
    let child = match spawned {
        Ok(child) => child,
        Err(err) => {
            prepared.release().await;
            return Err(ToolError::Failed {
                tool: "bash".into(),
                reason: format!("failed to start bash: {err}"),
            });
        }
    };
    let run = supervise(child, ctx, timeout).await;
    prepared.release().await;
    run
}

/// `bash -c command` in `root`, in a process group of its own (so that one signal
/// reaches everything it starts), with the scrubbed environment of the module's
/// description: `PATH`, `LANG`, `HOME` = `root`, `TERM=dumb`. Not yet confined: the
/// caller prepares the sandbox and sets the standard streams.
pub(crate) fn bash_command(
    command: &str,
    root: &std::path::Path,
    sandbox: &CommandSandbox,
) -> std::process::Command {
    // A sandboxed command cannot use the worker's own PATH entries (often under its
    // home directory), only the system's.
    let path = match sandbox {
        CommandSandbox::Unsandboxed => {
            std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.to_owned())
        }
        CommandSandbox::Enforced(_) | CommandSandbox::Refused { .. } => DEFAULT_PATH.to_owned(),
    };
    let lang = std::env::var("LANG").unwrap_or_else(|_| "C.UTF-8".to_owned());
    let mut std_command = std::process::Command::new("bash");
    std_command
        .arg("-c")
        .arg(command)
        .current_dir(root)
        .env_clear()
        .env("PATH", path)
        .env("LANG", lang)
        .env("HOME", root)
        .env("TERM", "dumb")
        .process_group(0);
    std_command
}

/// Collects the output of `child` until it exits, times out or is cancelled, then
/// kills its whole process group.
async fn supervise(
    mut child: tokio::process::Child,
    ctx: &ToolContext<'_>,
    timeout: Duration,
) -> Result<Run, ToolError> {
    // Kills the group on every way out, including this future being dropped when the
    // session is cancelled mid-turn.
    let group = ProcessGroup::of(child.id());
    let output = Mutex::new(CappedOutput::default());
    // A block, so the readers (which borrow `output`) are gone before it is taken.
    let ending = {
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let readers = async { tokio::join!(pump(stdout, &output), pump(stderr, &output)) };
        let mut readers = std::pin::pin!(readers);
        let deadline = tokio::time::sleep(timeout);
        let mut deadline = std::pin::pin!(deadline);

        let mut drained = false;
        let ending = loop {
            tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => break Ending::Cancelled,
                () = &mut deadline => break Ending::TimedOut,
                _ = &mut readers, if !drained => drained = true,
                status = child.wait() => match status {
                    Ok(status) => break Ending::Exited(status),
                    Err(err) => {
                        return Err(ToolError::Failed {
                            tool: "bash".into(),
                            reason: format!("failed to wait for the command: {err}"),
                        });
                    }
                },
            }
        };
        if !matches!(ending, Ending::Exited(_)) {
            group.kill();
        }
        if !drained {
            // After a kill the pipes close at once; after a normal exit only a
            // background job can keep them open, and it is killed below.
            let _ = tokio::time::timeout(DRAIN_GRACE, &mut readers).await;
        }
        ending
    };
    group.kill();
    // Reap the leader if it was killed; kill_on_drop covers a wait that fails.
    if !matches!(ending, Ending::Exited(_)) {
        let _ = tokio::time::timeout(DRAIN_GRACE, child.wait()).await;
    }
    let output = output
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Ok(Run { ending, output })
}

/// Copies a pipe into the shared capped buffer until end of file.
async fn pump(pipe: Option<impl AsyncRead + Unpin>, output: &Mutex<CappedOutput>) {
    let Some(mut pipe) = pipe else { return };
    let mut buf = vec![0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => output
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(&buf[..n]),
        }
    }
}

/// The command's process group, killed (SIGKILL) on drop.
pub(crate) struct ProcessGroup(Option<Pid>);

impl ProcessGroup {
    pub(crate) fn of(pid: Option<u32>) -> Self {
        Self(
            pid.and_then(|pid| i32::try_from(pid).ok())
                .and_then(Pid::from_raw),
        )
    }

    pub(crate) fn kill(&self) {
        if let Some(pid) = self.0 {
            // ESRCH (nothing left in the group) is the normal case after an exit.
            let _ = kill_process_group(pid, Signal::KILL);
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests;
