use super::*;

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
