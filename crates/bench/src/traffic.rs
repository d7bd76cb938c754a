//! `--statements`: what taskwire asks of nats-server per task, from the server's own
//! counters (`/varz` on its monitoring port).
//!
//! The counters are read before and after the plain pass's measured tasks; the
//! difference, divided by the tasks, is what one task cost in messages the server
//! received (`in`: publishes, requests, replies, acks, pull requests) and sent (`out`:
//! deliveries to subscribers and consumers, replies). They count every client of the
//! server, the benchmark's own listener too (it hears each task's progress and its
//! finished notice), so the figure is taskwire's traffic plus about two deliveries.

use anyhow::Context;

/// The server's message counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    pub in_msgs: u64,
    pub out_msgs: u64,
    pub in_bytes: u64,
    pub out_bytes: u64,
}

impl Counters {
    /// Reads `/varz` from the monitoring endpoint at `base` (`http://host:port`).
    pub async fn read(http: &reqwest::Client, base: &str) -> anyhow::Result<Self> {
        let url = format!("{}/varz", base.trim_end_matches('/'));
        let body = http
            .get(&url)
            .send()
            .await
            .with_context(|| format!("failed to read {url}"))?
            .error_for_status()
            .with_context(|| format!("failed to read {url}"))?
            .text()
            .await?;
        Self::parse(&body).with_context(|| format!("{url} answered without message counters"))
    }

    /// The counters in a `/varz` document.
    pub fn parse(varz: &str) -> Option<Self> {
        let v: serde_json::Value = serde_json::from_str(varz).ok()?;
        let field = |name: &str| v.get(name)?.as_u64();
        Some(Self {
            in_msgs: field("in_msgs")?,
            out_msgs: field("out_msgs")?,
            in_bytes: field("in_bytes")?,
            out_bytes: field("out_bytes")?,
        })
    }
}

/// A Markdown table of the traffic between `before` and `after`, per task of `tasks`.
pub fn report(before: Counters, after: Counters, tasks: usize) -> String {
    let n = tasks.max(1) as f64;
    let per = |a: u64, b: u64| a.saturating_sub(b) as f64 / n;
    format!(
        "| nats-server, per task | messages | bytes |\n|---|---:|---:|\n\
         | received (publishes, requests, replies, acks, pulls) | {:.2} | {:.0} |\n\
         | sent (deliveries, replies) | {:.2} | {:.0} |\n",
        per(after.in_msgs, before.in_msgs),
        per(after.in_bytes, before.in_bytes),
        per(after.out_msgs, before.out_msgs),
        per(after.out_bytes, before.out_bytes),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counters_are_read_from_varz_and_divided_by_the_tasks() {
        let before = Counters::parse(
            r#"{"server_id":"x","in_msgs":100,"out_msgs":50,"in_bytes":1000,"out_bytes":2000}"#,
        )
        .expect("counters");
        let after = Counters::parse(
            r#"{"in_msgs":1100,"out_msgs":1050,"in_bytes":51000,"out_bytes":102000,"mem":1}"#,
        )
        .expect("counters");
        let table = report(before, after, 100);
        assert!(
            table
                .contains("| received (publishes, requests, replies, acks, pulls) | 10.00 | 500 |"),
            "{table}"
        );
        assert!(
            table.contains("| sent (deliveries, replies) | 10.00 | 1000 |"),
            "{table}"
        );
    }

    #[test]
    fn a_document_without_the_counters_is_refused() {
        assert_eq!(Counters::parse(r#"{"in_msgs":1}"#), None);
        assert_eq!(Counters::parse("not json"), None);
    }
}
