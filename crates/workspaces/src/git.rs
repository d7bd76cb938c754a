//! Running the `git` binary: one builder for the repository, work tree and index a
//! command works on, and the environment every command gets.
//!
//! Every command runs with a fixed environment: messages in the C locale (they end up
//! in tool errors), no terminal prompts (a fetch that needs credentials fails instead
//! of hanging), no optional lock-taking writes (reading the base never writes to it),
//! only the `file`, `git`, `http(s)` and `ssh` transports (never `ext::`), and none of
//! the caller's `GIT_DIR`-style variables. Commands are killed when their future is
//! dropped, so a cancelled task stops its clone.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use tokio::io::AsyncWriteExt;

use crate::WorkspaceError;

/// Variables that would point git at another repository than the one named.
const INHERITED_REPOSITORY_VARS: [&str; 8] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CONFIG_PARAMETERS",
];

/// Settings given to every command: they decide what a patch looks like, so they must
/// not depend on the machine's git configuration.
const FIXED_CONFIG: [&str; 5] = [
    "core.autocrlf=false",
    "core.fsmonitor=false",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "advice.detachedHead=false",
];

/// A git command line in the making.
#[derive(Debug, Clone)]
pub(crate) struct Git {
    global: Vec<OsString>,
    index: Option<PathBuf>,
    /// The directory commands run in. With a work tree it must be the work tree:
    /// `git apply` writes paths relative to the current directory, not to the work
    /// tree, when started outside it.
    cwd: Option<PathBuf>,
}

impl Git {
    fn new() -> Self {
        let mut global = Vec::new();
        for setting in FIXED_CONFIG {
            global.push("-c".into());
            global.push(setting.into());
        }
        Self {
            global,
            index: None,
            cwd: None,
        }
    }

    /// Commands run in `dir` (`git -C dir`), finding its repository as git does.
    pub(crate) fn in_dir(dir: &Path) -> Self {
        let mut git = Self::new();
        git.global.push("-C".into());
        git.global.push(dir.into());
        git
    }

    /// Commands on the repository `git_dir` (bare, or used without a work tree).
    pub(crate) fn repo(git_dir: &Path) -> Self {
        let mut git = Self::new();
        git.global.push(flag("--git-dir=", git_dir));
        git
    }

    /// Commands on the repository `git_dir` with `work_tree` as its files.
    pub(crate) fn with_work_tree(git_dir: &Path, work_tree: &Path) -> Self {
        let mut git = Self::repo(git_dir);
        git.global.push(flag("--work-tree=", work_tree));
        git.cwd = Some(work_tree.to_owned());
        git
    }

    /// Uses `index` as the index file instead of the repository's own.
    pub(crate) fn index(mut self, index: &Path) -> Self {
        self.index = Some(index.to_owned());
        self
    }

    /// Pathspecs are literal paths, never patterns (a file may be named `*.rs`).
    pub(crate) fn literal_pathspecs(mut self) -> Self {
        self.global.push("--literal-pathspecs".into());
        self
    }

    /// Adds `-c key=value`.
    pub(crate) fn config(mut self, setting: impl Into<OsString>) -> Self {
        self.global.push("-c".into());
        self.global.push(setting.into());
        self
    }

    /// Runs `args`; the trimmed standard output on success, else an error saying it
    /// was to `action`.
    pub(crate) async fn run<S: AsRef<OsStr>>(
        &self,
        action: &str,
        args: &[S],
    ) -> Result<String, WorkspaceError> {
        let output = self.output(args, None).await?;
        checked(action, output).map(|out| String::from_utf8_lossy(&out).trim().to_owned())
    }

    /// Runs `args` with `input` on standard input; the raw standard output.
    pub(crate) async fn run_with_input<S: AsRef<OsStr>>(
        &self,
        action: &str,
        args: &[S],
        input: &[u8],
    ) -> Result<Vec<u8>, WorkspaceError> {
        let output = self.output(args, Some(input)).await?;
        checked(action, output)
    }

    /// Runs `args` and returns whatever happened, for callers that read a non-zero
    /// status as an answer (a conflict, a missing object).
    pub(crate) async fn output<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        input: Option<&[u8]>,
    ) -> Result<Output, WorkspaceError> {
        let mut command = tokio::process::Command::new("git");
        command
            .args(&self.global)
            .args(args)
            .env("LC_ALL", "C")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_ALLOW_PROTOCOL", "file:git:http:https:ssh")
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for var in INHERITED_REPOSITORY_VARS {
            command.env_remove(var);
        }
        if let Some(index) = &self.index {
            command.env("GIT_INDEX_FILE", index);
        }
        if let Some(cwd) = &self.cwd {
            command.current_dir(cwd);
        }
        let mut child = command.spawn().map_err(WorkspaceError::GitMissing)?;
        if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
            // A command that exits early closes its end; its status says why.
            let _ = stdin.write_all(input).await;
            drop(stdin);
        }
        child
            .wait_with_output()
            .await
            .map_err(WorkspaceError::GitMissing)
    }
}

/// `--name=path` as one argument.
fn flag(name: &str, path: &Path) -> OsString {
    let mut arg = OsString::from(name);
    arg.push(path);
    arg
}

/// The standard output of a successful command, else its error output as the reason.
fn checked(action: &str, output: Output) -> Result<Vec<u8>, WorkspaceError> {
    if output.status.success() {
        return Ok(output.stdout);
    }
    Err(WorkspaceError::Git {
        action: action.to_owned(),
        stderr: stderr_of(&output),
    })
}

/// A failed command's error output, trimmed (its status when it printed nothing).
pub(crate) fn stderr_of(output: &Output) -> String {
    let text = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    if text.is_empty() {
        format!("git exited with {}", output.status)
    } else {
        text
    }
}
