//! Compaction: a session whose next request would pass its share of the context
//! window is summarised by the `compaction` agent and goes on from the summary; the
//! old turns are never sent again, also not by a later run or a resumed checkpoint.

use serde_json::json;
use taskwire_agent::{CompactionPolicy, Part, SessionEvent, SessionStatus};
use taskwire_definitions::builtin;
use taskwire_llm::{ChatResponse, LlmError, Role};

use crate::support::*;

/// What the big file says on every line: found in a request, it means the old turns
/// were sent.
const OLD_TURN: &str = "old finding";
const SUMMARY: &str = "SUMMARY: the TODO is in src/lib.rs line 2; next: fix it";

/// Window 8,000 tokens, compacted above half of it. The `build` agent's system prompt
/// and tools alone are about 2,100 tokens.
fn policy() -> Option<CompactionPolicy> {
    Some(CompactionPolicy {
        context_window: 8_000,
        max_output_tokens: None,
        threshold: 0.5,
        model: None,
        agent: builtin::compaction(),
    })
}

/// About 1,000 tokens (4 bytes each) of file the first step reads.
fn write_big_file(fx: &Fixture) {
    let text: String = (0..150)
        .map(|n| format!("{OLD_TURN} number {n:03}\n"))
        .collect();
    std::fs::write(fx.workspace.root().join("big.txt"), text).expect("write big.txt");
}

fn with_usage(answer: Answer, input: u64, output: u64) -> Answer {
    match answer {
        Answer::Reply(response) => Answer::Reply(ChatResponse {
            usage: usage(input, output),
            ..response
        }),
        other => other,
    }
}

fn mentions(request: &taskwire_llm::ChatRequest, needle: &str) -> bool {
    request.messages.iter().any(|m| m.content.contains(needle))
}

/// A completed session that read the big file, was compacted, and answered.
async fn compacted_session(fx: &Fixture) -> (taskwire_agent::SessionOutcome, ScriptedModel) {
    compacted_session_of(fx, builtin::build()).await
}

/// [`compacted_session`] of `agent`.
async fn compacted_session_of(
    fx: &Fixture,
    agent: taskwire_definitions::AgentSpec,
) -> (taskwire_agent::SessionOutcome, ScriptedModel) {
    write_big_file(fx);
    let model = ScriptedModel::new([
        // 3,500 tokens in, then ~900 of file: past the 4,000 limit.
        with_usage(
            call("r1", "read", json!({"filePath": "big.txt"})),
            3_500,
            20,
        ),
        with_usage(text(SUMMARY), 1_200, 40),
        with_usage(text("done"), 700, 5),
    ]);
    let mut params = fx.params(agent, 10);
    params.compaction = policy();
    let outcome = fx.run(params, &model).await;
    (outcome, model)
}

#[tokio::test]
async fn a_session_longer_than_the_window_is_compacted_and_completes() {
    let fx = Fixture::new();
    let (outcome, model) = compacted_session(&fx).await;

    assert_eq!(outcome.status, SessionStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.text, "done");
    let requests = model.requests();
    assert_eq!(requests.len(), 3, "step, summary, step");

    let summary_call = &requests[1];
    assert!(
        summary_call.tools.is_empty(),
        "the summary call offers no tools"
    );
    assert_eq!(summary_call.messages[0].role, Role::System);
    assert_eq!(
        summary_call.messages[0].content,
        builtin::compaction().prompt
    );
    assert!(
        mentions(summary_call, "find the TODO") && mentions(summary_call, OLD_TURN),
        "the summary is written from the whole conversation"
    );

    let after = &requests[2];
    assert!(
        mentions(after, SUMMARY),
        "the request after compaction carries the summary"
    );
    assert!(
        !mentions(after, OLD_TURN),
        "and not the old turns: {:?}",
        after.messages
    );
    assert!(
        !after.messages.iter().any(|m| m.role == Role::Tool),
        "no old tool result is sent"
    );
    assert!(
        !after.tools.is_empty(),
        "the session's tools are offered again"
    );

    assert_eq!(
        outcome.usage,
        usage(3_500 + 1_200 + 700, 20 + 40 + 5),
        "the summary call counts in the usage"
    );
    assert_eq!(outcome.transcript.usage(), outcome.usage);
    let record = &outcome.transcript.messages;
    assert_eq!(
        record.len(),
        4,
        "prompt, read step, compaction, answer: {record:?}"
    );
    assert!(
        matches!(&record[2].parts[..], [Part::Compaction { summary, tokens_before, .. }]
            if summary == SUMMARY && *tokens_before > 4_000),
        "{:?}",
        record[2]
    );
    assert_eq!(outcome.messages, outcome.transcript.to_messages());

    let compacted: Vec<_> = fx
        .events()
        .into_iter()
        .filter_map(|event| match event {
            SessionEvent::Compacted {
                tokens_before,
                tokens_after,
                usage,
            } => Some((tokens_before, tokens_after, usage)),
            _ => None,
        })
        .collect();
    assert_eq!(compacted.len(), 1, "one compaction event");
    let (before, after_tokens, summary_usage) = compacted[0];
    assert!(
        before > 4_000 && after_tokens < 200,
        "{before} -> {after_tokens}"
    );
    assert_eq!(summary_usage, usage(1_200, 40));
}

#[tokio::test]
async fn a_later_run_of_a_compacted_session_starts_from_the_summary() {
    let fx = Fixture::new();
    let (first, _) = compacted_session(&fx).await;

    let model = ScriptedModel::new([text("fixed")]);
    let mut params = fx.params(builtin::build(), 10);
    params.history = first.transcript;
    params.prompt = "now fix it".into();
    params.compaction = policy();
    let outcome = fx.run(params, &model).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let sent = &model.requests()[0];
    assert!(mentions(sent, SUMMARY) && mentions(sent, "done") && mentions(sent, "now fix it"));
    assert!(!mentions(sent, OLD_TURN), "{:?}", sent.messages);
}

#[tokio::test]
async fn a_checkpoint_saved_after_compaction_resumes_from_the_summary() {
    let fx = Fixture::new();
    write_big_file(&fx);
    let host = TestHost::new([]);
    let model = ScriptedModel::new([
        with_usage(
            call("r1", "read", json!({"filePath": "big.txt"})),
            3_500,
            20,
        ),
        with_usage(text(SUMMARY), 1_200, 40),
        call(
            "t1",
            "task",
            json!({"description": "A", "prompt": "fix the TODO", "subagent_type": "general"}),
        ),
        text("finished"),
    ]);
    let mut params = fx.params(builtin::build(), 10);
    params.compaction = policy();
    fx.run_hosted(params, &model, &host).await;
    let (checkpoint, _) = host.checkpoints().remove(0);
    assert!(
        checkpoint.messages.iter().any(|m| m.is_compaction()),
        "the checkpoint holds the compaction"
    );
    assert_eq!(
        checkpoint.steps_since_last_user_message(),
        2,
        "the steps before the compaction still count"
    );

    let host = TestHost::new([]);
    let model = ScriptedModel::new([text("finished after resume")]);
    let mut params = fx.params(builtin::build(), 10);
    params.history = checkpoint;
    params.from_checkpoint = true;
    params.compaction = policy();
    let outcome = fx.run_hosted(params, &model, &host).await;

    assert_eq!(outcome.status, SessionStatus::Completed, "{outcome:?}");
    let sent = &model.requests()[0];
    assert!(mentions(sent, SUMMARY), "{:?}", sent.messages);
    assert!(!mentions(sent, OLD_TURN), "{:?}", sent.messages);
    assert_eq!(
        tool_result(&sent.messages, "t1"),
        "report on fix the TODO\n\n<task_metadata>\nsession_id: ses-A\n</task_metadata>"
    );
}

#[tokio::test]
async fn without_a_policy_a_long_session_is_never_compacted() {
    let fx = Fixture::new();
    write_big_file(&fx);
    let model = ScriptedModel::new([
        with_usage(
            call("r1", "read", json!({"filePath": "big.txt"})),
            3_500,
            20,
        ),
        text("done"),
    ]);
    let outcome = fx.run(fx.params(builtin::build(), 10), &model).await;
    assert_eq!(outcome.status, SessionStatus::Completed);
    assert!(mentions(&model.requests()[1], OLD_TURN));
    assert!(
        !outcome
            .transcript
            .messages
            .iter()
            .any(|m| m.is_compaction())
    );
}

#[tokio::test]
async fn a_failed_summary_call_ends_the_session_with_a_retryable_error() {
    let fx = Fixture::new();
    write_big_file(&fx);
    let model = ScriptedModel::new([
        with_usage(
            call("r1", "read", json!({"filePath": "big.txt"})),
            3_500,
            20,
        ),
        Answer::Fail(LlmError::Http {
            url: "http://model".into(),
            status: 503,
            body: "overloaded".into(),
            retry_after: None,
        }),
    ]);
    let mut params = fx.params(builtin::build(), 10);
    params.compaction = policy();
    let outcome = fx.run(params, &model).await;
    assert_eq!(outcome.status, SessionStatus::Error);
    let error = outcome.error.expect("an error");
    assert!(error.retryable);
    assert!(
        error.message.contains("failed to compact"),
        "{}",
        error.message
    );
    // The finished step is kept, so a retry goes on from it.
    assert_eq!(outcome.transcript.messages.len(), 2);
}

fn overflow() -> Answer {
    Answer::Fail(LlmError::Http {
        url: "http://model".into(),
        status: 400,
        body: r#"{"error": {"message": "This model's maximum context length is 8000 tokens.", "code": "context_length_exceeded"}}"#.into(),
        retry_after: None,
    })
}

/// A provider's context-overflow error, where the estimate saw no need to compact (a
/// small step, the file read well under the limit): the session compacts anyway and
/// sends the step once more, from the summary, instead of failing the attempt.
#[tokio::test]
async fn a_context_overflow_compacts_and_retries_the_call_once() {
    let fx = Fixture::new();
    write_big_file(&fx);
    let model = ScriptedModel::new([
        with_usage(call("r1", "read", json!({"filePath": "big.txt"})), 600, 20),
        overflow(),
        with_usage(text(SUMMARY), 1_200, 40),
        with_usage(text("done"), 700, 5),
    ]);
    let mut params = fx.params(builtin::build(), 10);
    params.compaction = policy();
    let outcome = fx.run(params, &model).await;

    assert_eq!(outcome.status, SessionStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.text, "done");
    let requests = model.requests();
    assert_eq!(
        requests.len(),
        4,
        "step, overflowed step, summary, retried step"
    );
    assert!(mentions(&requests[1], OLD_TURN), "the overflowed request");
    assert_eq!(
        requests[2].messages[0].content,
        builtin::compaction().prompt
    );
    let retried = &requests[3];
    assert!(mentions(retried, SUMMARY) && !mentions(retried, OLD_TURN));
    assert!(
        !retried.tools.is_empty(),
        "the step's tools are offered again"
    );
    assert_eq!(
        fx.events()
            .iter()
            .filter(|e| matches!(e, SessionEvent::Compacted { .. }))
            .count(),
        1
    );
    assert!(
        outcome
            .transcript
            .messages
            .iter()
            .any(|m| m.is_compaction())
    );
}

/// Once: a request that overflows again after its compaction fails the attempt with
/// the provider's error, as does an overflow with nothing older to summarise.
#[tokio::test]
async fn a_second_overflow_or_one_with_nothing_to_compact_fails_the_attempt() {
    let fx = Fixture::new();
    write_big_file(&fx);
    let model = ScriptedModel::new([
        with_usage(call("r1", "read", json!({"filePath": "big.txt"})), 600, 20),
        overflow(),
        with_usage(text(SUMMARY), 1_200, 40),
        overflow(),
    ]);
    let mut params = fx.params(builtin::build(), 10);
    params.compaction = policy();
    let outcome = fx.run(params, &model).await;
    assert_eq!(outcome.status, SessionStatus::Error);
    let error = outcome.error.expect("an error");
    assert!(!error.retryable);
    assert!(
        error.message.contains("maximum context length"),
        "{}",
        error.message
    );
    assert_eq!(model.requests().len(), 4, "one retry, no more");

    let fx = Fixture::new();
    let model = ScriptedModel::new([overflow()]);
    let mut params = fx.params(builtin::build(), 10);
    params.compaction = policy();
    let outcome = fx.run(params, &model).await;
    assert_eq!(outcome.status, SessionStatus::Error);
    assert_eq!(
        model.requests().len(),
        1,
        "the first step has nothing older to summarise"
    );
}

#[tokio::test]
async fn pre_compact_hooks_run_before_the_summary_and_cannot_stop_it() {
    use taskwire_definitions::hooks::{Hook, HookAction, HookEvent};
    let fx = Fixture::new();
    let mut agent = builtin::build();
    agent.hooks = vec![Hook {
        event: HookEvent::PreCompact,
        matcher: "auto".into(),
        action: HookAction::Command {
            command: "cat > pre-compact.json; echo 'keep the plan' >&2; exit 2".into(),
        },
        timeout_secs: None,
        source: "hooks.json".into(),
    }];
    let (outcome, model) = compacted_session_of(&fx, agent).await;

    assert_eq!(outcome.status, SessionStatus::Completed, "{outcome:?}");
    assert_eq!(model.requests().len(), 3, "step, summary, step");
    let input: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fx.workspace.root().join("pre-compact.json")).expect("ran"),
    )
    .expect("json");
    assert_eq!(input["hook_event_name"], "PreCompact");
    assert_eq!(input["trigger"], "auto");
    let hooks: Vec<_> = fx
        .events()
        .into_iter()
        .filter(|e| matches!(e, SessionEvent::Hook { .. }))
        .collect();
    assert_eq!(hooks.len(), 1);
    assert!(
        fx.events()
            .iter()
            .any(|e| matches!(e, SessionEvent::Compacted { .. })),
        "the compaction went ahead"
    );
}
