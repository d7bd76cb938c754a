//! The HTTP proxy through which a command with an opened network reaches the hosts
//! its rules allow, and nothing else.
//!
//! Landlock filters TCP by port only, so hosts cannot be checked in the kernel. A
//! command whose policy opens the network may connect to one port: this proxy's,
//! on 127.0.0.1, named in `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY`. The proxy reads
//! each request's destination (`CONNECT host:port`, or an absolute `http://` URL),
//! asks the host filter, resolves the name itself, refuses local, private and
//! explicitly denied addresses whatever the filter says (so the worker's NATS, the
//! coordinator and databases stay out of reach, and a name cannot be pointed at them
//! by DNS), connects, then relays bytes both ways. A refusal is a `403` whose body
//! says why. TLS passes through untouched: the proxy sees host names, not content.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// Whether `host` (lowercase, IPv6 without brackets) on `port` may be reached.
pub type HostFilter = Arc<dyn Fn(&str, u16) -> bool + Send + Sync>;

const MAX_HEAD: usize = 16 * 1024;
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the proxy lets through.
#[derive(Clone)]
pub struct ProxyRules {
    pub allow: HostFilter,
    /// Addresses refused whatever `allow` says (e.g. the worker's NATS servers).
    pub denied: Vec<IpAddr>,
    /// Refuse loopback, private, link-local, shared, multicast and unspecified
    /// addresses whatever `allow` says. Default on; off only in tests whose
    /// "remote" hosts are on loopback.
    pub refuse_local: bool,
}

impl std::fmt::Debug for ProxyRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyRules")
            .field("denied", &self.denied)
            .field("refuse_local", &self.refuse_local)
            .finish_non_exhaustive()
    }
}

/// A running proxy on 127.0.0.1; stops, with every connection it relays, on drop.
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Binds 127.0.0.1 on a free port and serves in the background.
    pub async fn start(rules: ProxyRules) -> io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let port = listener.local_addr()?.port();
        let task = tokio::spawn(accept(listener, Arc::new(rules)));
        Ok(Self { port, task })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>`, for the proxy variables.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Failure policy: an accept error ends nothing but that connection; the loop stops
/// only when the proxy is dropped (its connections, owned by the `JoinSet`, with it).
async fn accept(listener: TcpListener, rules: Arc<ProxyRules>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    connections.spawn(serve(client, rules.clone()));
                }
                Err(error) => tracing::debug!(%error, "proxy accept failed"),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// One parsed request head.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    host: String,
    port: u16,
    /// `None` for CONNECT; else the head to send upstream (origin-form, proxy headers
    /// removed).
    forward: Option<Vec<u8>>,
}

async fn serve(mut client: TcpStream, rules: Arc<ProxyRules>) {
    let (head, extra) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(read)) => read,
        Ok(Err(_)) | Err(_) => {
            let _ = respond(&mut client, 400, "unreadable or too long request head").await;
            return;
        }
    };
    let request = match parse(&head) {
        Ok(request) => request,
        Err(reason) => {
            let _ = respond(&mut client, 400, reason).await;
            return;
        }
    };
    let mut upstream = match open(&request, &rules).await {
        Ok(upstream) => upstream,
        Err((status, reason)) => {
            tracing::debug!(host = %request.host, port = request.port, %reason, "proxy refused");
            let _ = respond(&mut client, status, &reason).await;
            return;
        }
    };
    let sent = match &request.forward {
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await
        }
        Some(head) => upstream.write_all(head).await,
    };
    if sent.is_err() || upstream.write_all(&extra).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// Checks the destination with the rules, resolves it, and connects.
async fn open(request: &Request, rules: &ProxyRules) -> Result<TcpStream, (u16, String)> {
    let target = format!("{}:{}", request.host, request.port);
    if !(rules.allow)(&request.host, request.port) {
        return Err((
            403,
            format!("{target} is not allowed by the `network` permission"),
        ));
    }
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((request.host.as_str(), request.port))
        .await
        .map_err(|e| (502, format!("failed to resolve {}: {e}", request.host)))?
        .collect();
    if let Some(refused) = addresses
        .iter()
        .find(|a| rules.denied.contains(&a.ip()) || (rules.refuse_local && is_local(a.ip())))
    {
        return Err((
            403,
            format!(
                "{target} resolves to {}, a local, private or worker address",
                refused.ip()
            ),
        ));
    }
    let first = addresses
        .first()
        .ok_or_else(|| (502, format!("{} has no address", request.host)))?;
    match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(first)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err((502, format!("failed to connect to {target}: {e}"))),
        Err(_) => Err((504, format!("timed out connecting to {target}"))),
    }
}

/// Reads up to the end of the head; returns the head and any bytes read past it. A
/// head that cannot become valid is returned as read, for [`parse`] to refuse.
async fn read_head(client: &mut TcpStream) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = header_slots(&buf);
        match httparse::Request::new(&mut headers).parse(&buf) {
            Ok(httparse::Status::Complete(end)) => {
                let extra = buf.split_off(end);
                return Ok((buf, extra));
            }
            Err(_) => return Ok((buf, Vec::new())),
            Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
                return Err(io::ErrorKind::InvalidData.into());
            }
            Ok(httparse::Status::Partial) => {}
        }
    }
}

/// Room for every header `head` can hold: each ends a line, so there are fewer
/// headers than line feeds, and the size limit bounds both.
fn header_slots(head: &[u8]) -> Vec<httparse::Header<'_>> {
    let lines = head.iter().filter(|&&b| b == b'\n').count();
    vec![httparse::EMPTY_HEADER; lines + 1]
}

fn parse(head: &[u8]) -> Result<Request, &'static str> {
    std::str::from_utf8(head).map_err(|_| "request head is not utf-8")?;
    let mut headers = header_slots(head);
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err("incomplete request head"),
        Err(
            httparse::Error::HeaderName
            | httparse::Error::HeaderValue
            | httparse::Error::TooManyHeaders,
        ) => return Err("malformed request header"),
        Err(_) => return Err("malformed request line"),
    }
    let (Some(method), Some(target), Some(version)) =
        (request.method, request.path, request.version)
    else {
        return Err("malformed request line");
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_host_port(target, None).ok_or("bad CONNECT target")?;
        return Ok(Request {
            host,
            port,
            forward: None,
        });
    }
    let rest = target
        .strip_prefix("http://")
        .ok_or("only CONNECT and absolute http:// requests are proxied")?;
    let (authority, path) = match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err("credentials in the proxied url are not supported");
    }
    let (host, port) = split_host_port(authority, Some(80)).ok_or("bad url host")?;
    let mut forward = format!("{method} {path} HTTP/1.{version}\r\n").into_bytes();
    for header in request.headers.iter() {
        if !header.name.to_ascii_lowercase().starts_with("proxy-") {
            forward.extend_from_slice(header.name.as_bytes());
            forward.extend_from_slice(b": ");
            forward.extend_from_slice(header.value);
            forward.extend_from_slice(b"\r\n");
        }
    }
    forward.extend_from_slice(b"\r\n");
    Ok(Request {
        host,
        port,
        forward: Some(forward),
    })
}

/// `host:port`, `[v6]:port`, or a bare host when `default_port` is given.
fn split_host_port(authority: &str, default_port: Option<u16>) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return None,
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') => (host, Some(port)),
            Some(_) => return None,
            None => (authority, None),
        }
    };
    let port = match port {
        Some(port) => port.parse().ok()?,
        None => default_port?,
    };
    let valid = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'));
    valid.then(|| (host.to_ascii_lowercase(), port))
}

/// Addresses that belong to this machine or its private networks.
fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_local_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_local_v4(v4),
            None => is_local_v6(v6),
        },
    }
}

fn is_local_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
}

fn is_local_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link local
}

async fn respond(client: &mut TcpStream, status: u16, reason: &str) -> io::Result<()> {
    let phrase = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        502 => "Bad Gateway",
        _ => "Gateway Timeout",
    };
    let body = format!("taskwire sandbox proxy: {reason}\n");
    let response = format!(
        "HTTP/1.1 {status} {phrase}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests;
