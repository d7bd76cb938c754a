//! TLS for tests: a throwaway certificate authority made at test time, and a
//! `nats-server` that accepts TLS clients only.
//!
//! [`TestPki`] writes a CA certificate and a server certificate (with its key) for
//! `127.0.0.1` and `localhost`, signed by that CA, as PEM files in a temp directory.
//! [`TlsNatsServer`] is [`crate::NatsServer`] with `--tls`: JetStream on a free port and
//! its own store, killed on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

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
///
/// This repeats the start-up of [`crate::NatsServer`] with TLS flags added, because that
/// type's fields and spawn function are private to its module.
pub struct TlsNatsServer {
    child: Option<Child>,
    port: u16,
    _dir: tempfile::TempDir,
}

impl TlsNatsServer {
    /// Starts `nats-server -js --tls` on a free port with `pki`'s server certificate.
    pub fn start(pki: &TestPki) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir().context("failed to create nats store directory")?;
        let ports_dir = dir.path().join("ports");
        std::fs::create_dir_all(&ports_dir).context("failed to create ports directory")?;
        let binary =
            std::env::var("TASKWIRE_NATS_SERVER").unwrap_or_else(|_| "nats-server".to_owned());
        let mut child = Command::new(&binary)
            .args(["-js", "-a", "127.0.0.1", "-p", "-1", "-sd"])
            .arg(dir.path().join("store"))
            .arg("--ports_file_dir")
            .arg(&ports_dir)
            .arg("--tls")
            .arg("--tlscert")
            .arg(pki.server_cert())
            .arg("--tlskey")
            .arg(pki.server_key())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| {
                format!(
                    "failed to start {binary} (install it with `apt-get install -y nats-server`)"
                )
            })?;
        let port = match wait_for_port(&mut child, &ports_dir) {
            Ok(port) => port,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        Ok(Self {
            child: Some(child),
            port,
            _dir: dir,
        })
    }

    /// `tls://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("tls://127.0.0.1:{}", self.port)
    }
}

impl Drop for TlsNatsServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits for the ports file nats-server writes once its listener is up.
fn wait_for_port(child: &mut Child, ports_dir: &Path) -> anyhow::Result<u16> {
    let ports_file = ports_dir.join(format!("nats-server_{}.ports", child.id()));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(&ports_file)
            && let Some(port) = parse_port(&text)
        {
            return Ok(port);
        }
        if let Some(status) = child.try_wait().context("failed to poll nats-server")? {
            bail!("nats-server exited during start-up with {status}");
        }
        if Instant::now() > deadline {
            bail!(
                "nats-server did not write {} within 10s",
                ports_file.display()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The client port in a ports file: `{"nats":["tls://127.0.0.1:40123"], ...}`.
fn parse_port(text: &str) -> Option<u16> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let url = v.get("nats")?.as_array()?.first()?.as_str()?;
    url.rsplit(':').next()?.parse().ok()
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

    #[test]
    fn a_tls_ports_file_yields_the_client_port() {
        let text = r#"{"nats":["tls://127.0.0.1:40123"],"monitoring":[]}"#;
        assert_eq!(parse_port(text), Some(40123));
    }
}
