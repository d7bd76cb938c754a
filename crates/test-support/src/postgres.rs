//! A fresh Postgres database per test, dropped afterwards.
//!
//! The server is `$TASKWIRE_TEST_DATABASE_URL`, set by `make test` and `.ci/run` (which
//! start one when none runs). Without it the default is
//! `postgres://postgres@127.0.0.1:5432/postgres`, except under CI (`$CI` set): there a
//! missing URL fails the test rather than reach for whatever listens on 5432.

use anyhow::Context;
use sqlx::Connection;

const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A database created for one test.
pub struct TestDatabase {
    admin_url: String,
    name: String,
    url: String,
}

impl TestDatabase {
    /// Creates `tw_test_<random>` on the test server.
    pub async fn create() -> anyhow::Result<Self> {
        let admin_url = admin_url(
            std::env::var("TASKWIRE_TEST_DATABASE_URL").ok(),
            std::env::var_os("CI").is_some(),
        )?;
        let name = format!("tw_test_{}", uuid::Uuid::new_v4().simple());
        let mut conn = sqlx::PgConnection::connect(&admin_url)
            .await
            .with_context(|| {
                format!(
                    "failed to connect to the test postgres at {admin_url} \
                 (start one, or set TASKWIRE_TEST_DATABASE_URL; `bash .ci/run` does both)"
                )
            })?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .with_context(|| format!("failed to create test database {name}"))?;
        let _ = conn.close().await;
        let url = replace_database(&admin_url, &name);
        Ok(Self {
            admin_url,
            name,
            url,
        })
    }

    /// The connection URL of this test's database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Ends every connection to this database (as a restart or a proxy would); returns
    /// how many there were.
    pub async fn terminate_connections(&self) -> anyhow::Result<i64> {
        let mut conn = sqlx::PgConnection::connect(&self.admin_url).await?;
        let ended: i64 = sqlx::query_scalar(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1",
        )
        .bind(&self.name)
        .fetch_one(&mut conn)
        .await
        .with_context(|| format!("failed to end the connections to {}", self.name))?;
        let _ = conn.close().await;
        Ok(ended)
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        // Drop runs inside the test's runtime; a separate thread with its own runtime
        // avoids blocking it, and joining keeps the database count bounded.
        let handle = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let mut conn = sqlx::PgConnection::connect(&admin_url).await.ok()?;
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                )))
                .execute(&mut conn)
                .await
                .ok()
            })
        });
        let _ = handle.join();
    }
}

/// The server's URL: the one set, else the default outside CI.
fn admin_url(set: Option<String>, ci: bool) -> anyhow::Result<String> {
    match set {
        Some(url) if !url.is_empty() => Ok(url),
        _ if ci => anyhow::bail!(
            "TASKWIRE_TEST_DATABASE_URL is not set: under CI the tests use only the postgres \
             it names, never the default {DEFAULT_ADMIN_URL} (run them with `bash .ci/run` \
             or `make test`)"
        ),
        _ => Ok(DEFAULT_ADMIN_URL.to_owned()),
    }
}

/// Swaps the database name in a `postgres://` URL, keeping any query string.
fn replace_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let base = match base[after_scheme..].find('/') {
        Some(i) => &base[..after_scheme + i],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{db}?{q}"),
        None => format!("{base}/{db}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_ci_only_a_set_server_url_is_used() {
        let set = Some("postgres://postgres@127.0.0.1:55432/postgres".to_owned());
        assert_eq!(
            admin_url(set.clone(), true).expect("set"),
            "postgres://postgres@127.0.0.1:55432/postgres"
        );
        let err = admin_url(None, true).expect_err("no default under ci");
        assert!(
            err.to_string().contains("TASKWIRE_TEST_DATABASE_URL"),
            "{err}"
        );
        assert!(admin_url(Some(String::new()), true).is_err());
        assert_eq!(admin_url(None, false).expect("default"), DEFAULT_ADMIN_URL);
    }

    #[test]
    fn database_name_is_replaced_and_query_kept() {
        assert_eq!(
            replace_database("postgres://u@h:1/postgres", "x"),
            "postgres://u@h:1/x"
        );
        assert_eq!(
            replace_database("postgres://u@h:1/postgres?sslmode=disable", "x"),
            "postgres://u@h:1/x?sslmode=disable"
        );
        assert_eq!(
            replace_database("postgres://u@h:1", "x"),
            "postgres://u@h:1/x"
        );
    }
}
