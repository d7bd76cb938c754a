//! A deployment whose coordinator serves gRPC over TLS, and clients that trust its CA.

use taskwire_test_support::tls::TestPki;
use taskwire_test_support::{NatsServer, ScriptedModel};
use tonic::transport::{Certificate, ClientTlsConfig};

use crate::Cluster;

/// Starts a deployment whose coordinator serves `pki`'s server certificate, with
/// `workers` workers of `concurrency` sessions each. Its [`Cluster::client`] (and every
/// helper built on it) trusts `pki`'s CA.
pub async fn start_tls(
    model: ScriptedModel,
    workers: usize,
    concurrency: usize,
    pki: &TestPki,
) -> anyhow::Result<Cluster> {
    let client_tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pki.ca_pem()));
    crate::start_cluster(
        NatsServer::start()?,
        model,
        workers,
        concurrency,
        Some(client_tls),
        |config| {
            config.tls_cert = Some(pki.server_cert());
            config.tls_key = Some(pki.server_key());
        },
    )
    .await
}
