use std::sync::{Arc, Mutex};

use futures::StreamExt;
use taskwire_test_support::tls::TestPki;
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Server};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use super::*;

async fn loopback() -> (TcpListener, std::net::SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("bound address");
    (listener, addr)
}

#[tokio::test]
async fn accepted_connections_have_tcp_nodelay_set() {
    let (listener, addr) = loopback().await;
    let mut accepted = incoming(listener);
    let _client = TcpStream::connect(addr).await.expect("connect");
    let socket = accepted
        .next()
        .await
        .expect("a connection")
        .expect("accepted");
    assert!(socket.nodelay().expect("TCP_NODELAY is readable"));
}

#[tokio::test]
async fn connections_served_over_tls_have_tcp_nodelay_set() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pki = TestPki::generate().expect("test pki");
    let tls = tls(Some(&pki.server_cert()), Some(&pki.server_key()))
        .expect("valid identity")
        .expect("tls is configured");
    let (listener, addr) = loopback().await;
    // What the TLS server is handed: the accepted sockets, as the coordinator's is.
    let nodelay = Arc::new(Mutex::new(Vec::new()));
    let seen = nodelay.clone();
    let accepted = incoming(listener).inspect(move |conn| {
        if let Ok(socket) = conn {
            seen.lock()
                .expect("not poisoned")
                .push(socket.nodelay().expect("TCP_NODELAY is readable"));
        }
    });
    let (_reporter, health) = tonic_health::server::health_reporter();
    let server = Server::builder()
        .tls_config(tls)
        .expect("tls config")
        .add_service(health)
        .serve_with_incoming(accepted);
    let server = tokio::spawn(server);

    let client_tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pki.ca_pem()));
    let channel = Endpoint::from_shared(format!("https://{addr}"))
        .expect("valid url")
        .tls_config(client_tls)
        .expect("client tls")
        .connect()
        .await
        .expect("a tls connection");
    HealthClient::new(channel)
        .check(HealthCheckRequest::default())
        .await
        .expect("health over tls");
    assert_eq!(*nodelay.lock().expect("not poisoned"), [true]);
    server.abort();
}

#[test]
fn tls_needs_both_the_certificate_and_the_key() {
    let err = tls(Some(Path::new("/cert.pem")), None).expect_err("key missing");
    assert!(err.to_string().contains("together"), "{err}");
    assert!(tls(None, None).expect("plaintext").is_none());
    let err = tls(
        Some(Path::new("/nonexistent/cert.pem")),
        Some(Path::new("/k")),
    )
    .expect_err("unreadable");
    assert!(err.to_string().contains("/nonexistent/cert.pem"), "{err}");
}
