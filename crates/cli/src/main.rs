//! The `taskwire` binary: parses arguments, starts telemetry and runs the command
//! (see the `taskwire_cli` library).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use taskwire_cli::{Cli, errors, telemetry};

/// Once the command is done, how long blocking work it left behind (a file walk of a
/// tool call that was stopped mid-way) may hold up the exit.
const BLOCKING_WORK_GRACE: Duration = Duration::from_secs(2);

/// mimalloc: the coordinator and worker allocate many small, short-lived buffers across
/// threads, where it measured faster than the system allocator (see `taskwire-bench`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // With transparent huge pages on (`always`, as many distributions ship), the
    // kernel backs mimalloc's arenas with 2 MiB pages, so memory freed and reused in
    // small pieces stays resident a whole huge page at a time: it measured about a
    // fifth more memory per session waiting on the model (see `taskwire-bench`). A
    // kernel that refuses it leaves the process as it was.
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    let mut cli = Cli::parse();
    // Still one thread: a worker enters its own mount namespace here, if it may.
    taskwire_cli::prepare_process(&cli);
    // reqwest (the worker's model client) is built without a crypto provider so that
    // ring stays the only one; it must be installed before any client is built. An
    // error only means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Runtime::new().context("failed to start the tokio runtime")
    {
        Ok(runtime) => runtime,
        Err(e) => return errors::report(&e),
    };
    // Servers export traces when an OTLP endpoint is configured; the gRPC exporter
    // connects on the runtime.
    let started = {
        let _runtime = runtime.enter();
        taskwire_cli::trace_settings(&mut cli, |name| std::env::var(name).ok()).and_then(|traces| {
            telemetry::init(cli.command.default_log_level(), cli.log_format, traces)
        })
    };
    let telemetry = match started {
        Ok(telemetry) => telemetry,
        Err(e) => return errors::report(&e),
    };
    let status = match runtime.block_on(taskwire_cli::run(cli)) {
        Ok(status) => status,
        Err(e) => errors::report(&e),
    };
    // Blocks until the last spans are sent, on the runtime that still runs.
    telemetry.shutdown();
    // Dropping the runtime would wait for all blocking work, however long it takes.
    runtime.shutdown_timeout(BLOCKING_WORK_GRACE);
    status
}
