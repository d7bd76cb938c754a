//! TLS for tests: a throwaway certificate authority made at test time, and a
//! `nats-server` that accepts TLS clients only.
//!
//! [`TestPki`] writes a CA certificate and a server certificate (with its key) for
//! `127.0.0.1` and `localhost`, signed by that CA, as PEM files in a temp directory.
//! [`TlsNatsServer`] is [`crate::NatsServer`] with `--tls`: JetStream on a free port and
//! its own store, killed on drop.

use std::path::PathBuf;

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::NatsServer;

/// A CA and one server certificate it signed, as PEM files; deleted on drop.
pub struct TestPki {
    dir: tempfile::TempDir,
    ca_pem: String,
}

impl TestPki {
    /// Generates the CA and a server certificate valid for `127.0.0.1` and `localhost`
    /// (ECDSA P-256 keys, through ring).
    pub fn generate() -> anyhow::Result<Self> {
        let mut ca = CertificateParams::default();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "taskwire test ca");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)
            .context("failed to sign the test ca")?;

        let mut server = CertificateParams::new(["127.0.0.1".to_owned(), "localhost".to_owned()])?;
        server
            .distinguished_name
            .push(DnType::CommonName, "taskwire test server");
        server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_key = KeyPair::generate()?;
        let server_cert = server
            .signed_by(&server_key, &ca)
            .context("failed to sign the test server certificate")?;

        let dir = tempfile::tempdir().context("failed to create a tls directory")?;
        let ca_pem = ca.pem();
        for (name, pem) in [
            ("ca.pem", ca_pem.as_str()),
            ("server.pem", &server_cert.pem()),
            ("server-key.pem", &server_key.serialize_pem()),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, pem)
                .with_context(|| format!("failed to write {}", path.display()))?;
        }
        Ok(Self { dir, ca_pem })
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA certificate's file: what clients trust.
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The server certificate's file (PEM; valid for `127.0.0.1` and `localhost`).
    pub fn server_cert(&self) -> PathBuf {
        self.dir.path().join("server.pem")
    }

    /// The server's private key file (PEM, PKCS#8).
    pub fn server_key(&self) -> PathBuf {
        self.dir.path().join("server-key.pem")
    }
}

/// A `nats-server` with JetStream that requires TLS of every client; killed on drop.
pub struct TlsNatsServer {
    server: NatsServer,
}

impl TlsNatsServer {
    /// Starts `nats-server -js --tls` on a free port with `pki`'s server certificate.
    pub fn start(pki: &TestPki) -> anyhow::Result<Self> {
        let server = NatsServer::start_with_args([
            "--tls".into(),
            "--tlscert".into(),
            pki.server_cert().into_os_string(),
            "--tlskey".into(),
            pki.server_key().into_os_string(),
        ])?;
        Ok(Self { server })
    }

    /// `tls://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("tls://127.0.0.1:{}", self.server.port())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_pki_writes_a_ca_and_a_server_identity() {
        let pki = TestPki::generate().expect("pki");
        let read = |p: PathBuf| std::fs::read_to_string(p).expect("written");
        assert!(read(pki.ca_cert()).starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(read(pki.ca_cert()), pki.ca_pem());
        assert!(read(pki.server_cert()).starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(read(pki.server_key()).starts_with("-----BEGIN PRIVATE KEY-----"));
    }
}
