//! The network a command gets when a rule opens hosts: the proxy's port only, and
//! through it only the allowed hosts; local services stay out of reach.

mod support;

use std::net::TcpListener;

use support::{Options, run, sandbox};

fn workspace() -> tempfile::TempDir {
    tempfile::tempdir().expect("workspace")
}

/// A proxy whose rules allow `allowed` only; `refuse_local` off so that a loopback
/// server can stand in for a remote host.
fn proxy(
    runtime: &tokio::runtime::Runtime,
    allowed: impl Fn(&str, u16) -> bool + Send + Sync + 'static,
    refuse_local: bool,
) -> taskwire_sandbox::proxy::Proxy {
    runtime
        .block_on(taskwire_sandbox::proxy::Proxy::start(
            taskwire_sandbox::proxy::ProxyRules {
                allow: std::sync::Arc::new(allowed),
                denied: Vec::new(),
                refuse_local,
            },
        ))
        .expect("proxy starts")
}

fn proxied(proxy: &taskwire_sandbox::proxy::Proxy) -> Options {
    let url = proxy.url();
    Options {
        network: taskwire_sandbox::Network::Proxy { port: proxy.port() },
        env: ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"]
            .iter()
            .map(|name| (name.to_string(), url.clone()))
            .collect(),
        ..Options::default()
    }
}

/// Answers every connection with one HTTP response naming `body`.
fn http_server(body: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = [0u8; 1024];
            let _ = std::io::Read::read(&mut stream, &mut buf);
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = std::io::Write::write_all(&mut stream, reply.as_bytes());
        }
    });
    port
}

#[test]
fn local_services_stay_unreachable_with_a_network_permission_for_another_host() {
    let Some(sandbox) = sandbox() else { return };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let nats = TcpListener::bind("127.0.0.1:0").expect("stand-in for nats");
    nats.set_nonblocking(true).expect("nonblocking");
    let port = nats.local_addr().expect("addr").port();
    // The production shape: one allowed host, local addresses refused.
    let proxy = proxy(&runtime, |host, _| host == "example.com", true);
    let ws = workspace();
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected; \
         curl -sS --max-time 5 -o /dev/null -w '%{{http_code}}\\n' http://127.0.0.1:{port}/; \
         curl -sS --max-time 5 -p -o /dev/null https://127.0.0.1:{port}/; echo tunnel=$?; \
         curl -sS --max-time 5 -p -o /dev/null https://localhost:{port}/; echo tunnel=$?; \
         python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)'"
    );
    let run = run(&sandbox, ws.path(), &script, proxied(&proxy));
    assert!(!run.output.contains("connected"), "{}", run.output);
    assert!(run.output.contains("403"), "{}", run.output);
    assert!(!run.output.contains("tunnel=0"), "{}", run.output);
    assert!(run.output.contains("PermissionError"), "{}", run.output);
    assert!(
        nats.accept().is_err(),
        "the listener received a connection: {}",
        run.output
    );
}

#[test]
fn an_allowed_host_is_reached_through_the_proxy_and_no_other() {
    let Some(sandbox) = sandbox() else { return };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let allowed = http_server("allowed host");
    let other = http_server("other host");
    let proxy = proxy(&runtime, move |_, port| port == allowed, false);
    let ws = workspace();
    let script = format!(
        "curl -sS --max-time 5 http://127.0.0.1:{allowed}/; echo; \
         curl -sS --max-time 5 -o /dev/null -w '%{{http_code}}\\n' http://127.0.0.1:{other}/; \
         exec 3<>/dev/tcp/127.0.0.1/{other} && echo direct-connected"
    );
    let run = run(&sandbox, ws.path(), &script, proxied(&proxy));
    assert!(run.output.contains("allowed host"), "{}", run.output);
    assert!(!run.output.contains("other host"), "{}", run.output);
    assert!(run.output.contains("403"), "{}", run.output);
    assert!(!run.output.contains("direct-connected"), "{}", run.output);
}
