//! How a failed command ends: the message on stderr and the exit status.
//!
//! | status | meaning |
//! |---|---|
//! | 0 | success (also when stdout was closed early, as by `| head`) |
//! | 1 | the task finished but not `completed` (`submit --wait`, `watch`), or a local failure |
//! | 2 | a gRPC error (`error: <code>: <message>`), or invalid command-line usage |

use std::process::ExitCode;

/// Exit status of a task that finished without completing.
pub const TASK_NOT_COMPLETED: u8 = 1;
/// Exit status of any other local failure (config, a server that stopped with an error).
pub const FAILURE: u8 = 1;
/// Exit status of a gRPC error, matching clap's status for usage errors.
pub const GRPC_ERROR: u8 = 2;

/// Prints `err` to stderr and returns the process's exit status.
pub fn report(err: &anyhow::Error) -> ExitCode {
    let (message, status) = describe(err);
    if let Some(message) = message {
        eprintln!("{message}");
    }
    ExitCode::from(status)
}

/// The line to print for `err`, if any, and the exit status.
pub fn describe(err: &anyhow::Error) -> (Option<String>, u8) {
    if let Some(status) = err.chain().find_map(|e| e.downcast_ref::<tonic::Status>()) {
        let message = match status.message() {
            "" => code_name(status.code()).replace('_', " "),
            m => m.to_owned(),
        };
        return (
            Some(format!("error: {}: {message}", code_name(status.code()))),
            GRPC_ERROR,
        );
    }
    let broken_pipe = err
        .chain()
        .filter_map(|e| e.downcast_ref::<std::io::Error>())
        .any(|e| e.kind() == std::io::ErrorKind::BrokenPipe);
    if broken_pipe {
        // The reader of stdout went away (`taskwire ls | head`): nothing to report.
        return (None, 0);
    }
    (Some(format!("error: {err:#}")), FAILURE)
}

/// The canonical gRPC name of `code`, in lowercase (`not_found`).
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "ok",
        Code::Cancelled => "cancelled",
        Code::Unknown => "unknown",
        Code::InvalidArgument => "invalid_argument",
        Code::DeadlineExceeded => "deadline_exceeded",
        Code::NotFound => "not_found",
        Code::AlreadyExists => "already_exists",
        Code::PermissionDenied => "permission_denied",
        Code::ResourceExhausted => "resource_exhausted",
        Code::FailedPrecondition => "failed_precondition",
        Code::Aborted => "aborted",
        Code::OutOfRange => "out_of_range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::Unavailable => "unavailable",
        Code::DataLoss => "data_loss",
        Code::Unauthenticated => "unauthenticated",
    }
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::*;

    #[test]
    fn grpc_errors_print_code_and_message_and_exit_2() {
        let err = anyhow::Error::from(tonic::Status::not_found("task 42 not found"));
        assert_eq!(
            describe(&err),
            (Some("error: not_found: task 42 not found".to_owned()), 2)
        );
    }

    #[test]
    fn grpc_errors_are_found_under_context() {
        let err = Err::<(), _>(tonic::Status::unavailable("down"))
            .context("while watching")
            .expect_err("error");
        assert_eq!(
            describe(&err),
            (Some("error: unavailable: down".to_owned()), 2)
        );
    }

    #[test]
    fn other_errors_exit_1_with_their_chain() {
        let err = Err::<(), _>(std::io::Error::other("disk full"))
            .context("failed to read config")
            .expect_err("e");
        assert_eq!(
            describe(&err),
            (
                Some("error: failed to read config: disk full".to_owned()),
                1
            )
        );
    }

    #[test]
    fn closed_stdout_is_not_an_error() {
        let err = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert_eq!(describe(&err), (None, 0));
    }
}

/// Why a command-line (or environment) value was refused; clap prints it after
/// `invalid value ... for <ARG>`.
#[derive(Debug, thiserror::Error)]
pub enum ArgError {
    #[error("empty duration")]
    EmptyDuration,
    /// A fraction (`1.5s`), which humantime reads but taskwire's durations never took.
    #[error(
        "invalid duration {input:?}: use whole numbers, such as 1500ms for 1.5s \
         (examples: 30s, 5m, 1h30m, 250ms)"
    )]
    FractionalDuration { input: String },
    #[error("invalid duration {input:?}: {source} (examples: 30s, 5m, 1h30m, 250ms)")]
    Duration {
        input: String,
        #[source]
        source: humantime::DurationError,
    },
    /// `expected` lists the valid names, comma-separated.
    #[error("unknown status {status:?}, expected one of: {expected}")]
    UnknownStatus { status: String, expected: String },
    #[error("the command name is empty; expected /NAME, such as /review")]
    EmptyCommandName,
    #[error("failed to read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// `origin` is the file, or `--input` for inline text.
    #[error("{origin} is not valid json: {source}")]
    NotJson {
        origin: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{origin} must be a json object, such as '{{\"path\": \"src\"}}'")]
    NotObject { origin: String },
    /// `--models` is not a valid model catalogue.
    #[error(transparent)]
    Models(serde_json::Error),
}
