//! One module per subcommand, each with its clap `Args` and an async `run` that returns
//! the process's exit status; plus what the client commands share: the connection to
//! the coordinator and following a task's Watch stream.

pub mod agents;
pub mod cancel;
pub mod coordinator;
pub mod get;
pub mod ls;
pub mod submit;
pub mod watch;
pub mod worker;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use crate::cli::ClientArgs;

use crate::errors::TASK_NOT_COMPLETED;
use crate::output::is_completed;

/// A connection fails fast rather than hanging a script on an unreachable address.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Results may carry inline attachments; tonic's 4 MiB default is too tight for them.
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

pub type Client = TaskServiceClient<InterceptedService<Channel, BearerToken>>;

/// Adds `authorization: Bearer <token>` to every call when a token was given.
#[derive(Clone)]
pub struct BearerToken(Option<MetadataValue<Ascii>>);

impl Interceptor for BearerToken {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// Connects to the coordinator at `args.addr` (`http://host:port`; a bare `host:port`
/// means http). Failures are gRPC statuses so that they are reported like any other
/// call's.
pub async fn connect(args: &ClientArgs) -> Result<Client, tonic::Status> {
    let addr = args.addr.as_str();
    let token = match &args.token {
        None => None,
        Some(t) => Some(
            format!("Bearer {t}")
                .parse::<MetadataValue<Ascii>>()
                .map_err(|_| {
                    tonic::Status::invalid_argument("the token must be printable ascii")
                })?,
        ),
    };
    let url = if addr.contains("://") {
        addr.to_owned()
    } else {
        format!("http://{addr}")
    };
    let endpoint = Endpoint::from_shared(url)
        .map_err(|e| {
            tonic::Status::invalid_argument(format!("invalid coordinator address {addr:?}: {e}"))
        })?
        .connect_timeout(CONNECT_TIMEOUT);
    let channel = endpoint.connect().await.map_err(|e| {
        tonic::Status::unavailable(format!("failed to connect to {addr}: {}", error_chain(&e)))
    })?;
    Ok(
        TaskServiceClient::with_interceptor(channel, BearerToken(token))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),
    )
}

/// Follows `task_id`'s Watch stream (which replays from the start), handing each
/// progress event to `on_progress`, and returns the task's result.
pub async fn follow(
    client: &mut Client,
    task_id: &str,
    mut on_progress: impl FnMut(&pb::TaskProgress) -> std::io::Result<()>,
) -> anyhow::Result<pb::TaskResult> {
    use pb::watch_event::Event;
    let mut stream = client
        .watch(pb::WatchRequest {
            task_id: task_id.to_owned(),
        })
        .await?
        .into_inner();
    while let Some(event) = stream.message().await? {
        match event.event {
            Some(Event::Progress(p)) => on_progress(&p).context("failed to write progress")?,
            Some(Event::Result(r)) => return Ok(r),
            None => {}
        }
    }
    Err(
        tonic::Status::unavailable(format!("watch of task {task_id} ended before its result"))
            .into(),
    )
}

/// Success only for a completed task: scripts can chain on `submit --wait`.
pub fn exit_status(result: &pb::TaskResult) -> ExitCode {
    if is_completed(result) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(TASK_NOT_COMPLETED)
    }
}

/// `e: source: source...`, since tonic's transport errors say little at the top level;
/// a source that repeats its parent's words is left out.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut last = out.clone();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if text != last {
            out.push_str(": ");
            out.push_str(&text);
        }
        last = text;
        source = s.source();
    }
    out
}
