//! What this crate's unit tests share: command-line parsing cut off from the
//! environment.
//!
//! Most flags also read a `TASKWIRE_*` variable, and the shells that run the tests
//! export some (`scripts/with-services.sh` sets `TASKWIRE_NATS_URL`). A unit test that
//! parsed through clap as the binary does would see them and assert on the machine
//! instead of the code, so tests parse with [`parse`].

use std::ffi::OsString;

/// Parses `args` as `P` with no argument bound to an environment variable: only the
/// flags given and the defaults count.
pub fn parse<P: clap::Parser>(
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
) -> Result<P, clap::Error> {
    let mut matches = without_env(P::command()).try_get_matches_from(args)?;
    P::from_arg_matches_mut(&mut matches)
}

/// `command` and its subcommands with every `env = ...` link removed.
fn without_env(command: clap::Command) -> clap::Command {
    command
        .mut_args(|arg| arg.env(None))
        .mut_subcommands(without_env)
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    /// Tests that parse flags and would fail if they read the variables set below.
    const ENV_SENSITIVE_TESTS: [&str; 2] = [
        "config::tests::parsed_flags_beat_the_file_which_beats_defaults",
        "cli::tests::servers_log_info_and_clients_warn_by_default",
    ];

    #[test]
    fn unit_tests_ignore_taskwire_variables_in_their_environment() {
        // Runs the tests again in a child whose environment sets values they would
        // notice: another NATS URL and prefix, an invalid log format.
        let exe = std::env::current_exe().expect("the test executable");
        let out = Command::new(exe)
            .args(ENV_SENSITIVE_TESTS)
            .args(["--exact", "--test-threads", "1"])
            .env("TASKWIRE_NATS_URL", "nats://127.0.0.1:1")
            .env("TASKWIRE_PREFIX", "from-env")
            .env("TASKWIRE_LOG_FORMAT", "not-a-format")
            .output()
            .expect("the test executable runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "a unit test saw TASKWIRE_* variables:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Guards against a renamed test: zero tests run would pass as well.
        assert!(
            stdout.contains(&format!("{} passed", ENV_SENSITIVE_TESTS.len())),
            "the named tests did not all run:\n{stdout}"
        );
    }
}
