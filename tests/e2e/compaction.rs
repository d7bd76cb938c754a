//! Compaction through a real worker: a session that reads more than its model's
//! context window holds completes, each request after a compaction carries the
//! summary and not the old turns, and a later task resuming the session starts from
//! the summary. The scripted model reports a quarter token per byte of each request
//! it receives, as a real model's count would roughly be.

use std::sync::{Arc, Mutex};

use serde_json::json;
use taskwire_e2e::{progress_events, start};
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

/// The scripted model's context window, in tokens.
const WINDOW: u64 = 6_000;
/// The share of it a request may fill before the session is compacted.
const THRESHOLD: f64 = 0.5;
/// Files the session reads one per step, each about 1,000 tokens: 6,000 tokens of
/// file, the whole window, before any prompt or answer.
const CHUNKS: usize = 6;

fn chunk_text(n: usize) -> String {
    (0..100)
        .map(|line| format!("chunk-{n}-line-{line:03} the quick brown fox jumps\n"))
        .collect()
}

fn is_compaction(req: &SeenRequest) -> bool {
    req.messages.first().is_some_and(|m| {
        m.role == "system" && m.content == taskwire_definitions::builtin::compaction().prompt
    })
}

fn mentions(req: &SeenRequest, needle: &str) -> bool {
    req.messages.iter().any(|m| m.content.contains(needle))
}

/// The last chunk the conversation shows read: in a tool result or in a summary.
fn chunks_read(req: &SeenRequest) -> usize {
    (1..=CHUNKS)
        .filter(|n| {
            mentions(req, &format!("chunk-{n}-line-000"))
                || mentions(req, &format!("chunks 1 to {n} read"))
        })
        .max()
        .unwrap_or(0)
}

/// Reads the chunks one per step, answers when all are read; writes summaries that
/// say how far it got; reports a quarter token per request byte and adds it all up.
async fn model(totals: Arc<Mutex<(u64, u64)>>) -> ScriptedModel {
    ScriptedModel::start(move |req: &SeenRequest| {
        let input = u64::try_from(req.raw.to_string().len() / 4).expect("fits");
        let read = chunks_read(req);
        let reply = if is_compaction(req) {
            ScriptedReply::text(format!(
                "SUMMARY: chunks 1 to {read} read; next: chunk {}",
                read + 1
            ))
        } else if req
            .last_user_message()
            .is_some_and(|m| m.contains("which chunks"))
        {
            ScriptedReply::text(format!("from the summary: 1 to {read}"))
        } else if read < CHUNKS {
            ScriptedReply::tool_calls([(
                format!("read-{}", read + 1),
                "read",
                json!({"filePath": format!("chunk{}.txt", read + 1)}),
            )])
        } else {
            ScriptedReply::text("all chunks read")
        };
        let mut totals = totals.lock().expect("not poisoned");
        totals.0 += input;
        totals.1 += 7;
        reply.with_usage(input, 7)
    })
    .await
}

fn tokens(req: &SeenRequest) -> u64 {
    u64::try_from(req.raw.to_string().len() / 4).expect("fits")
}

#[tokio::test]
async fn a_session_longer_than_the_window_completes_from_summaries_of_its_old_turns() {
    let totals = Arc::new(Mutex::new((0, 0)));
    let mut cluster = start(model(totals.clone()).await, 0, 1)
        .await
        .expect("cluster");
    for n in 1..=CHUNKS {
        std::fs::write(
            cluster.workspace.path().join(format!("chunk{n}.txt")),
            chunk_text(n),
        )
        .expect("write chunk");
    }
    cluster.add_worker_with("w", 1, |c| {
        c.models = serde_json::from_value(json!({"scripted": {
            "context_window": WINDOW,
            "input_usd_per_mtok": 0.15,
            "output_usd_per_mtok": 0.6,
        }}))
        .expect("a valid catalogue");
        c.compaction_threshold = Some(THRESHOLD);
    });

    let id = cluster
        .submit(
            "general",
            "read chunk1.txt to chunk6.txt in order, one per step",
        )
        .await
        .expect("submit");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    let result = task.result.expect("result");
    assert_eq!(result.output.expect("output").text, "all chunks read");

    let requests = cluster.model.requests();
    let sizes: Vec<(bool, u64)> = requests
        .iter()
        .map(|r| (is_compaction(r), tokens(r)))
        .collect();
    let compactions = sizes.iter().filter(|(c, _)| *c).count();
    let file_tokens: u64 = (1..=CHUNKS).map(|n| chunk_text(n).len() as u64 / 4).sum();
    eprintln!(
        "compaction e2e: window {WINDOW}, threshold {THRESHOLD}, file tokens {file_tokens}, \
         {} requests ({compactions} compactions), tokens per request: {sizes:?}",
        requests.len()
    );
    assert!(
        file_tokens >= WINDOW,
        "the session reads more than the window holds"
    );
    assert!(compactions >= 1, "{sizes:?}");
    for (compaction, size) in &sizes {
        assert!(
            *size < WINDOW,
            "a request of {size} tokens (compaction: {compaction})"
        );
    }
    // The session request right after each compaction carries its summary and not
    // the chunks summarised.
    for (i, req) in requests
        .iter()
        .enumerate()
        .filter(|(_, r)| is_compaction(r))
    {
        let read = chunks_read(req);
        let next = &requests[i + 1];
        assert!(!is_compaction(next));
        assert!(
            mentions(next, &format!("SUMMARY: chunks 1 to {read} read")),
            "request {} lacks the summary",
            i + 1
        );
        for n in 1..=read {
            assert!(
                !mentions(next, &format!("chunk-{n}-line-000")),
                "request {} still carries chunk {n}",
                i + 1
            );
        }
    }
    // Every call, the summaries' included, counts in the task's usage.
    let (input, output) = *totals.lock().expect("not poisoned");
    let usage = result.usage.expect("usage");
    assert_eq!((usage.input_tokens, usage.output_tokens), (input, output));

    // Watchers saw each compaction.
    let events = cluster.watch(&id).await.expect("watch");
    let seen: Vec<_> = progress_events(&events)
        .into_iter()
        .filter_map(|p| match &p.event {
            Some(pb::task_progress::Event::Compaction(c)) => {
                Some((c.tokens_before, c.tokens_after))
            }
            _ => None,
        })
        .collect();
    eprintln!("compaction e2e: tokens before and after each compaction: {seen:?}");
    assert_eq!(seen.len(), compactions);
    for (before, after) in &seen {
        assert!(
            *before as f64 > WINDOW as f64 * THRESHOLD && after < before,
            "{seen:?}"
        );
    }

    // A task resuming the session starts from the last summary, not the chunks.
    let resumed = cluster
        .resume("general", "which chunks did you read?", &result.session_id)
        .await
        .expect("submit resume");
    let task = cluster
        .wait_finished(&resumed)
        .await
        .expect("resumed finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    let requests = cluster.model.requests();
    let first = requests
        .iter()
        .find(|r| {
            r.last_user_message()
                .is_some_and(|m| m.contains("which chunks"))
        })
        .expect("the resumed task's request");
    assert!(
        mentions(first, "SUMMARY: chunks 1 to"),
        "{:?}",
        first.messages
    );
    assert!(
        mentions(first, "all chunks read"),
        "the turns after the summary are kept"
    );
    for n in 1..CHUNKS {
        assert!(
            !mentions(first, &format!("chunk-{n}-line-000")),
            "chunk {n} was sent again"
        );
    }
    cluster.shutdown().await;
}

/// A provider that refuses a request as too long for the model (OpenAI's
/// `context_length_exceeded`, Anthropic's "prompt is too long") although the
/// estimate saw no need to compact: the session compacts and sends the step once
/// more, and the task completes in its first attempt.
#[tokio::test]
async fn a_providers_context_overflow_compacts_and_retries_the_call_in_the_same_attempt() {
    for (model_name, overflow) in [
        (
            "scripted",
            r#"{"error": {"message": "This model's maximum context length is 6000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}"#,
        ),
        (
            "anthropic/claude-test",
            r#"{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 7000 tokens > 6000 maximum"}}"#,
        ),
    ] {
        let refused = Arc::new(Mutex::new(false));
        let model = ScriptedModel::start({
            let refused = refused.clone();
            move |req: &SeenRequest| {
                if is_compaction(req) {
                    return ScriptedReply::text("SUMMARY: chunk 1 read");
                }
                if mentions(req, "SUMMARY: chunk 1 read") {
                    return ScriptedReply::text("done from the summary");
                }
                if req.assistant_turns() == 0 {
                    return ScriptedReply::tool_calls([(
                        "read-1",
                        "read",
                        json!({"filePath": "chunk1.txt"}),
                    )]);
                }
                let mut refused = refused.lock().expect("not poisoned");
                *refused = true;
                ScriptedReply::status(400, overflow)
            }
        })
        .await;
        let mut cluster = start(model, 0, 1).await.expect("cluster");
        std::fs::write(cluster.workspace.path().join("chunk1.txt"), chunk_text(1))
            .expect("write chunk");
        let anthropic = cluster.model.anthropic_base_url();
        cluster.add_worker_with("w", 1, move |c| {
            c.model.anthropic_base_url = Some(anthropic);
            c.compaction_threshold = Some(THRESHOLD);
        });
        let mut client = cluster.client().await.expect("client");
        let id = client
            .submit(pb::SubmitRequest {
                agent: "general".into(),
                prompt: "read chunk1.txt".into(),
                model: Some(model_name.into()),
                ..Default::default()
            })
            .await
            .expect("submit")
            .into_inner()
            .task_id;
        let task = cluster.wait_finished(&id).await.expect("finished");
        assert_eq!(
            task.status(),
            pb::TaskStatus::Completed,
            "{model_name}: {task:?}"
        );
        assert!(
            *refused.lock().expect("not poisoned"),
            "{model_name}: it overflowed"
        );
        assert_eq!(task.attempts.len(), 1, "{model_name}: in its first attempt");
        let result = task.result.expect("result");
        assert_eq!(
            result.output.expect("output").text,
            "done from the summary",
            "{model_name}"
        );
        let requests = cluster.model.requests();
        assert_eq!(
            requests.iter().filter(|r| is_compaction(r)).count(),
            1,
            "{model_name}"
        );
        let last = requests.last().expect("requests");
        assert!(
            !mentions(last, "chunk-1-line-000"),
            "{model_name}: the retried call carries the summary, not the old turns"
        );
        cluster.shutdown().await;
    }
}
