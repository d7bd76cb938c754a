//! Structured answers at run time: the session told the schema, its answer checked,
//! and an answer that does not satisfy it sent back to the model once, with the
//! validation errors. The schema itself is `taskwire_definitions::output_schema`'s,
//! re-exported.

pub use taskwire_definitions::output_schema::*;
use tokio_util::sync::CancellationToken;

use crate::host::SessionHost;
use crate::session::{SessionObserver, SessionOutcome, SessionParams, SessionStatus, run_session};
use crate::tools::ToolRegistry;

/// Runs the session, then checks a completed session's answer against `schema`: an
/// answer that does not satisfy it is sent back once (a second run of the same
/// session, with the errors as its prompt and the steps that are left), and the
/// outcome is that of both runs together. Without a schema this is [`run_session`].
pub async fn run_session_with_schema(
    mut params: SessionParams,
    schema: Option<&OutputSchema>,
    provider: &dyn taskwire_llm::Provider,
    tools: &ToolRegistry,
    host: &dyn SessionHost,
    observer: &dyn SessionObserver,
    cancel: CancellationToken,
) -> (SessionOutcome, Structured) {
    let Some(schema) = schema else {
        let outcome = run_session(params, provider, tools, host, observer, cancel).await;
        return (outcome, Structured::NotChecked);
    };
    params.agent.prompt = format!(
        "{}\n\n{}",
        params.agent.prompt.trim_end(),
        schema.instructions()
    );
    let retry = params.clone();
    let first = run_session(params, provider, tools, host, observer, cancel.clone()).await;
    if first.status != SessionStatus::Completed {
        return (first, Structured::NotChecked);
    }
    let errors = match schema.check(&first.text) {
        Ok(value) => return (first, Structured::Valid(value)),
        Err(errors) => errors,
    };
    tracing::info!(errors = %errors.lines().next().unwrap_or_default(), "answer does not satisfy the output schema, asking again");
    // The first run's spend counts against the tree's budget in the second.
    let mut budget = retry.budget;
    budget.spent_elsewhere += first.usage;
    let retry = SessionParams {
        prompt: correction_prompt(&errors),
        budget,
        max_steps: retry.max_steps.max(1).saturating_sub(first.steps).max(1),
        history: first.transcript.clone(),
        from_checkpoint: false,
        ..retry
    };
    let mut second = run_session(retry, provider, tools, host, observer, cancel).await;
    second.usage += first.usage;
    second.own_usage += first.own_usage;
    second.steps += first.steps;
    let mut calls = first.tool_calls;
    calls.append(&mut second.tool_calls);
    second.tool_calls = calls;
    if second.status != SessionStatus::Completed {
        return (second, Structured::NotChecked);
    }
    match schema.check(&second.text) {
        Ok(value) => (second, Structured::Valid(value)),
        Err(errors) => (second, Structured::Mismatch(errors)),
    }
}
