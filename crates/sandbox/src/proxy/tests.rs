use super::*;

#[test]
fn connect_and_absolute_requests_name_their_destination() {
    let connect = parse(b"CONNECT Example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
        .expect("valid connect");
    assert_eq!(
        connect,
        Request {
            host: "example.com".into(),
            port: 443,
            forward: None
        }
    );
    let get = parse(
        b"GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive\r\n\r\n",
    )
    .expect("valid get");
    assert_eq!((get.host.as_str(), get.port), ("example.com", 80));
    assert_eq!(
        get.forward.as_deref(),
        Some(&b"GET /a?b HTTP/1.1\r\nHost: example.com\r\n\r\n"[..])
    );
    let v6 = parse(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n").expect("v6 target");
    assert_eq!((v6.host.as_str(), v6.port), ("::1", 8443));
}

#[test]
fn malformed_requests_are_refused() {
    for head in [
        &b"GET /relative HTTP/1.1\r\n\r\n"[..],
        b"CONNECT example.com HTTP/1.1\r\n\r\n",
        b"CONNECT a b:1 HTTP/1.1\r\n\r\n",
        b"GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n",
        b"CONNECT ex%ample.com:443 HTTP/1.1\r\n\r\n",
    ] {
        assert!(parse(head).is_err(), "{}", String::from_utf8_lossy(head));
    }
}

#[test]
fn absolute_requests_keep_their_version_and_drop_proxy_headers() {
    let get = parse(
        b"GET http://Example.com:8080 HTTP/1.0\r\nAccept: */*\r\nPROXY-Authorization: x\r\n\r\n",
    )
    .expect("valid get");
    assert_eq!((get.host.as_str(), get.port), ("example.com", 8080));
    assert_eq!(
        get.forward.as_deref(),
        Some(&b"GET / HTTP/1.0\r\nAccept: */*\r\n\r\n"[..])
    );
}

#[test]
fn refusals_say_what_was_wrong() {
    for (head, reason) in [
        (
            &b"GET http://example.com/ HTTP/9.9\r\n\r\n"[..],
            "malformed request line",
        ),
        (
            b"GET http://example.com/ HTTP/1.1\r\nBad Header: x\r\n\r\n",
            "malformed request header",
        ),
        (b"GET /relative HTTP/1.1\r\n\r\n", "only CONNECT"),
        (
            b"CONNECT example.com HTTP/1.1\r\n\r\n",
            "bad CONNECT target",
        ),
        (
            b"GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n",
            "credentials",
        ),
        (
            b"GET http://ex%61mple.com/ HTTP/1.1\r\n\r\n",
            "bad url host",
        ),
        (b"GET http://\xff/ HTTP/1.1\r\n\r\n", "not utf-8"),
    ] {
        let err = parse(head).expect_err("refused");
        assert!(
            err.contains(reason),
            "{}: {err}",
            String::from_utf8_lossy(head)
        );
    }
}

#[test]
fn local_and_private_addresses_are_recognised() {
    for ip in [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "fd00::1",
        "fe80::1",
        "::ffff:127.0.0.1",
    ] {
        assert!(is_local(ip.parse().expect("ip")), "{ip}");
    }
    for ip in ["93.184.216.34", "2606:2800:220:1::1"] {
        assert!(!is_local(ip.parse().expect("ip")), "{ip}");
    }
}

async fn exchange(proxy: &Proxy, request: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .expect("proxy accepts");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut reply = vec![0u8; 4096];
    let n = stream.read(&mut reply).await.expect("reply");
    let mut text = String::from_utf8_lossy(&reply[..n]).into_owned();
    if text.starts_with("HTTP/1.1 200") {
        stream.write_all(b"ping").await.expect("tunnel send");
        let n = stream.read(&mut reply).await.expect("tunnel reply");
        text.push_str(&String::from_utf8_lossy(&reply[..n]));
    }
    text
}

/// A one-shot server on loopback that answers `ping` with `pong`.
async fn pong_server() -> u16 {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut buf = [0u8; 4];
            if conn.read_exact(&mut buf).await.is_ok() {
                let _ = conn.write_all(b"pong").await;
            }
        }
    });
    port
}

#[tokio::test]
async fn allowed_destinations_are_tunnelled_and_others_refused() {
    let allowed = pong_server().await;
    let other = pong_server().await;
    let proxy = Proxy::start(ProxyRules {
        allow: Arc::new(move |host, port| host == "127.0.0.1" && port == allowed),
        denied: Vec::new(),
        refuse_local: false,
    })
    .await
    .expect("proxy starts");

    let through = exchange(
        &proxy,
        &format!("CONNECT 127.0.0.1:{allowed} HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(through.starts_with("HTTP/1.1 200"), "{through}");
    assert!(through.ends_with("pong"), "{through}");

    let refused = exchange(
        &proxy,
        &format!("CONNECT 127.0.0.1:{other} HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    assert!(
        refused.contains("not allowed by the `network` permission"),
        "{refused}"
    );
}

#[tokio::test]
async fn local_and_denied_addresses_are_refused_even_when_allowed() {
    let port = pong_server().await;
    let proxy = Proxy::start(ProxyRules {
        allow: Arc::new(|_, _| true),
        denied: Vec::new(),
        refuse_local: true,
    })
    .await
    .expect("proxy starts");
    let refused = exchange(
        &proxy,
        &format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    assert!(
        refused.contains("local, private or worker address"),
        "{refused}"
    );

    let proxy = Proxy::start(ProxyRules {
        allow: Arc::new(|_, _| true),
        denied: vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
        refuse_local: false,
    })
    .await
    .expect("proxy starts");
    let refused = exchange(
        &proxy,
        &format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
}

#[tokio::test]
async fn bytes_sent_with_the_head_follow_it_upstream() {
    let origin = TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
    let port = origin.local_addr().expect("addr").port();
    let expected = format!("POST /p HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\nbody");
    let length = expected.len();
    tokio::spawn(async move {
        let (mut conn, _) = origin.accept().await.expect("proxied connection");
        let mut received = vec![0u8; length];
        conn.read_exact(&mut received).await.expect("head and body");
        let _ = conn.write_all(&received).await;
    });
    let proxy = Proxy::start(ProxyRules {
        allow: Arc::new(|_, _| true),
        denied: Vec::new(),
        refuse_local: false,
    })
    .await
    .expect("proxy starts");
    let echoed = exchange(
        &proxy,
        &format!("POST http://127.0.0.1:{port}/p HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\nbody"),
    )
    .await;
    assert_eq!(echoed, expected);
}
