//! The worker's HTTP listener (`--http-listen`): `/healthz` and `/readyz` for an
//! orchestrator's probes, `/metrics` for Prometheus ([`crate::metrics`]).
//!
//! - `/healthz` answers 200 as long as the process serves HTTP: a worker waiting for
//!   NATS is alive, only not ready.
//! - `/readyz` answers 200 once the worker's durable consumer exists and it pulls, while
//!   it is connected to NATS and not draining; 503 otherwise, with the reason as text.
//!
//! The listener is bound before the worker connects to NATS, so both answer from the
//! start, and it keeps serving while the worker drains, so a drain is visible.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use taskwire_bus::Bus;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::WorkerError;

/// What `/readyz` reports, shared between the pull loop and the listener.
#[derive(Clone, Default)]
pub struct Readiness(Arc<Inner>);

#[derive(Default)]
struct Inner {
    consumer_ready: AtomicBool,
    draining: AtomicBool,
    bus: OnceLock<Bus>,
}

impl Readiness {
    /// The bus whose connection state counts from now on.
    pub fn set_bus(&self, bus: Bus) {
        let _ = self.0.bus.set(bus);
    }

    /// The worker's consumer exists and the pull loop starts.
    pub fn consumer_ready(&self) {
        self.0.consumer_ready.store(true, Ordering::SeqCst);
    }

    /// The worker stopped pulling: it only finishes what it runs.
    pub fn draining(&self) {
        self.0.draining.store(true, Ordering::SeqCst);
    }

    /// `Ok` when ready, else why not.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.0.draining.load(Ordering::SeqCst) {
            return Err("draining");
        }
        if !self.0.consumer_ready.load(Ordering::SeqCst) {
            return Err("starting: the tasks consumer is not ready");
        }
        match self.0.bus.get().map(Bus::is_connected) {
            Some(true) => Ok(()),
            _ => Err("not connected to nats"),
        }
    }
}

/// A bound listener, not yet serving.
pub struct HealthListener {
    listener: TcpListener,
}

impl HealthListener {
    /// Binds `addr`.
    pub async fn bind(addr: SocketAddr) -> Result<Self, WorkerError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| WorkerError::Listen {
                addr,
                reason: e.to_string(),
            })?;
        Ok(Self { listener })
    }

    /// The address bound (the port the system chose for port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until `stop`, as the `http-listener` task. Failure policy: an error is
    /// logged and the listener stops; the worker goes on, and the failing liveness probe
    /// lets the orchestrator restart it.
    pub fn spawn(
        self,
        readiness: Readiness,
        metrics: &crate::metrics::Metrics,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let addr = self.local_addr();
        let app = Router::new()
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz))
            .with_state(readiness)
            .merge(taskwire_metrics::routes(metrics.registry()));
        tokio::spawn(async move {
            tracing::info!(http.listen = ?addr, "serving /healthz, /readyz and /metrics");
            let served = axum::serve(self.listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
            if let Err(error) = served {
                tracing::error!(%error, "http listener stopped");
            }
        })
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(readiness): State<Readiness>) -> (StatusCode, String) {
    match readiness.check() {
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

    #[test]
    fn not_ready_until_the_consumer_is_and_never_again_once_draining() {
        let readiness = Readiness::default();
        assert_eq!(
            readiness.check(),
            Err("starting: the tasks consumer is not ready")
        );
        readiness.consumer_ready();
        // No connection yet: the consumer alone is not enough.
        assert_eq!(readiness.check(), Err("not connected to nats"));
        readiness.draining();
        assert_eq!(readiness.check(), Err("draining"));
    }
}
