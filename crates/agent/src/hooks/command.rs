//! A command hook: `bash -c COMMAND` in the workspace root, confined like `bash`'s
//! commands, the event on stdin, in its own process group (killed when it ends or
//! times out, with everything it started).

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{MAX_OUTPUT_BYTES, Raw};
use crate::tools::{CommandSandbox, Extra, ProcessGroup, ToolContext, bash_command, prepare_with};

pub(super) async fn run(
    command: &str,
    input: &str,
    timeout: Duration,
    sandbox: &CommandSandbox,
    ctx: &ToolContext<'_>,
) -> Raw {
    let root = ctx.workspace.root();
    let mut std_command = bash_command(command, root, sandbox);
    std_command
        // Where a hook finds the project, under taskwire's name and Claude Code's (so
        // that a copied hook script works).
        .env("TASKWIRE_PROJECT_DIR", root)
        .env("CLAUDE_PROJECT_DIR", root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let prepared = match prepare_with(
        sandbox,
        &ctx.workspace,
        ctx.permissions,
        &mut std_command,
        Extra::default(),
    )
    .await
    {
        Ok(prepared) => prepared,
        Err(reason) => return Raw::Failed(format!("refused by the sandbox: {reason}")),
    };
    std_command.envs(prepared.env.iter().map(|(name, value)| (name, value)));
    // A hook may change files, like a command.
    ctx.workspace.wrote_anywhere();
    let spawned = tokio::process::Command::from(std_command)
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(err) => {
            prepared.release().await;
            return Raw::Failed(format!("failed to start bash: {err}"));
        }
    };
    // Killed on every way out, this future dropped included.
    let group = ProcessGroup::of(child.id());
    let mut stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let work = async {
        let write = async {
            if let Some(stdin) = stdin.as_mut() {
                // A hook that does not read its input closes the pipe: not an error.
                let _ = stdin.write_all(input.as_bytes()).await;
            }
            drop(stdin.take());
        };
        let (_, out, err, status) =
            tokio::join!(write, capped(stdout), capped(stderr), child.wait());
        (out, err, status)
    };
    let ended = tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => Err("cancelled with the session".to_owned()),
        ended = tokio::time::timeout(timeout, work) => {
            ended.map_err(|_| format!("timed out after {} s and was killed", timeout.as_secs()))
        }
    };
    group.kill();
    ctx.workspace.wrote_anywhere();
    prepared.release().await;
    match ended {
        Err(reason) => Raw::Failed(reason),
        Ok((_, _, Err(err))) => Raw::Failed(format!("failed to wait for the command: {err}")),
        Ok((stdout, stderr, Ok(status))) => match status.code() {
            Some(code) => Raw::Exited {
                code,
                stdout,
                stderr,
            },
            None => Raw::Failed("terminated by a signal".into()),
        },
    }
}

/// Reads a pipe to its end, keeping the first [`MAX_OUTPUT_BYTES`].
async fn capped(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    let Some(mut pipe) = pipe else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = MAX_OUTPUT_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}
