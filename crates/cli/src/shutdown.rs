//! Signals to shutdown: SIGINT or SIGTERM cancels the token the servers run under,
//! a second signal ends the process at once.
//!
//! `tokio::signal::ctrl_c` only covers SIGINT, while orchestrators stop processes with
//! SIGTERM, so both are listened for explicitly.

use anyhow::Context;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Starts the `signal-handler` task for `token`. Failure policy: none to handle after
/// start-up; on the second signal it exits the process (status 128 + signal number).
pub fn cancel_on_signals(token: CancellationToken) -> anyhow::Result<()> {
    let mut sigint = signal(SignalKind::interrupt()).context("failed to listen for sigint")?;
    let mut sigterm = signal(SignalKind::terminate()).context("failed to listen for sigterm")?;
    tokio::spawn(async move {
        let Some((name, _)) = next_signal(&mut sigint, &mut sigterm).await else {
            return;
        };
        tracing::info!(
            signal = name,
            "shutting down gracefully, send the signal again to stop at once"
        );
        token.cancel();
        let Some((name, number)) = next_signal(&mut sigint, &mut sigterm).await else {
            return;
        };
        tracing::warn!(signal = name, "second signal, exiting now");
        std::process::exit(128 + number);
    });
    Ok(())
}

/// The next signal's name and number; `None` once neither stream can deliver any more.
async fn next_signal(sigint: &mut Signal, sigterm: &mut Signal) -> Option<(&'static str, i32)> {
    tokio::select! {
        Some(()) = sigint.recv() => Some(("sigint", 2)),
        Some(()) = sigterm.recv() => Some(("sigterm", 15)),
        else => None,
    }
}
