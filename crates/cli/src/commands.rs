//! One module per subcommand, each with its clap `Args` and an async `run` that returns
//! the process's exit status; plus what the client commands share: the connection to
//! the coordinator and following a task's Watch stream.

pub mod agents;
pub mod approve;
pub mod cancel;
pub mod coordinator;
pub mod get;
pub mod ls;
pub mod mcp;
pub mod replay;
pub mod run_command;
pub mod schedule;
pub mod submit;
pub mod watch;
pub mod worker;

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::cli::ClientArgs;

use crate::errors::TASK_NOT_COMPLETED;
use crate::output::is_completed;

/// A connection fails fast rather than hanging a script on an unreachable address.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Results carry their whole patch (up to 64 MiB) and may carry inline attachments;
/// tonic's 4 MiB default is too tight for them.
const MAX_MESSAGE_BYTES: usize = taskwire_protocol::MAX_PATCH_BYTES as usize + 16 * 1024 * 1024;

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
/// means http; `https://` needs `--tls-ca`). A bad address, and a failure to connect,
/// are gRPC statuses so that they are reported like any other call's; an unreadable CA
/// file is a local failure.
pub async fn connect(args: &ClientArgs) -> anyhow::Result<Client> {
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
    let mut endpoint = Endpoint::from_shared(url)
        .map_err(|e| {
            tonic::Status::invalid_argument(format!("invalid coordinator address {addr:?}: {e}"))
        })?
        .connect_timeout(CONNECT_TIMEOUT);
    let use_tls = endpoint.uri().scheme_str() == Some("https");
    if let Some(ca) = trusted_ca(addr, use_tls, args.tls_ca.as_deref())? {
        endpoint = endpoint
            .tls_config(ClientTlsConfig::new().ca_certificate(read_ca(ca)?))
            .map_err(|e| {
                anyhow::anyhow!(
                    "failed to set up tls with the ca in {}: {}",
                    ca.display(),
                    error_chain(&e)
                )
            })?;
    }
    let channel = endpoint.connect().await.map_err(|e| {
        tonic::Status::unavailable(format!("failed to connect to {addr}: {}", error_chain(&e)))
    })?;
    Ok(
        TaskServiceClient::with_interceptor(channel, BearerToken(token))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),
    )
}

/// The CA to trust for a connection to `addr`: `https://` needs one, since the
/// workspace builds tonic with `tls-ring` alone, without `tls-native-roots` or
/// `tls-webpki-roots`, so there are no system or public roots to fall back on; and a CA
/// with a plaintext address is refused rather than silently ignored.
fn trusted_ca<'a>(
    addr: &str,
    use_tls: bool,
    ca: Option<&'a Path>,
) -> Result<Option<&'a Path>, tonic::Status> {
    match (use_tls, ca) {
        (true, Some(ca)) => Ok(Some(ca)),
        (true, None) => Err(tonic::Status::invalid_argument(format!(
            "{addr} uses tls: give the pem certificate of the ca that signed the \
             coordinator's certificate with --tls-ca FILE (or TASKWIRE_TLS_CA); this build \
             has no system or public root certificates"
        ))),
        (false, Some(ca)) => Err(tonic::Status::invalid_argument(format!(
            "--tls-ca {} was given but {addr} is plaintext: use an https:// address",
            ca.display()
        ))),
        (false, None) => Ok(None),
    }
}

/// Reads a `--tls-ca` file, which must hold at least one PEM certificate: tonic would
/// otherwise skip what it cannot parse and fail only at the handshake, saying less.
fn read_ca(path: &Path) -> anyhow::Result<Certificate> {
    let pem = std::fs::read(path)
        .with_context(|| format!("failed to read the ca certificate {}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("failed to parse the ca certificate {}", path.display()))?;
    if certs.is_empty() {
        anyhow::bail!(
            "failed to read the ca certificate {}: no pem certificate in it",
            path.display()
        );
    }
    Ok(Certificate::from_pem(pem))
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

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn https_needs_a_ca_and_says_how_to_give_one() {
        let ca = Path::new("ca.pem");
        assert_eq!(
            trusted_ca("https://h:1", true, Some(ca)).expect("ok"),
            Some(ca)
        );
        let err = trusted_ca("https://h:1", true, None).expect_err("no ca");
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.message().contains("--tls-ca FILE"), "{}", err.message());
    }

    #[test]
    fn plaintext_takes_no_ca() {
        assert_eq!(trusted_ca("h:1", false, None).expect("ok"), None);
        let err = trusted_ca("http://h:1", false, Some(Path::new("ca.pem"))).expect_err("ca");
        assert!(err.message().contains("https://"), "{}", err.message());
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused_by_name() {
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        file.write_all(b"not a certificate\n").expect("write");
        let err = read_ca(file.path()).expect_err("no certificate");
        let message = format!("{err:#}");
        assert!(
            message.contains(&file.path().display().to_string()) && message.contains("no pem"),
            "{message}"
        );
        let missing = read_ca(Path::new("/nonexistent/ca.pem")).expect_err("missing");
        assert!(
            format!("{missing:#}").contains("/nonexistent/ca.pem"),
            "{missing:#}"
        );
    }
}
