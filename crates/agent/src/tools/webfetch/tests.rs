//! Against a tiny HTTP/1.1 server on a loopback port: one canned response per path.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::tools::test_context;

const PAGE: &str = "<html><head><title>Docs</title><script>alert('no')</script></head>\
                    <body><h1>Getting started</h1><p>Run <code>make</code> &amp; wait.</p>\
                    <ul><li>one</li><li>two</li></ul></body></html>";

fn response(status: &str, content_type: &str, body: &[u8], length: Option<usize>) -> Vec<u8> {
    let mut head =
        format!("HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nConnection: close\r\n");
    if let Some(length) = length {
        head.push_str(&format!("Content-Length: {length}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

fn route(path: &str) -> Option<Vec<u8>> {
    let big = vec![b'x'; MAX_RESPONSE_BYTES + 1024];
    Some(match path {
        "/page" => response(
            "200 OK",
            "text/html; charset=utf-8",
            PAGE.as_bytes(),
            Some(PAGE.len()),
        ),
        "/plain" => response("200 OK", "text/plain", b"just text\n", Some(10)),
        // No length: the cap must hold while streaming.
        "/big" => response("200 OK", "text/plain", &big, None),
        "/declared" => response("200 OK", "text/plain", b"tiny", Some(10 * 1024 * 1024)),
        "/image" => response("200 OK", "image/png", b"\x89PNG", Some(4)),
        "/hang" => return None,
        _ => response("404 Not Found", "text/plain", b"nope", Some(4)),
    })
}

/// Serves [`route`] until the test ends; returns the base URL.
async fn serve() -> String {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr: SocketAddr = listener.local_addr().expect("bound address");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request);
                let path = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
                match route(&path) {
                    Some(bytes) => {
                        // The client may hang up early (the size cap): not an error here.
                        let _ = stream.write_all(&bytes).await;
                        let _ = stream.shutdown().await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(30)).await,
                }
            });
        }
    });
    format!("http://{addr}")
}

fn setup() -> (tempfile::TempDir, ToolContext<'static>) {
    // reqwest is built without a default provider; binaries install one, tests too.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("temp dir");
    let workspace = Workspace::new(dir.path()).expect("workspace");
    (dir, test_context(workspace))
}

async fn fetch(ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
    WebFetchTool::default().execute(args, ctx).await
}

#[tokio::test]
async fn only_http_and_https_urls_are_fetched() {
    let (_dir, ctx) = setup();
    for url in [
        "file:///etc/passwd",
        "ftp://example.com/x",
        "data:text/plain,hi",
    ] {
        let err = fetch(&ctx, json!({"url": url})).await.expect_err("refused");
        assert!(
            err.to_string()
                .contains("only http and https urls can be fetched"),
            "{url}: {err}"
        );
    }
    let err = fetch(&ctx, json!({"url": "not a url"}))
        .await
        .expect_err("bad url");
    assert!(err.to_string().contains("bad url"), "{err}");
}

#[tokio::test]
async fn html_is_converted_to_markdown_by_default() {
    let (_dir, ctx) = setup();
    let base = serve().await;
    let out = fetch(&ctx, json!({"url": format!("{base}/page")}))
        .await
        .expect("fetched");
    assert!(out.output.contains("# Getting started"), "{}", out.output);
    assert!(out.output.contains("`make` & wait."), "{}", out.output);
    assert!(
        !out.output.contains("alert"),
        "scripts are dropped: {}",
        out.output
    );
    assert_eq!(out.metadata["content_type"], json!("text/html"));
    assert_eq!(out.title, format!("webfetch {base}/page"));
}

#[tokio::test]
async fn text_and_html_formats() {
    let (_dir, ctx) = setup();
    let base = serve().await;
    let url = format!("{base}/page");
    let text = fetch(&ctx, json!({"url": url, "format": "text"}))
        .await
        .expect("text");
    assert_eq!(
        text.output,
        "Docs\nGetting started\nRun make & wait.\none\ntwo"
    );
    let html = fetch(&ctx, json!({"url": url, "format": "html"}))
        .await
        .expect("html");
    assert_eq!(html.output, PAGE);
    let plain = fetch(
        &ctx,
        json!({"url": format!("{base}/plain"), "format": "markdown"}),
    )
    .await
    .expect("plain");
    assert_eq!(plain.output, "just text\n");
}

#[tokio::test]
async fn responses_over_5_mib_are_refused() {
    let (_dir, ctx) = setup();
    let base = serve().await;
    for path in ["/big", "/declared"] {
        let err = fetch(&ctx, json!({"url": format!("{base}{path}")}))
            .await
            .expect_err("too large");
        assert!(
            err.to_string()
                .ends_with("the response is larger than 5 MiB"),
            "{path}: {err}"
        );
    }
}

#[tokio::test]
async fn errors_binary_content_and_timeouts_are_tool_errors() {
    let (_dir, ctx) = setup();
    let base = serve().await;
    let err = fetch(&ctx, json!({"url": format!("{base}/missing")}))
        .await
        .expect_err("404");
    assert!(err.to_string().contains("404 Not Found"), "{err}");
    let err = fetch(&ctx, json!({"url": format!("{base}/image")}))
        .await
        .expect_err("binary");
    assert!(err.to_string().contains("image/png is not text"), "{err}");
    let err = fetch(&ctx, json!({"url": format!("{base}/hang"), "timeout": 1}))
        .await
        .expect_err("timeout");
    assert!(
        err.to_string().contains("no complete response within 1 s"),
        "{err}"
    );
}
