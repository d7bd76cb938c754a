//! The other ways a session ends: step limit, cancellation, a failed model call.

use serde_json::json;
use taskwire_agent::{NoopHost, SessionEvent, SessionStatus};
use taskwire_definitions::builtin;
use taskwire_llm::{ChatResponse, FinishReason, LlmError, Role, ToolCall};
use tokio_util::sync::CancellationToken;

use crate::support::*;

#[tokio::test]
async fn last_step_offers_no_tools_and_ends_max_steps() {
    let fx = Fixture::new();
    let model = ScriptedModel::new([
        call("c1", "list", json!({})),
        // Ignores the instruction and calls a tool anyway: it must not run.
        Answer::Reply(ChatResponse {
            text: "listed the root; still to do: read src".into(),
            tool_calls: vec![ToolCall {
                id: "c2".into(),
                name: "read".into(),
                arguments: "{}".into(),
            }],
            usage: usage(10, 5),
            finish_reason: FinishReason::ToolCalls,
            reasoning: Vec::new(),
        }),
    ]);
    let outcome = fx.run(fx.params(builtin::explore(), 2), &model).await;

    assert_eq!(outcome.status, SessionStatus::MaxSteps);
    assert_eq!(outcome.text, "listed the root; still to do: read src");
    assert_eq!(outcome.steps, 2);
    let requests = model.requests();
    assert_eq!(
        tool_names(&requests[0]),
        ["read", "list", "glob", "grep", "webfetch"]
    );
    assert!(
        requests[1].tools.is_empty(),
        "the last step offers no tools"
    );
    let instruction = requests[1].messages.last().expect("has messages");
    assert_eq!(instruction.role, Role::User);
    assert!(instruction.content.contains("MAXIMUM STEPS REACHED"));

    let ids: Vec<_> = fx.tool_events().into_iter().map(|(id, ..)| id).collect();
    assert!(
        !ids.contains(&"c2".to_owned()),
        "the last step's call never runs: {ids:?}"
    );
    // The transcript keeps neither the instruction nor the unanswered call.
    let last = outcome.messages.last().expect("has messages");
    assert_eq!((last.role, last.tool_calls.len()), (Role::Assistant, 0));
    assert!(
        !outcome
            .messages
            .iter()
            .any(|m| m.content.contains("MAXIMUM STEPS REACHED"))
    );
}

#[tokio::test]
async fn cancellation_stops_the_loop_while_the_model_is_thinking() {
    let fx = Fixture::new();
    let model = ScriptedModel::new([call("c1", "list", json!({})), Answer::Hang]);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let outcome = fx
        .run_with(
            fx.params(builtin::general(), 10),
            &model,
            &NoopHost,
            cancel,
            move |event| {
                if *event == (SessionEvent::StepStarted { step: 2 }) {
                    trigger.cancel();
                }
            },
        )
        .await;

    assert_eq!(outcome.status, SessionStatus::Cancelled);
    assert_eq!(outcome.steps, 2);
    assert_eq!(outcome.tool_calls.len(), 1);
    // Still resumable: the finished call has its result.
    let roles: Vec<_> = outcome.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool]);
}

#[tokio::test]
async fn cancelled_before_start_makes_no_model_call() {
    let fx = Fixture::new();
    let model = ScriptedModel::new([]);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let outcome = fx
        .run_with(
            fx.params(builtin::general(), 10),
            &model,
            &NoopHost,
            cancel,
            |_| {},
        )
        .await;
    assert_eq!(outcome.status, SessionStatus::Cancelled);
    assert!(model.requests().is_empty());
}

#[tokio::test]
async fn provider_error_ends_the_session_with_the_retry_verdict() {
    for (status, retryable) in [(429, true), (503, true), (400, false)] {
        let fx = Fixture::new();
        let model = ScriptedModel::new([
            call("c1", "list", json!({})),
            Answer::Fail(LlmError::Http {
                url: "http://model/v1/chat/completions".into(),
                status,
                body: "nope".into(),
                retry_after: None,
            }),
        ]);
        let outcome = fx.run(fx.params(builtin::general(), 10), &model).await;

        assert_eq!(outcome.status, SessionStatus::Error);
        let error = outcome.error.expect("error outcomes carry the error");
        assert_eq!(error.retryable, retryable, "status {status}");
        assert_eq!(
            error.message,
            format!(
                "model request to http://model/v1/chat/completions failed with status {status}: nope"
            )
        );
        assert_eq!(outcome.steps, 2);
        assert_eq!(
            outcome.usage,
            usage(10, 5),
            "usage of the calls that succeeded is kept"
        );
    }
}

#[tokio::test]
async fn a_session_that_calls_no_tool_never_asks_for_its_workspace() {
    let fx = Fixture::new();
    let host = TestHost::new([]);
    let model = ScriptedModel::new([text("nothing to look at")]);
    let outcome = fx
        .run_hosted(fx.params(builtin::general(), 5), &model, &host)
        .await;
    assert_eq!(outcome.status, SessionStatus::Completed);
    assert_eq!(host.workspace_asks(), 0, "no tool, no workspace");
}

#[tokio::test]
async fn the_workspace_is_made_ready_before_tools_run_and_a_failure_ends_the_session() {
    let fx = Fixture::new();
    let model = ScriptedModel::new([
        call("c1", "list", json!({})),
        call("c2", "list", json!({})),
        text("done"),
    ]);
    let host = TestHost::new([]);
    let outcome = fx
        .run_hosted(fx.params(builtin::general(), 5), &model, &host)
        .await;
    assert_eq!(outcome.status, SessionStatus::Completed);
    assert_eq!(host.workspace_asks(), 2, "asked before each turn's tools");

    let fx = Fixture::new();
    let model = ScriptedModel::new([call("c1", "list", json!({})), text("never")]);
    let host = TestHost::new([]).refusing_workspace(taskwire_agent::SessionError {
        message: "failed to prepare the task's workspace: fetch failed".into(),
        retryable: true,
    });
    let outcome = fx
        .run_hosted(fx.params(builtin::general(), 5), &model, &host)
        .await;
    assert_eq!(outcome.status, SessionStatus::Error);
    let error = outcome.error.expect("the reason");
    assert!(
        error.retryable && error.message.contains("fetch failed"),
        "{error:?}"
    );
    assert!(
        !fx.tool_events().iter().any(|(id, ..)| id == "c1"),
        "the tool never ran"
    );
    assert_eq!(model.requests().len(), 1, "the session ended there");
}

#[tokio::test]
async fn a_spent_budget_ends_the_session_before_its_next_model_call_with_a_resumable_record() {
    let fx = Fixture::new();
    let model = ScriptedModel::new([
        Answer::Reply(ChatResponse {
            usage: usage(60, 10),
            ..match call("c1", "list", json!({})) {
                Answer::Reply(r) => r,
                _ => unreachable!("call() builds a reply"),
            }
        }),
        text("never asked"),
    ]);
    let mut params = fx.params(builtin::explore(), 10);
    params.budget = taskwire_agent::session::SessionBudget {
        max_tokens: Some(100),
        max_cost_picousd: None,
        // The rest of the tree had spent 30 tokens when the task was submitted.
        spent_elsewhere: usage(20, 10),
    };
    let outcome = fx.run(params, &model).await;

    assert_eq!(outcome.status, SessionStatus::BudgetExceeded);
    assert_eq!(
        model.requests().len(),
        1,
        "no call once the budget is spent"
    );
    assert_eq!(outcome.steps, 1);
    let error = outcome.error.expect("the limit is named");
    assert!(error.message.contains("max_tokens"), "{}", error.message);
    assert!(!error.retryable);
    assert_eq!(outcome.own_usage, usage(60, 10));
    // Every call has its result: a later run can continue from the transcript.
    let last = outcome.messages.last().expect("has messages");
    assert_eq!(last.role, Role::Tool);
}
