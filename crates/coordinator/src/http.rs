//! The coordinator's HTTP listener (`--http-listen`, default `127.0.0.1:8080`):
//! `/healthz`, `/readyz` and `/metrics` (and the dashboard, [`crate::dashboard`],
//! merged in by the coordinator).
//!
//! - `/healthz` answers 200 as long as the process serves HTTP.
//! - `/readyz` answers 200 while Postgres answers a query and NATS is connected; 503
//!   with the reason as text while starting, when either is down, and once shutdown
//!   began (so a load balancer stops sending before gRPC stops accepting).
//! - `/metrics`: the Prometheus exposition of [`crate::metrics`].
//!
//! [`router`] is an axum `Router`; more pages for the same listener are merged into
//! it. The listener is bound before the coordinator connects to Postgres and NATS, so
//! probes get answers from the start.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use taskwire_bus::Bus;
use taskwire_store::Store;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::CoordinatorError;
use crate::error::NotReady;

/// Longest a readiness probe waits for Postgres.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// What `/readyz` checks, filled in as the coordinator connects.
#[derive(Clone, Default)]
pub struct Readiness(Arc<Inner>);

#[derive(Default)]
struct Inner {
    connected: OnceLock<(Store, Bus)>,
    shutting_down: AtomicBool,
}

impl Readiness {
    /// The store and the bus whose connections' states count from now on.
    pub fn connected(&self, store: Store, bus: Bus) {
        let _ = self.0.connected.set((store, bus));
    }

    /// Shutdown began: never ready again.
    pub fn shutting_down(&self) {
        self.0.shutting_down.store(true, Ordering::SeqCst);
    }

    /// `Ok` when ready, else why not.
    pub async fn check(&self) -> Result<(), NotReady> {
        if self.0.shutting_down.load(Ordering::SeqCst) {
            return Err(NotReady::ShuttingDown);
        }
        let Some((store, bus)) = self.0.connected.get() else {
            return Err(NotReady::Starting);
        };
        if !bus.is_connected() {
            return Err(NotReady::Nats);
        }
        match tokio::time::timeout(PING_TIMEOUT, store.ping()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(NotReady::Postgres(e)),
            Err(_) => Err(NotReady::PostgresTimeout(PING_TIMEOUT)),
        }
    }
}

/// The listener's routes: probes and metrics.
pub fn router(readiness: Readiness, metrics: &crate::metrics::Metrics) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(readiness)
        .merge(taskwire_metrics::routes(metrics.registry()))
}

/// Binds `addr` for [`spawn`].
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, CoordinatorError> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| CoordinatorError::Serve(format!("failed to bind --http-listen {addr}: {e}")))
}

/// Serves `router` on `listener` until `stop`, as the `http-listener` task. Failure
/// policy: an error is logged and the listener stops; gRPC goes on serving, and the
/// failing probes let the orchestrator restart the process.
pub fn spawn(
    listener: TcpListener,
    router: Router,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let addr = listener.local_addr().ok();
    tokio::spawn(async move {
        tracing::info!(http.listen = ?addr, "serving /healthz, /readyz, /metrics and the dashboard");
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "http listener stopped");
        }
    })
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(readiness): State<Readiness>) -> (StatusCode, String) {
    match readiness.check().await {
        Ok(()) => (StatusCode::OK, "ready\n".to_owned()),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}\n"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn not_ready_before_connecting_and_never_again_once_shutting_down() {
        let readiness = Readiness::default();
        let reason = readiness.check().await.expect_err("not connected");
        assert!(reason.to_string().starts_with("starting"), "{reason}");
        readiness.shutting_down();
        assert_eq!(
            readiness.check().await.map_err(|e| e.to_string()),
            Err("shutting down".to_owned())
        );
    }
}
