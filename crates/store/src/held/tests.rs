//! Held connections against a real Postgres: a loop's statements share one backend,
//! one that broke costs a single failed statement, and a small pool lends none.

use taskwire_test_support::TestDatabase;

use super::*;

/// The backend that runs the handle's next statement.
async fn backend(store: &Store) -> Result<i32, StoreError> {
    store
        .on_connection("read the backend", async |conn| {
            sqlx::query_scalar::<_, i32>("SELECT pg_backend_pid()")
                .fetch_one(conn)
                .await
                .map_err(|e| StoreError::from_sqlx("read the backend", e))
        })
        .await
}

/// A database, its store, a handle holding a connection, and that connection's backend.
async fn holding() -> (TestDatabase, Store, Store, i32) {
    let db = TestDatabase::create().await.expect("test database");
    let store = Store::connect(db.url(), 8).await.expect("store");
    let held = store.holding_a_connection();
    let first = backend(&held).await.expect("first statement");
    (db, store, held, first)
}

/// Ends the backend `pid` from another connection, as a restart or a proxy would.
async fn terminate(store: &Store, pid: i32) {
    let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(&store.pool)
        .await
        .expect("terminate");
    assert!(killed, "backend {pid} was not terminated");
}

#[tokio::test]
async fn a_loops_statements_share_one_connection_and_a_broken_one_is_replaced() {
    let (_db, store, held, first) = holding().await;
    for _ in 0..5 {
        assert_eq!(backend(&held).await.expect("statement"), first);
    }

    // Its backend goes away (a restart, a proxy's timeout): one statement fails (or,
    // on a machine so slow that the connection sat idle past the ping's threshold,
    // the ping finds the loss and the statement runs elsewhere)...
    terminate(&store, first).await;
    if let Ok(elsewhere) = backend(&held).await {
        assert_ne!(
            elsewhere, first,
            "a statement ran on the terminated backend"
        );
    }
    // ...and the next runs on another connection, which is kept in turn.
    let second = backend(&held).await.expect("a fresh connection");
    assert_ne!(second, first);
    assert_eq!(backend(&held).await.expect("statement"), second);
}

#[tokio::test]
async fn a_small_pool_lends_no_connection_to_hold() {
    let db = TestDatabase::create().await.expect("test database");
    let small = Store::connect(db.url(), HOLD_FROM_POOL_SIZE - 1)
        .await
        .expect("store");
    assert!(small.holding_a_connection().held.is_none());
    let large = Store::connect(db.url(), HOLD_FROM_POOL_SIZE)
        .await
        .expect("store");
    assert!(large.holding_a_connection().held.is_some());
    // A plain handle's statements still run, on the pool's connections.
    backend(&small.holding_a_connection())
        .await
        .expect("statement");
}

#[tokio::test]
async fn a_held_connection_that_broke_while_idle_is_replaced_before_its_next_statement() {
    let (_db, store, held, first) = holding().await;
    terminate(&store, first).await;
    // Idle past the ping's threshold: the next statement finds the loss by the ping
    // and runs on another connection, failing nothing.
    tokio::time::sleep(PING_IDLE_AFTER + std::time::Duration::from_millis(200)).await;
    let second = backend(&held)
        .await
        .expect("a statement after the idle time does not fail");
    assert_ne!(second, first);
}
