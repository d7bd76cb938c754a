//! taskwire's typed bus between the coordinators and the workers.
//!
//! Every envelope and every worker request goes through functions here that take and
//! return domain types: the coordinator and the worker keep orchestration only.
//!
//! - [`subjects`]: every subject and stream name, derived from one prefix so that
//!   several deployments (or tests) can share a server.
//! - [`streams`]: creates the JetStream streams and the durable consumers; reads a
//!   stream's depth, a consumer's pending count, a task's last progress message.
//! - [`consumer`]: typed consumers: [`Consumer<T>`](consumer::Consumer) yields
//!   [`Delivery<T>`](consumer::Delivery)s (or a [`Malformed`](consumer::Malformed)
//!   message, for the dead-letter record), settled through one
//!   [`Settlement`](consumer::Settlement) (ack, nak with delay, term, progress); a
//!   task's progress replayed from the start.
//! - [`subscription`]: typed core NATS [`Subscription`](subscription::Subscription)s
//!   of notices (cancels, approval decisions, finished tasks) and live progress.
//! - [`advisories`]: JetStream's max-deliveries advisory, and the message it is about.
//! - [`limits`]: the limits bucket (JetStream key-value) of the models' rate budgets,
//!   by model.
//! - [`patches`]: the patch bucket (JetStream object store), typed put and get of
//!   patches too large for a message.
//! - [`permissions`]: what each role (coordinator, worker) may publish and subscribe
//!   to, and the nats-server configuration that enforces it.
//! - [`codec`]: the one codec: protobuf envelopes to and from domain values; decode
//!   errors name the envelope and the field.
//! - [`messages`]: the domain values of worker requests, replies and notices.
//! - [`replies`]: worker replies on the wire: a status and the value.
//! - [`methods`]: the table of worker requests: subject, timeout, retry.
//! - [`client`]: [`Bus`], one connection (its state, flush, the server's largest
//!   message), with the typed worker requests (`claim`, `claim_batch`, `child_submit`,
//!   `task_lookup`, `agent_spec`, `session_load`, `session_save`, `approval_ask`,
//!   `approval_check`, `approval_timeout`).
//! - [`claims`]: [`Claimer`](claims::Claimer), a worker's claims batched into one
//!   request (`claim_batch`) when several are asked for at once.
//! - [`batch`]: [`Batcher`](batch::Batcher), the group-commit loop behind batched
//!   claims and the coordinator's submits.
//! - [`publish`]: typed publishes of every envelope and notice.
//! - [`progress`]: progress events coalesced into one message, and read back one by one.
//! - [`specs`]: [`AgentSpecs`], a worker's agent specs by digest, and the decode of a
//!   dispatched request ([`Dispatched`]), which names its spec by digest.
//! - [`server`]: [`WorkerRequests`], implemented by the coordinator, and [`serve`],
//!   the one loop that answers workers.
//! - [`headers`]: header names and [`headers::build`], the one place headers are made
//!   (a dispatch's `traceparent` is the current exported span's when there is one).
//! - [`error`]: [`BusError`], [`RpcError`], [`CodecError`]; each maps to one
//!   [`ErrorCode`](taskwire_protocol::ErrorCode).
//!
//! Streams:
//! - `<P>_TASKS` (WorkQueue, bounded): `TaskRequest`s, one durable pull consumer per queue
//!   shared by all workers of that queue.
//! - `<P>_EVENTS` (Limits, max age): `TaskProgress` per task subject (several events per
//!   message, see [`progress`]), kept for `Watch` replay.
//! - `<P>_RESULTS` (WorkQueue): `TaskResult`s for the coordinator's aggregator.
//! - `<P>_DLQ` (WorkQueue): `DeadLetter`s reported by workers, recorded by the coordinator.
//! - `OBJ_<P>_PATCHES` (Limits, max age, max bytes): the object store bucket
//!   `<P>_PATCHES` of patches too large for a message.
//! - `<P>_ADVISORIES` (WorkQueue): JetStream's max-deliveries advisories for the tasks
//!   stream, kept until a coordinator has handled them.
//!
//! Request/reply (core NATS, queue group `taskwire-coordinators`): claims and the other
//! worker requests, as the [method table](methods) says. Fire-and-forget (core NATS):
//! cancel notices, approval decisions and "task finished" notices that wake watchers.
//!
//! Errors on the wire: a reply's `RpcStatus.code` is the gRPC canonical name of its
//! [`ErrorCode`](taskwire_protocol::ErrorCode) (`NOT_FOUND`); a request nobody answered
//! is `UNAVAILABLE`; a malformed one `INVALID_ARGUMENT`.

pub mod advisories;
pub mod batch;
pub mod claims;
pub mod client;
pub mod codec;
pub mod consumer;
pub mod error;
pub mod headers;
pub mod limits;
pub mod messages;
pub mod methods;
pub mod patches;
pub mod permissions;
pub mod progress;
pub mod publish;
pub mod replies;
pub mod server;
pub mod specs;
pub mod streams;
pub mod subjects;
pub mod subscription;

pub use advisories::MaxDeliveries;
pub use client::Bus;
pub use consumer::{Consumer, Delivery, Malformed, Received, Settlement};
pub use error::{BusError, CodecError, RpcError};
pub use methods::Method;
pub use patches::{PatchError, Patches};
pub use server::{WorkerRequests, serve};
pub use specs::{AgentSpecs, DispatchError, Dispatched};
pub use streams::{
    BusConfig, coordinator_consumer, ensure_streams, tasks_consumer, wait_for_streams,
};
pub use subjects::Subjects;
pub use subscription::Subscription;

/// How to authenticate to NATS and secure the connection. `tls://` URLs use TLS too.
#[derive(Clone, Default)]
pub struct NatsOptions {
    /// A `.creds` file (JWT + NKey seed).
    pub credentials_file: Option<std::path::PathBuf>,
    /// A token (never logged).
    pub token: Option<String>,
    /// PEM root certificates to trust for the server's certificate.
    pub tls_ca: Option<std::path::PathBuf>,
    /// Refuse to connect without TLS.
    pub require_tls: bool,
}

impl std::fmt::Debug for NatsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsOptions")
            .field("credentials_file", &self.credentials_file)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("tls_ca", &self.tls_ca)
            .field("require_tls", &self.require_tls)
            .finish()
    }
}

/// Connects to NATS with taskwire's client options: a named connection that retries
/// the initial connect and reconnects forever, so a broker restart is ridden out.
pub async fn connect(url: &str, name: &str) -> Result<async_nats::Client, BusError> {
    connect_with(url, name, &NatsOptions::default()).await
}

/// A URL without its credentials, and the credentials: a user and a password, or a
/// token.
type SplitUrl = (String, Option<(String, Option<String>)>);

/// Splits `user:password@` (or `token@`) out of a NATS URL: the client does not send
/// URL credentials itself, and the bare URL is what may appear in errors and logs.
/// Credentials are percent-decoded. In a list of servers (`nats://a:4222,nats://b:4222`)
/// each server's are removed, and the first server's that has some are returned. Text
/// that is not a URL is returned as it is.
fn split_credentials(url: &str) -> SplitUrl {
    if let Some(split) = split_server_credentials(url) {
        return split;
    }
    if !url.contains(',') {
        return (url.to_owned(), None);
    }
    let mut credentials = None;
    let mut bare = Vec::new();
    for server in url.split(',') {
        match split_server_credentials(server) {
            Some((server, found)) => {
                credentials = credentials.or(found);
                bare.push(server);
            }
            None => bare.push(server.to_owned()),
        }
    }
    (bare.join(","), credentials)
}

/// [`split_credentials`] of one server's URL; `None` when it is not a URL.
fn split_server_credentials(server: &str) -> Option<SplitUrl> {
    if !server.contains("://") {
        return None;
    }
    let parsed = url::Url::parse(server.trim()).ok()?;
    if parsed.username().is_empty() && parsed.password().is_none() {
        return Some((server.to_owned(), None));
    }
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let credentials = (decode(parsed.username()), parsed.password().map(decode));
    let bare = format!(
        "{}{}",
        &parsed[..url::Position::BeforeUsername],
        &parsed[url::Position::BeforeHost..]
    );
    Some((bare, Some(credentials)))
}

/// [`connect`] with authentication and TLS settings.
pub async fn connect_with(
    url: &str,
    name: &str,
    opts: &NatsOptions,
) -> Result<async_nats::Client, BusError> {
    let (url, url_credentials) = split_credentials(url);
    let url = url.as_str();
    let fail = |reason: String| BusError::Connect {
        url: url.to_owned(),
        reason,
    };
    let mut options = match &opts.credentials_file {
        Some(path) => async_nats::ConnectOptions::with_credentials_file(path.clone())
            .await
            .map_err(|e| {
                fail(format!(
                    "failed to read credentials {}: {e}",
                    path.display()
                ))
            })?,
        None => async_nats::ConnectOptions::new(),
    };
    match (url_credentials, &opts.token) {
        (_, Some(token)) => options = options.token(token.clone()),
        (Some((user, Some(password))), None) => options = options.user_and_password(user, password),
        (Some((token, None)), None) => options = options.token(token),
        (None, None) => {}
    }
    if let Some(ca) = &opts.tls_ca {
        options = options.add_root_certificates(ca.clone());
    }
    options
        .require_tls(opts.require_tls || url.starts_with("tls://"))
        .name(name)
        .retry_on_initial_connect()
        .max_reconnects(None)
        .connection_timeout(std::time::Duration::from_secs(5))
        .connect(url)
        .await
        .map_err(|e| fail(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_split_out_of_nats_urls() {
        assert_eq!(
            split_credentials("nats://u:p@127.0.0.1:4222"),
            (
                "nats://127.0.0.1:4222".to_owned(),
                Some(("u".to_owned(), Some("p".to_owned())))
            )
        );
        assert_eq!(
            split_credentials("tls://tok@host:4222/x"),
            (
                "tls://host:4222/x".to_owned(),
                Some(("tok".to_owned(), None))
            )
        );
        assert_eq!(
            split_credentials("nats://127.0.0.1:4222"),
            ("nats://127.0.0.1:4222".to_owned(), None)
        );
    }

    #[test]
    fn url_credentials_are_percent_decoded() {
        assert_eq!(
            split_credentials("nats://u%40x:p%3Aw%40rd@host:4222"),
            (
                "nats://host:4222".to_owned(),
                Some(("u@x".to_owned(), Some("p:w@rd".to_owned())))
            )
        );
        assert_eq!(
            split_credentials("nats://u:p@ss@host"),
            (
                "nats://host".to_owned(),
                Some(("u".to_owned(), Some("p@ss".to_owned())))
            )
        );
    }

    #[test]
    fn every_server_of_a_list_loses_its_credentials() {
        assert_eq!(
            split_credentials("nats://u:p@a:4222,nats://u:p@b:4222"),
            (
                "nats://a:4222,nats://b:4222".to_owned(),
                Some(("u".to_owned(), Some("p".to_owned())))
            )
        );
        assert_eq!(
            split_credentials("a:4222,b:4222"),
            ("a:4222,b:4222".to_owned(), None)
        );
    }
}
