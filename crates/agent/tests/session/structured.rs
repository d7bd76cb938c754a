//! Structured answers: the schema is in the system prompt, an invalid answer is sent
//! back once with the errors, a second one is a mismatch.

use taskwire_agent::output_schema::{OutputSchema, Structured, run_session_with_schema};
use taskwire_agent::{NoopHost, NoopObserver, SessionStatus, ToolRegistry};
use taskwire_definitions::builtin;
use taskwire_llm::Role;
use tokio_util::sync::CancellationToken;

use crate::support::*;

fn schema() -> OutputSchema {
    OutputSchema::parse(
        r#"{"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}"#,
    )
    .expect("valid schema")
}

async fn run(
    fx: &Fixture,
    model: &ScriptedModel,
    max_steps: u32,
) -> (taskwire_agent::SessionOutcome, Structured) {
    let tools = ToolRegistry::builtin();
    let schema = schema();
    run_session_with_schema(
        fx.params(builtin::general(), max_steps),
        Some(&schema),
        model,
        &tools,
        &NoopHost,
        &NoopObserver,
        CancellationToken::new(),
    )
    .await
}

#[tokio::test]
async fn a_valid_answer_is_structured_and_the_schema_is_in_the_system_prompt() {
    let fx = Fixture::new();
    let model = ScriptedModel::new([text("```json\n{\"count\": 2}\n```")]);
    let (outcome, structured) = run(&fx, &model, 5).await;
    assert_eq!(outcome.status, SessionStatus::Completed);
    assert_eq!(
        structured,
        Structured::Valid(serde_json::json!({"count": 2}))
    );
    let system = &model.requests()[0].messages[0];
    assert_eq!(system.role, Role::System);
    assert!(
        system.content.contains("\"required\""),
        "{}",
        system.content
    );
}

#[tokio::test]
async fn an_invalid_answer_is_sent_back_once_with_the_errors() {
    let fx = Fixture::new();
    let model = ScriptedModel::new([
        text("there are two"),
        call("c1", "read", serde_json::json!({"filePath": "notes.txt"})),
        text("{\"count\": 2}"),
    ]);
    let (outcome, structured) = run(&fx, &model, 5).await;
    assert_eq!(
        structured,
        Structured::Valid(serde_json::json!({"count": 2}))
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let correction = requests[1].messages.last().expect("a message");
    assert_eq!(correction.role, Role::User);
    assert!(
        correction
            .content
            .contains("does not satisfy the required JSON Schema")
            && correction.content.contains("not valid json"),
        "{}",
        correction.content
    );
    // Both runs count: three model calls, one tool call, the whole conversation.
    assert_eq!(outcome.steps, 3);
    assert_eq!(outcome.usage, usage(30, 15));
    assert_eq!(outcome.tool_calls.len(), 1);
    assert_eq!(outcome.transcript.messages.len(), 5);
}

#[tokio::test]
async fn a_second_invalid_answer_is_a_mismatch_naming_the_errors() {
    let fx = Fixture::new();
    let model = ScriptedModel::new([text("{\"count\": \"two\"}"), text("{\"total\": 2}")]);
    let (outcome, structured) = run(&fx, &model, 5).await;
    assert_eq!(model.requests().len(), 2, "sent back once, not twice");
    assert_eq!(outcome.status, SessionStatus::Completed);
    let Structured::Mismatch(errors) = structured else {
        panic!("expected a mismatch, got {structured:?}");
    };
    assert!(errors.contains("count"), "{errors}");
}

#[tokio::test]
async fn a_retry_with_only_the_last_step_left_ends_at_the_step_limit_unchecked() {
    let fx = Fixture::new();
    // One step left after the first answer: the retry is its last, tool-less step.
    let model = ScriptedModel::new([
        call("c1", "read", serde_json::json!({"filePath": "notes.txt"})),
        text("two"),
        text("{\"count\": 2}"),
    ]);
    let (outcome, structured) = run(&fx, &model, 3).await;
    assert_eq!(outcome.steps, 3);
    assert!(
        model.requests()[2].tools.is_empty(),
        "the last step offers no tools"
    );
    // The last step asks to summarise: the session ends at its step limit, unchecked.
    assert_eq!(outcome.status, SessionStatus::MaxSteps);
    assert_eq!(structured, Structured::NotChecked);
}
