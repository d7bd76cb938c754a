//! taskwire's Postgres store, the source of truth for tasks.
//!
//! - [`tasks`]: submit (task row + outbox row in one transaction, batched), cancel,
//!   expire, replay, get and list.
//! - [`claims`]: claims with a fencing epoch, attempt budget and attempt history.
//! - [`results`]: fenced result writes (final, or a scheduled retry).
//! - [`outbox`]: the rows the relay publishes to JetStream.
//! - [`dead_letters`]: messages that could not be run, with the reason.
//! - [`sessions`]: session transcripts (fenced by the saving attempt's claim).
//! - [`specs`]: resolved agent specs, stored once by digest.
//! - [`approvals`]: `ask` permissions awaiting an answer.
//! - [`ownership`]: lookups of caller-named ids together with their tenant.
//! - [`lifecycle`]: every statement that writes a task's status, fenced by the
//!   lifecycle's from-states (`taskwire_protocol::lifecycle`).
//! - [`subtrees`]: ended tasks that still have live descendants.
//! - [`usage`]: subtree usage summed in SQL; what a budgeted tree has spent.
//! - [`gauges`]: the counts behind the coordinator's gauges; a readiness ping.
//! - [`stats`]: the hot path's tables analysed while they grow, so plans follow them.
//! - [`record`]: the row types read back.
//! - [`error`]: the error type, [`StoreError`].
//!
//! Every write that can race with another attempt is fenced in SQL: a result is
//! written only `WHERE claim_epoch = <the attempt's epoch>` and only from the statuses
//! `taskwire_protocol::lifecycle::sources` names. Writes take slices so callers can
//! group many events into one transaction (group commit).

pub mod approvals;
pub mod claims;
pub mod dead_letters;
pub mod error;
pub mod gauges;
mod held;
pub mod lifecycle;
pub mod outbox;
pub mod ownership;
pub mod record;
pub mod results;
pub mod schedules;
pub mod sessions;
pub mod specs;
pub mod stats;
pub mod subtrees;
pub mod tasks;
pub mod usage;
pub mod webhooks;

use std::sync::Arc;
use std::time::Duration;

pub use approvals::{AnswerOutcome, ApprovalAnswer};
pub use error::StoreError;
pub use gauges::GaugeCounts;
pub use lifecycle::Transitioned;
pub use ownership::SessionLoad;
pub use record::{
    AttemptRecord, ClaimOutcome, DeadLetterRecord, InsertOutcome, ListFilter, NewTask,
    RecordedResult, ReplayOutcome, TaskRecord,
};
pub use sessions::StoredSession;

/// The embedded, forward-only migrations (`migrations/*.sql`), run by
/// [`Store::connect`].
///
/// Migrations applied by a newer version and unknown to this one are tolerated
/// (`ignore_missing`): during a rolling upgrade the old version's coordinators keep
/// serving against a schema the new version already migrated. This holds because
/// every migration is additive and backward compatible for one version (see
/// `docs/deploy.md`).
pub fn migrator() -> sqlx::migrate::Migrator {
    let mut migrator = sqlx::migrate!("../../migrations");
    migrator.set_ignore_missing(true);
    migrator
}

/// How long a pooled connection may sit idle before it is pinged as it is taken.
const PING_IDLE_AFTER: Duration = Duration::from_secs(1);

/// A handle to the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    pool: sqlx::PgPool,
    /// The connection a loop's statements share (see [`Store::holding_a_connection`]).
    held: Option<Arc<held::Held>>,
}

impl Store {
    /// Connects a pool of at most `max_connections` and applies pending migrations.
    /// The database is created first if it does not exist (the server must allow it).
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        use sqlx::migrate::MigrateDatabase;
        let exists = sqlx::Postgres::database_exists(url)
            .await
            .map_err(|e| StoreError::from_sqlx("check that the database exists", e))?;
        if !exists {
            tracing::info!("creating the database");
            sqlx::Postgres::create_database(url)
                .await
                .map_err(|e| StoreError::from_sqlx("create the database", e))?;
        }
        // JIT compilation pays off for long analytic queries, not for these: a statement
        // whose estimate crosses `jit_above_cost` (a subtree walk on a large table) would
        // spend hundreds of milliseconds compiling to save microseconds.
        let options = url
            .parse::<sqlx::postgres::PgConnectOptions>()
            .map_err(|e| StoreError::from_sqlx("parse the database url", e))?
            .options([("jit", "off")]);
        // A connection taken from the pool is pinged (a round trip) only when it sat idle
        // for `PING_IDLE_AFTER`: pinging every one (sqlx's default) added a round trip,
        // and a wake-up of the coordinator and of a Postgres backend, to every statement
        // (docs/performance.md). One that broke meanwhile fails its statement, which the
        // caller retries, and is closed as it is returned.
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(5))
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= PING_IDLE_AFTER {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .connect_with(options)
            .await
            .map_err(|e| StoreError::from_sqlx("connect to postgres", e))?;
        migrator()
            .run(&pool)
            .await
            .map_err(|e| StoreError::Migrate(e.to_string()))?;
        Ok(Self { pool, held: None })
    }
}
