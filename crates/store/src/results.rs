//! Results: fenced writes of how attempts ended.

use std::collections::HashMap;
use std::time::Duration;

use prost::Message;
use taskwire_protocol::lifecycle::EventKind;
use taskwire_protocol::{TaskResult, TaskStatus, pb};

use crate::lifecycle::Transitioned;
use crate::{RecordedResult, Store, StoreError};

impl Store {
    /// Writes results, each fenced by its claim epoch; returns, in order, whether each
    /// was recorded (`false`: a stale attempt, or the task already finished).
    ///
    /// The lifecycle decides what each result does: an `error` the worker reports
    /// retryable puts the task back to `queued` while its attempt budget lasts (its
    /// worker redelivers it after a backoff) and dead-letters it after; any other result
    /// finishes the task with its status. Either way the attempt's row gets its outcome, and a title
    /// the result carries is kept (a later result without one leaves it).
    pub async fn record_results(&self, results: &[TaskResult]) -> Result<Vec<bool>, StoreError> {
        Ok(self
            .record_results_timed(results)
            .await?
            .iter()
            .map(Option::is_some)
            .collect())
    }

    /// [`Store::record_results`], saying for each recorded result its task's agent and
    /// how long ago it was submitted and claimed (for the latency metrics); `None`
    /// where a result was not recorded.
    pub async fn record_results_timed(
        &self,
        results: &[TaskResult],
    ) -> Result<Vec<Option<RecordedResult>>, StoreError> {
        if results.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<uuid::Uuid> = results.iter().map(|r| r.task_id.as_uuid()).collect();
        let epochs: Vec<i64> = results
            .iter()
            .map(|r| i64::try_from(r.claim_epoch.0).unwrap_or(i64::MAX))
            .collect();
        // What each report becomes, with attempts left or with the budget spent; the
        // statement picks one by the task's row. A report that is no way to end an
        // attempt is not recorded.
        let outcomes: Vec<Option<(TaskStatus, TaskStatus)>> = results
            .iter()
            .map(|r| match crate::lifecycle::outcomes(r.report()) {
                Ok(o) => Some(o),
                Err(e) => {
                    tracing::warn!(task.id = %r.task_id, error = %e, "result not recorded");
                    None
                }
            })
            .collect();
        let if_left: Vec<Option<&str>> = outcomes.iter().map(|o| o.map(|o| o.0.as_str())).collect();
        let if_spent: Vec<Option<&str>> =
            outcomes.iter().map(|o| o.map(|o| o.1.as_str())).collect();
        // The stored result (kept only when the task finishes, so with the status it
        // ends in: a retryable error's is `dead_lettered`) leaves the transcript out:
        // it lives in `sessions`.
        let payloads: Vec<Option<Vec<u8>>> = results
            .iter()
            .zip(&outcomes)
            .map(|(r, o)| {
                o.map(|(_, ended)| {
                    let mut wire = pb::TaskResult::from(r);
                    wire.status = pb::TaskStatus::from(ended) as i32;
                    wire.transcript_json.clear();
                    wire.encode_to_vec()
                })
            })
            .collect();
        let errors: Vec<Option<String>> = results
            .iter()
            .map(|r| r.errors.first().map(|e| e.message.clone()))
            .collect();
        let titles: Vec<Option<String>> = results.iter().map(|r| r.title.clone()).collect();
        // Every recorded attempt's own calls were paid for, retried ones too.
        let own = |f: fn(&TaskResult) -> u64| -> Vec<i64> {
            results
                .iter()
                .map(|r| i64::try_from(f(r)).unwrap_or(i64::MAX))
                .collect()
        };
        let own_input = own(|r| r.own_usage.input_tokens);
        let own_output = own(|r| r.own_usage.output_tokens);
        let own_cost = own(|r| r.own_usage.cost_picousd);
        let own_unpriced = own(|r| r.own_usage.unpriced_tokens);
        let own_cached = own(|r| r.own_usage.cached_input_tokens);
        let own_cache_write = own(|r| r.own_usage.cache_write_input_tokens);
        let retryable: Vec<bool> = results
            .iter()
            .map(|r| r.errors.iter().any(|e| e.retryable))
            .collect();

        // Transcripts are fenced by their attempt's claim, not by the task's status: a
        // session cancelled mid-way keeps what it did, for a resume.
        let writes = transcripts(results);
        let (s_sessions, s_tasks, s_epochs, s_transcripts) =
            crate::sessions::columns(writes.iter());
        type Row = (uuid::Uuid, i64, String, String, f64, Option<f64>, bool);
        // One statement, so one round trip and its own transaction: the attempt's
        // outcome and the transcripts are written by CTEs on other tables, so all see
        // the rows as they were before it.
        let recorded: Vec<Row> = self
            .on_connection("record results", async |conn| {
                sqlx::query_as(crate::lifecycle::finish_statement(
                    &crate::sessions::upsert_statement(13),
                ))
                .bind(&ids)
                .bind(&epochs)
                .bind(&if_left)
                .bind(&payloads)
                .bind(&if_spent)
                .bind(&errors)
                .bind(&titles)
                .bind(&own_input)
                .bind(&own_output)
                .bind(&own_cost)
                .bind(&own_unpriced)
                .bind(&retryable)
                .bind(&s_sessions)
                .bind(&s_tasks)
                .bind(&s_epochs)
                .bind(&s_transcripts)
                .bind(&own_cached)
                .bind(&own_cache_write)
                .fetch_all(conn)
                .await
                .map_err(|e| StoreError::from_sqlx("record results", e))
            })
            .await?;
        let seconds = |s: f64| Duration::from_secs_f64(s.max(0.0));
        let mut recorded: HashMap<(uuid::Uuid, i64), RecordedResult> = recorded
            .into_iter()
            .map(|(id, epoch, status, agent, submitted, claimed, children)| {
                let mut transition = Transitioned::new(id, EventKind::Finish, &status, None)?;
                transition.children = Some(children);
                let recorded = RecordedResult {
                    agent,
                    since_submit: seconds(submitted),
                    since_claim: claimed.map(seconds),
                    transition,
                };
                Ok(((id, epoch), recorded))
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(ids
            .iter()
            .zip(&epochs)
            .map(|(id, e)| recorded.remove(&(*id, *e)))
            .collect())
    }
}

/// The transcripts carried by `results`, one per session (the newest claim's).
fn transcripts(results: &[TaskResult]) -> Vec<crate::sessions::SessionWrite> {
    let mut by_session: std::collections::HashMap<uuid::Uuid, crate::sessions::SessionWrite> =
        std::collections::HashMap::new();
    for r in results {
        let (Some(session), Some(json)) = (r.session_id, &r.transcript_json) else {
            continue;
        };
        // One malformed transcript must not fail the batch: check it without building it.
        if serde_json::from_str::<serde::de::IgnoredAny>(json).is_err() {
            tracing::warn!(task.id = %r.task_id, "ignoring a transcript that is not json");
            continue;
        }
        let newer = by_session
            .get(&session.as_uuid())
            .is_none_or(|w| w.2 < r.claim_epoch);
        if newer {
            by_session.insert(
                session.as_uuid(),
                (session, r.task_id, r.claim_epoch, json.clone()),
            );
        }
    }
    by_session.into_values().collect()
}
