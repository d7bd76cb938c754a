//! Statistics kept up with the hot path's tables while they grow.
//!
//! A prepared statement settles, after five runs, on a generic plan costed on the
//! tables' statistics of that moment, and keeps it until a table it reads is analysed
//! again. On a new deployment the tables start empty: a result batch planned while
//! `attempts` held a few rows joined it by a sequential scan, and kept scanning every
//! attempt ever made until autovacuum next analysed the table (a minute or more away,
//! and then only once enough of it changed): over 40,000 tasks its cost per task
//! doubled. [`Store::analyze_grown`], called at every sweep of the coordinator, analyses each such
//! table once it has changed by half since its last analysis; a table that grows
//! from nothing is analysed O(log n) times, and a large one is left to autovacuum.
//! Planning every statement afresh instead (`plan_cache_mode = force_custom_plan`)
//! kept the result batch flat too, but cost Postgres a fifth more CPU per task.

use crate::{Store, StoreError};

/// The tables the hot path's batch statements join.
const TABLES: [&str; 3] = ["tasks", "attempts", "sessions"];

/// The statistics target of these analyses (Postgres's default is 100): what a plan
/// needs here is the table's size, and a sample of 3,000 rows gives it for a tenth of
/// the work (the analyses of a full sample cost the task table 27 µs per task over a
/// 40,000-task run). A table's fuller statistics come with autovacuum's analyses, which
/// take over once it is large: it changes by half between them no more.
const STATISTICS_TARGET: u32 = 10;

/// Fewer changes than this never call for an analysis: plans on a table this small
/// cost little whatever they do.
const MIN_CHANGED: i64 = 1_000;

impl Store {
    /// Analyses each of the hot path's tables that changed by half since it was last
    /// analysed (and by at least [`MIN_CHANGED`] rows); returns the tables analysed. An
    /// analysis invalidates the plans that read the table, so statements are planned
    /// again on its new size.
    pub async fn analyze_grown(&self) -> Result<Vec<&'static str>, StoreError> {
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT relname::text, n_live_tup, n_mod_since_analyze \
             FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname = ANY($1)",
        )
        .bind(&TABLES[..])
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("read the tables' statistics", e))?;
        let mut analysed = Vec::new();
        for table in TABLES {
            let Some((_, live, changed)) = rows.iter().find(|(name, ..)| name == table) else {
                continue;
            };
            if *changed < MIN_CHANGED || *changed * 2 < *live {
                continue;
            }
            analyse(&self.pool, table)
                .await
                .map_err(|e| StoreError::from_sqlx("analyse a grown table", e))?;
            tracing::debug!(table, rows = live, changed, "table analysed");
            analysed.push(table);
        }
        Ok(analysed)
    }
}

/// `ANALYZE table` with [`STATISTICS_TARGET`], in a transaction of its own.
async fn analyse(pool: &sqlx::PgPool, table: &'static str) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SET LOCAL default_statistics_target = {STATISTICS_TARGET}"
    )))
    .execute(&mut *tx)
    .await?;
    // A name from `TABLES`, never caller input.
    sqlx::query(sqlx::AssertSqlSafe(format!("ANALYZE {table}")))
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}
