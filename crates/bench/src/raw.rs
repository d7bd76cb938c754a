//! The servers' own rates, measured on the same servers as taskwire: what one task's
//! worth of messaging and of commits costs without taskwire, so its figures can be read
//! as ratios of these.
//!
//! - [`jetstream_rate`]: messages published (pipelined) to a WorkQueue stream on the
//!   file store while a pull consumer takes and acks them, first publish to last ack.
//! - [`jetstream_latency`]: publish→delivery of one message at a time to a waiting pull
//!   consumer.
//! - [`postgres_commits`]: single-row `INSERT`s, each its own transaction, from a few
//!   concurrent connections.
//!
//! Unlike the rest of taskwire, this file uses `async_nats` directly, on purpose: it
//! measures raw JetStream, without `taskwire_bus`'s codec, headers or typed consumers,
//! as the baseline taskwire's figures are read against.

use std::time::{Duration, Instant};

use anyhow::Context;
use async_nats::jetstream::{self, consumer, stream};
use futures::StreamExt;
use sqlx::Connection;

/// Publishes `n` messages while a pull consumer acks them; the time from the first
/// publish to the last ack.
pub async fn jetstream_rate(url: &str, n: usize) -> anyhow::Result<Duration> {
    let js = jetstream::new(async_nats::connect(url).await?);
    let consumer = work_queue(&js, "BENCH_RAW", "bench.raw").await?;
    let t0 = Instant::now();
    let consume = tokio::spawn(async move {
        let mut messages = consumer.messages().await?;
        for _ in 0..n {
            let m = messages
                .next()
                .await
                .context("the raw stream ended")?
                .map_err(|e| anyhow::anyhow!(e))?;
            m.ack().await.map_err(|e| anyhow::anyhow!(e))?;
        }
        anyhow::Ok(Instant::now())
    });
    // Acks are awaited as they come: a publish waits while too many are unawaited.
    let (acks, mut pending) = tokio::sync::mpsc::unbounded_channel();
    let acker = tokio::spawn(async move {
        while let Some(ack) = pending.recv().await {
            let ack: jetstream::context::PublishAckFuture = ack;
            ack.await?;
        }
        anyhow::Ok(())
    });
    for i in 0..n {
        let ack = js.publish("bench.raw", format!("m{i}").into()).await?;
        acks.send(ack).context("the ack task stopped")?;
    }
    drop(acks);
    acker.await??;
    let end = consume.await??;
    Ok(end - t0)
}

/// Publish→delivery latency of `n` single messages, one at a time.
pub async fn jetstream_latency(url: &str, n: usize) -> anyhow::Result<Vec<Duration>> {
    let js = jetstream::new(async_nats::connect(url).await?);
    let consumer = work_queue(&js, "BENCH_LATENCY", "bench.latency").await?;
    let mut messages = consumer.messages().await?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        js.publish("bench.latency", format!("m{i}").into()).await?;
        let m = messages
            .next()
            .await
            .context("the latency stream ended")?
            .map_err(|e| anyhow::anyhow!(e))?;
        out.push(t.elapsed());
        m.ack().await.map_err(|e| anyhow::anyhow!(e))?;
    }
    Ok(out)
}

async fn work_queue(
    js: &jetstream::Context,
    name: &str,
    subject: &str,
) -> anyhow::Result<consumer::PullConsumer> {
    let s = js
        .create_stream(stream::Config {
            name: name.into(),
            subjects: vec![subject.into()],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .with_context(|| format!("failed to create stream {name}"))?;
    Ok(s.create_consumer(consumer::pull::Config {
        durable_name: Some("bench".into()),
        ..Default::default()
    })
    .await?)
}

/// Commits `n` single-row transactions from `connections` connections to the
/// database at `url`, in a table of its own; the time they took.
pub async fn postgres_commits(url: &str, n: usize, connections: usize) -> anyhow::Result<Duration> {
    let mut setup = sqlx::PgConnection::connect(url)
        .await
        .context("failed to connect to postgres for the raw commit rate")?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS bench_commits (id bigserial PRIMARY KEY, payload text NOT NULL)",
    )
    .execute(&mut setup)
    .await?;
    let mut conns = Vec::with_capacity(connections);
    for _ in 0..connections {
        conns.push(sqlx::PgConnection::connect(url).await?);
    }
    let t0 = Instant::now();
    let per = n.div_ceil(connections);
    let mut tasks = Vec::new();
    for (c, mut conn) in conns.into_iter().enumerate() {
        let count = per.min(n.saturating_sub(c * per));
        tasks.push(tokio::spawn(async move {
            for i in 0..count {
                // One transaction per row, as a submit without batching would be.
                let mut tx = conn.begin().await?;
                sqlx::query("INSERT INTO bench_commits (payload) VALUES ($1)")
                    .bind(format!("row {c}.{i}"))
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(t0.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwire_test_support::{NatsServer, PrivatePostgres};

    #[tokio::test]
    async fn the_raw_phases_run_against_real_servers() {
        let nats = NatsServer::start().expect("nats");
        jetstream_rate(&nats.url(), 50).await.expect("raw rate");
        let latencies = jetstream_latency(&nats.url(), 5).await.expect("latency");
        assert_eq!(latencies.len(), 5);
        let pg = PrivatePostgres::start().expect("postgres");
        postgres_commits(&pg.url(), 10, 3).await.expect("commits");
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&pg.url())
            .await
            .expect("connect");
        let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM bench_commits")
            .fetch_one(&mut conn)
            .await
            .expect("count");
        assert_eq!(rows, 10);
    }
}
