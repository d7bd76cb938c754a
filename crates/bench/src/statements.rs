//! `--statements`: what taskwire asks of Postgres per task, from `pg_stat_statements`.
//!
//! With the option, the run's Postgres loads the extension; the counters are reset
//! after the plain pass's warm-up and read after it, so each statement's calls, time,
//! rows and WAL are divided by the pass's tasks. Beside them, each table's row writes
//! per task from `pg_stat_user_tables`, with the share of updates Postgres wrote in
//! place (heap-only tuples, which write no index entry). The tables are printed, not
//! written to the docs: they explain a figure, they are not one.

use std::fmt::Write as _;

use anyhow::Context;
use sqlx::{Connection, PgConnection, Row};

/// The server settings that load the extension.
pub const SETTINGS: [(&str, &str); 3] = [
    ("shared_preload_libraries", "pg_stat_statements"),
    ("pg_stat_statements.track", "all"),
    // Planning is work per call too, beside execution.
    ("pg_stat_statements.track_planning", "on"),
];

/// Creates the extension in the database at `url` and clears its counters.
pub async fn reset(url: &str) -> anyhow::Result<()> {
    let mut conn = PgConnection::connect(url).await?;
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(&mut conn)
        .await
        .context("failed to create pg_stat_statements")?;
    sqlx::query("SELECT pg_stat_statements_reset()")
        .execute(&mut conn)
        .await?;
    sqlx::query("SELECT pg_stat_reset()")
        .execute(&mut conn)
        .await?;
    Ok(())
}

/// How long a backend may hold its table counters before reporting them: once idle, it
/// reports at most once a second, or ten seconds after the last report.
const TABLE_STATS_DELAY: std::time::Duration = std::time::Duration::from_secs(11);

/// The statements run since [`reset`], most time first, per task of a pass of `tasks`.
pub async fn report(url: &str, tasks: usize) -> anyhow::Result<String> {
    let mut conn = PgConnection::connect(url).await?;
    let rows = sqlx::query(
        "SELECT calls, total_exec_time, total_plan_time, plans, rows, wal_bytes::float8 AS wal, query \
         FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' \
         ORDER BY total_exec_time + total_plan_time DESC LIMIT 40",
    )
    .fetch_all(&mut conn)
    .await?;
    let n = tasks as f64;
    let mut out = statement_table(rows, n);
    // The processes' connections are idle once the pass ends: wait for their counters.
    tokio::time::sleep(TABLE_STATS_DELAY).await;
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(&mut conn)
        .await?;
    let tables = sqlx::query(
        "SELECT relname::text AS name, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del \
         FROM pg_stat_user_tables WHERE n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY relname",
    )
    .fetch_all(&mut conn)
    .await?;
    out.push('\n');
    out.push_str(&table_writes(tables, n));
    Ok(out)
}

/// Each table's inserts, updates and deletes per task, and the updates written in place.
fn table_writes(rows: Vec<sqlx::postgres::PgRow>, n: f64) -> String {
    let mut out = String::from(
        "| table | inserts/task | updates/task | of them in place | deletes/task |\n|---|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let name: String = r.get("name");
        let (ins, upd, hot, del): (i64, i64, i64, i64) = (
            r.get("n_tup_ins"),
            r.get("n_tup_upd"),
            r.get("n_tup_hot_upd"),
            r.get("n_tup_del"),
        );
        let in_place = if upd > 0 {
            format!("{:.0} %", hot as f64 * 100.0 / upd as f64)
        } else {
            "-".to_owned()
        };
        let _ = writeln!(
            out,
            "| {name} | {:.2} | {:.2} | {in_place} | {:.2} |",
            ins as f64 / n,
            upd as f64 / n,
            del as f64 / n,
        );
    }
    out
}

/// One line per statement, most time first.
fn statement_table(rows: Vec<sqlx::postgres::PgRow>, n: f64) -> String {
    let mut out = String::from(
        "| calls/task | µs/task | planning µs/task (plans/task) | rows/task | WAL B/task | statement |\n|---:|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        let calls: i64 = r.get("calls");
        let ms: f64 = r.get("total_exec_time");
        let plan_ms: f64 = r.get("total_plan_time");
        let plans: i64 = r.get("plans");
        let rows: i64 = r.get("rows");
        let wal: f64 = r.get("wal");
        let query: String = r.get("query");
        let query = query.split_whitespace().collect::<Vec<_>>().join(" ");
        let query: String = query.chars().take(140).collect();
        let _ = writeln!(
            out,
            "| {:.2} | {:.1} | {:.1} ({:.2}) | {:.2} | {:.0} | `{}` |",
            calls as f64 / n,
            ms * 1000.0 / n,
            plan_ms * 1000.0 / n,
            plans as f64 / n,
            rows as f64 / n,
            wal / n,
            query.replace('|', "\\|"),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwire_test_support::PrivatePostgres;

    #[tokio::test]
    async fn the_report_counts_statements_run_since_the_reset_per_task() {
        let pg = PrivatePostgres::start_with_settings(&SETTINGS).expect("postgres");
        let url = pg.url();
        let mut conn = PgConnection::connect(&url).await.expect("connect");
        sqlx::query("CREATE TABLE counted (n int)")
            .execute(&mut conn)
            .await
            .expect("create");
        sqlx::query("INSERT INTO counted VALUES (0)")
            .execute(&mut conn)
            .await
            .expect("before the reset");
        // Its table counters are reported before the reset, not after it.
        sqlx::query("SELECT pg_stat_force_next_flush()")
            .execute(&mut conn)
            .await
            .expect("flush");
        reset(&url).await.expect("reset");
        for n in 1..=4 {
            sqlx::query("INSERT INTO counted VALUES ($1)")
                .bind(n)
                .execute(&mut conn)
                .await
                .expect("insert");
        }
        // Four inserts over two tasks: two calls and two rows per task, the one before
        // the reset not counted.
        let table = report(&url, 2).await.expect("report");
        let line = table
            .lines()
            .find(|l| l.contains("INSERT INTO counted"))
            .unwrap_or_else(|| panic!("the insert is reported:\n{table}"));
        assert!(line.starts_with("| 2.00 | "), "{line}");
        let rows = line.split('|').nth(4).map(str::trim);
        assert_eq!(rows, Some("2.00"), "{line}");
        // And the table's own counters: four rows inserted over two tasks.
        let line = table
            .lines()
            .find(|l| l.starts_with("| counted |"))
            .unwrap_or_else(|| panic!("the table's writes are reported:\n{table}"));
        assert_eq!(line, "| counted | 2.00 | 0.00 | - | 0.00 |");
    }
}
