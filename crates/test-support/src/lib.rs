//! Test harness for taskwire: real services, isolated per test.
//!
//! - [`files`]: `git` in a directory and byte-for-byte snapshots of a tree.
//! - [`nats`]: starts a `nats-server` with JetStream on a free port and a temp store.
//! - [`postgres`]: creates a fresh Postgres database per test and drops it afterwards.
//! - [`private_postgres`]: a Postgres server of one test's own, which it may stop and start.
//! - [`otlp`]: an OTLP/gRPC trace receiver that keeps the spans processes export.
//! - [`model`]: a scripted model served over real HTTP that speaks the OpenAI-compatible
//!   chat-completions and the Anthropic Messages wire formats (streaming and not), so
//!   provider clients are tested for real.
//! - [`scripts`]: model scripts several tests (and the dev fleet) share.
//!
//! When a service cannot be reached the harness fails the test with a message that
//! says how to start it; it never skips.

pub mod files;
pub mod model;
pub mod nats;
pub mod otlp;
pub mod postgres;
pub mod private_postgres;
pub mod scripts;
pub mod tls;

pub use model::{Gate, ScriptedModel, ScriptedReply, SeenRequest};
pub use nats::NatsServer;
pub use otlp::Collector;
pub use postgres::TestDatabase;
pub use private_postgres::PrivatePostgres;

/// Installs a test log subscriber once (`RUST_LOG` controls it; quiet by default).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}
