//! The `taskwire` binary: parses arguments, starts logging and runs the command
//! (see the `taskwire_cli` library).

use std::process::ExitCode;

use clap::Parser;
use taskwire_cli::{Cli, errors, telemetry};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // reqwest (the worker's model client) is built without a crypto provider so that
    // ring stays the only one; it must be installed before any client is built. An
    // error only means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    if let Err(e) = telemetry::init(cli.command.default_log_level(), cli.log_format) {
        return errors::report(&e);
    }
    match taskwire_cli::run(cli).await {
        Ok(status) => status,
        Err(e) => errors::report(&e),
    }
}
