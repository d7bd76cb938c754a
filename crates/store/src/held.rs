//! Connections a batch loop keeps between its statements ([`Store::holding_a_connection`]).

use std::sync::Arc;
use std::time::Instant;

use sqlx::pool::PoolConnection;

use crate::{PING_IDLE_AFTER, Store, StoreError};

/// The smallest pool that lends connections to be held (see
/// [`Store::holding_a_connection`]): a coordinator holds up to four.
const HOLD_FROM_POOL_SIZE: u32 = 8;

/// A connection kept out of the pool between one loop's statements, with when its
/// last statement ended.
#[derive(Default)]
pub(crate) struct Held(std::sync::Mutex<Option<(PoolConnection<sqlx::Postgres>, Instant)>>);

impl Held {
    /// The kept connection, if any; one idle for `PING_IDLE_AFTER` is pinged first, as
    /// the pool does, and dropped (back to the pool, which closes it) if it fails.
    async fn take(&self) -> Option<PoolConnection<sqlx::Postgres>> {
        let (mut conn, since) = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()?;
        if since.elapsed() >= PING_IDLE_AFTER
            && let Err(e) = sqlx::Connection::ping(&mut *conn).await
        {
            tracing::info!(error = %e, "a held connection failed its ping, taking another");
            return None;
        }
        Some(conn)
    }

    /// Keeps `conn` for the next statement (one already kept, by a concurrent caller,
    /// wins; this one goes back to the pool).
    fn keep(&self, conn: PoolConnection<sqlx::Postgres>) {
        let mut slot = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some((conn, Instant::now()));
        }
    }
}

impl Store {
    /// A handle for a loop that issues one statement after another (a batcher): its
    /// batch statements share one connection, kept out of the pool between them.
    /// Every connection given back to the pool costs a round trip (sqlx pings it to
    /// make sure it is clean), a wake-up of the caller and of a Postgres backend, on
    /// each statement (docs/performance.md). A held connection idle for a second or
    /// more is pinged before its next statement, as the pool pings its own; a statement
    /// that fails gives its connection back (where the ping closes a broken one) and
    /// the next takes another.
    /// The handle's other statements use the pool. A pool of fewer than
    /// `HOLD_FROM_POOL_SIZE` connections lends none to be held: the handle is a plain
    /// clone, so that held connections never starve the rest.
    pub fn holding_a_connection(&self) -> Self {
        let lends = self.pool.options().get_max_connections() >= HOLD_FROM_POOL_SIZE;
        Self {
            pool: self.pool.clone(),
            held: lends.then(|| Arc::new(Held::default())),
        }
    }

    /// Runs `statement` on the held connection (taking one from the pool when none is
    /// held), or on a connection of the pool's for a handle that holds none; `what`
    /// names it in an error.
    pub(crate) async fn on_connection<T>(
        &self,
        what: &'static str,
        statement: impl AsyncFnOnce(&mut sqlx::PgConnection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let held = match &self.held {
            Some(held) => held.take().await,
            None => None,
        };
        let mut conn = match held {
            Some(conn) => conn,
            None => self
                .pool
                .acquire()
                .await
                .map_err(|e| StoreError::from_sqlx(what, e))?,
        };
        let done = statement(&mut conn).await;
        if let (Ok(_), Some(held)) = (&done, &self.held) {
            held.keep(conn);
        }
        done
    }
}

#[cfg(test)]
mod tests;
