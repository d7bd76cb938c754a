//! The gRPC server around the API: the sockets it accepts, TLS, health and reflection.

use std::path::Path;

use taskwire_protocol::pb;
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Identity, ServerTlsConfig};
use tonic_reflection::server::{v1, v1alpha};

use crate::CoordinatorError;

/// The connections accepted on `listener`, each with `TCP_NODELAY` set. A response
/// goes out as several small writes (headers, message, trailers); with Nagle's
/// algorithm on, each after the first waits for the client's delayed ACK, about 40 ms
/// per finished `Get`, `Watch` or `submit --wait`. `serve_with_incoming` does not apply
/// tonic's own `tcp_nodelay` setting, so it is set here, under TLS as well (TLS wraps
/// these same sockets).
pub fn incoming(listener: TcpListener) -> TcpIncoming {
    TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// The server's TLS identity from PEM files: `None` (plaintext) when neither is given;
/// one without the other is a configuration error.
pub fn tls(
    cert: Option<&Path>,
    key: Option<&Path>,
) -> Result<Option<ServerTlsConfig>, CoordinatorError> {
    let (cert, key) = match (cert, key) {
        (Some(cert), Some(key)) => (cert, key),
        (None, None) => return Ok(None),
        _ => {
            return Err(CoordinatorError::Config(
                "tls_cert and tls_key must be given together".to_owned(),
            ));
        }
    };
    let read = |p: &Path| {
        std::fs::read(p)
            .map_err(|e| CoordinatorError::Config(format!("failed to read {}: {e}", p.display())))
    };
    Ok(Some(
        ServerTlsConfig::new().identity(Identity::from_pem(read(cert)?, read(key)?)),
    ))
}

/// The descriptors of every service the coordinator serves: the API, health and both
/// versions of reflection.
const SERVED_DESCRIPTORS: [&[u8]; 4] = [
    pb::FILE_DESCRIPTOR_SET,
    tonic_health::pb::FILE_DESCRIPTOR_SET,
    tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
    tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
];

fn reflection_builder() -> tonic_reflection::server::Builder<'static> {
    SERVED_DESCRIPTORS.into_iter().fold(
        tonic_reflection::server::Builder::configure(),
        |builder, descriptors| builder.register_encoded_file_descriptor_set(descriptors),
    )
}

/// Server reflection in its v1 and v1alpha versions (clients such as grpcurl and
/// Python's grpcio-reflection still speak v1alpha), both describing every served service.
pub fn reflection() -> Result<
    (
        v1::ServerReflectionServer<impl v1::ServerReflection>,
        v1alpha::ServerReflectionServer<impl v1alpha::ServerReflection>,
    ),
    CoordinatorError,
> {
    let failed = |e: tonic_reflection::server::Error| {
        CoordinatorError::Serve(format!("failed to build the reflection service: {e}"))
    };
    Ok((
        reflection_builder().build_v1().map_err(failed)?,
        reflection_builder().build_v1alpha().map_err(failed)?,
    ))
}

#[cfg(test)]
mod tests;
