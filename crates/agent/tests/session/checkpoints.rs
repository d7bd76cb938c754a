//! Checkpoints: a step that calls `task` is saved through the host before its children
//! start, and a run resumed from that checkpoint asks for the same children again
//! (same call ids) instead of asking the model anew.

use serde_json::json;
use taskwire_agent::{Part, SessionStatus, Transcript, TranscriptMessage};
use taskwire_definitions::builtin;
use taskwire_llm::Role;

use crate::support::*;

fn task(description: &str, agent: &str, prompt: &str) -> serde_json::Value {
    json!({"description": description, "prompt": prompt, "subagent_type": agent})
}

/// The ids of a message's calls that have no result.
fn unfinished(message: &TranscriptMessage) -> Vec<String> {
    message
        .parts
        .iter()
        .filter(|part| part.is_unfinished_call())
        .filter_map(Part::as_call)
        .map(|call| call.id)
        .collect()
}

fn child_call_ids(host: &TestHost) -> Vec<String> {
    let mut ids: Vec<String> = host.children().into_iter().map(|c| c.call_id).collect();
    ids.sort();
    ids
}

/// A checkpoint as a first attempt leaves it: the prompt, then a step calling `task`
/// twice whose calls never finished.
async fn checkpoint_of_two_children(fx: &Fixture) -> Transcript {
    let host = TestHost::new([]);
    let model = ScriptedModel::new([
        calls(&[
            ("t1", "task", task("A", "explore", "find the parser")),
            ("t2", "task", task("B", "general", "find the printer")),
        ]),
        text("both found"),
    ]);
    fx.run_hosted(fx.params(builtin::build(), 5), &model, &host)
        .await;
    let (checkpoint, _) = host.checkpoints().remove(0);
    checkpoint
}

#[tokio::test]
async fn a_step_that_calls_task_is_saved_before_its_children_start() {
    let fx = Fixture::new();
    let host = TestHost::new([]);
    let model = ScriptedModel::new([
        call("g1", "grep", json!({"pattern": "TODO"})),
        calls(&[
            ("t1", "task", task("A", "explore", "find the parser")),
            ("g2", "grep", json!({"pattern": "run"})),
        ]),
        text("found"),
    ]);
    let outcome = fx
        .run_hosted(fx.params(builtin::build(), 5), &model, &host)
        .await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let checkpoints = host.checkpoints();
    assert_eq!(
        checkpoints.len(),
        1,
        "only the step that calls task is saved"
    );
    let (saved, children_by_then) = &checkpoints[0];
    assert_eq!(*children_by_then, 0, "saved before any child was asked for");
    assert_eq!(saved.messages.len(), 3, "{saved:?}");
    assert_eq!(saved.messages[0], TranscriptMessage::user("find the TODO"));
    assert!(unfinished(&saved.messages[1]).is_empty(), "step 1 finished");
    assert_eq!(unfinished(&saved.messages[2]), ["t1", "g2"]);
    assert_eq!(saved.steps_since_last_user_message(), 2);
    assert_eq!(
        child_call_ids(&host),
        ["t1"],
        "the child carries the call id"
    );
}

#[tokio::test]
async fn a_run_resumed_from_a_checkpoint_asks_for_the_same_children_and_not_the_model() {
    let fx = Fixture::new();
    let checkpoint = checkpoint_of_two_children(&fx).await;

    let host = TestHost::new([]);
    let model = ScriptedModel::new([text("both found, resumed")]);
    let mut params = fx.params(builtin::build(), 5);
    params.history = checkpoint;
    params.from_checkpoint = true;
    let outcome = fx.run_hosted(params, &model, &host).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    assert_eq!(outcome.text, "both found, resumed");
    assert_eq!(child_call_ids(&host), ["t1", "t2"]);
    let requests = model.requests();
    assert_eq!(requests.len(), 1, "the interrupted step is not asked again");
    assert_eq!(outcome.steps, 1);
    let sent = &requests[0].messages;
    let prompts = sent
        .iter()
        .filter(|m| m.role == Role::User && m.content == "find the TODO")
        .count();
    assert_eq!(
        prompts, 1,
        "the checkpoint holds the prompt; it is not added again"
    );
    assert_eq!(
        tool_result(sent, "t2"),
        "report on find the printer\n\n<task_metadata>\nsession_id: ses-B\n</task_metadata>"
    );
    let record = &outcome.transcript.messages;
    assert_eq!(record.len(), 3, "{record:?}");
    assert!(record.iter().all(|m| unfinished(m).is_empty()));
    assert_eq!(record[2].text(), "both found, resumed");
}

#[tokio::test]
async fn steps_taken_before_the_checkpoint_count_against_the_step_limit() {
    let fx = Fixture::new();
    let checkpoint = checkpoint_of_two_children(&fx).await;

    let host = TestHost::new([]);
    let model = ScriptedModel::new([text("summary at the limit")]);
    let mut params = fx.params(builtin::build(), 2);
    params.history = checkpoint;
    params.from_checkpoint = true;
    let outcome = fx.run_hosted(params, &model, &host).await;

    assert_eq!(outcome.status, SessionStatus::MaxSteps);
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0].tools.is_empty(),
        "step 2 of 2 is the last: no tools"
    );
}

#[tokio::test]
async fn a_finished_session_continued_by_another_task_is_not_taken_for_a_checkpoint() {
    let fx = Fixture::new();
    let checkpoint = checkpoint_of_two_children(&fx).await;

    let host = TestHost::new([]);
    let model = ScriptedModel::new([text("continued")]);
    let mut params = fx.params(builtin::build(), 5);
    params.history = checkpoint;
    params.prompt = "and now the tests".into();
    let outcome = fx.run_hosted(params, &model, &host).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    assert!(host.children().is_empty(), "nothing runs again");
    let sent = &model.requests()[0].messages;
    assert_eq!(tool_result(sent, "t1"), "error: tool call did not finish");
    assert_eq!(
        sent.last().map(|m| m.content.as_str()),
        Some("and now the tests")
    );
}

#[tokio::test]
async fn a_checkpoint_that_cannot_be_saved_stops_the_session_before_any_child_starts() {
    let fx = Fixture::new();
    let host = TestHost::new([]).refusing_checkpoints("coordinator unreachable");
    let model = ScriptedModel::new([call("t1", "task", task("A", "explore", "find it"))]);
    let outcome = fx
        .run_hosted(fx.params(builtin::build(), 5), &model, &host)
        .await;

    assert_eq!(outcome.status, SessionStatus::Error);
    let error = outcome.error.expect("an error");
    assert!(error.retryable, "a later attempt may save it");
    assert!(error.message.contains("coordinator unreachable"), "{error}");
    assert!(host.children().is_empty());
    assert!(
        outcome
            .transcript
            .messages
            .iter()
            .all(|m| unfinished(m).is_empty())
    );
}
