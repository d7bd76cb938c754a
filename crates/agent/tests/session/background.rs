//! Background children: `task` with `background: true` returns the child's id at once,
//! the child's result reaches the model at its next step (or through `task_status`),
//! a final answer given while children run waits for them, and children end with the
//! session. The test host holds each background child until the test releases it.

use serde_json::json;
use taskwire_agent::SessionStatus;
use taskwire_definitions::builtin;
use taskwire_definitions::permission::{PermissionAction, PermissionRule};
use taskwire_llm::{ChatRequest, ChatResponse, LlmError, Message, Provider, Role, StreamDelta};
use tokio_util::sync::CancellationToken;

use crate::support::*;

fn background(description: &str, agent: &str, prompt: &str) -> serde_json::Value {
    json!({"description": description, "prompt": prompt, "subagent_type": agent, "background": true})
}

/// The scripted model, which before answering call `n` (from 0) lets the listed
/// background children finish and waits until they have.
struct Stepped<'a> {
    model: &'a ScriptedModel,
    host: &'a TestHost,
    before: Vec<(usize, &'a str)>,
}

#[async_trait::async_trait]
impl Provider for Stepped<'_> {
    async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ChatResponse, LlmError> {
        let n = self.model.requests().len();
        for (_, description) in self.before.iter().filter(|(at, _)| *at == n) {
            self.host.release(description);
            self.host.finished(description).await;
        }
        self.model.chat(request, on_delta).await
    }
}

/// The user messages that deliver background results.
fn deliveries(messages: &[Message]) -> Vec<&str> {
    messages
        .iter()
        .filter(|m| m.role == Role::User && m.content.starts_with("Background tasks"))
        .map(|m| m.content.as_str())
        .collect()
}

#[tokio::test]
async fn a_background_task_returns_its_id_at_once_and_its_result_reaches_the_next_step() {
    let fx = Fixture::new();
    let host = TestHost::new([]);
    let model = ScriptedModel::new([
        call("t1", "task", background("A", "explore", "find the parser")),
        call("g1", "grep", json!({"pattern": "TODO"})),
        call("g2", "grep", json!({"pattern": "run"})),
        text("the parser is in src/lib.rs"),
    ]);
    // The child runs through both greps: it finishes while the model makes its 3rd
    // call, so its result comes with the 4th.
    let stepped = Stepped {
        model: &model,
        host: &host,
        before: vec![(2, "A")],
    };
    let outcome = fx
        .run_with(
            fx.params(builtin::build(), 10),
            &stepped,
            &host,
            CancellationToken::new(),
            |_| {},
        )
        .await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    assert_eq!(outcome.text, "the parser is in src/lib.rs");
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    let started = tool_result(&requests[1].messages, "t1");
    assert!(
        started.starts_with("started subagent explore in the background as task task-A."),
        "{started}"
    );
    assert!(deliveries(&requests[1].messages).is_empty());
    assert!(
        deliveries(&requests[2].messages).is_empty(),
        "still running"
    );
    let delivered = deliveries(&requests[3].messages);
    assert_eq!(
        delivered,
        [
            "Background tasks you started have finished. Their results:\n\n\
             background task task-A (explore: A) completed:\n\
             report on find the parser\n\n<task_metadata>\nsession_id: ses-A\n</task_metadata>"
        ]
    );
    // Four model steps of (10, 5) and the child's (3, 2).
    assert_eq!(outcome.usage, usage(43, 22));
    let child = &host.children()[0];
    assert!(child.background && child.call_id == "t1");
    // The delivery is in the transcript, so a later run sees it too.
    assert!(outcome.transcript.messages.iter().any(|m| {
        m.text()
            .contains("background task task-A (explore: A) completed")
    }));
}

#[tokio::test]
async fn task_status_with_wait_blocks_until_the_children_finish() {
    let fx = Fixture::new();
    let host = TestHost::new([]);
    let model = ScriptedModel::new([
        calls(&[
            ("t1", "task", background("A", "explore", "find the parser")),
            ("t2", "task", background("B", "general", "find the printer")),
        ]),
        call("s0", "task_status", json!({})),
        call("s1", "task_status", json!({"wait": true})),
        text("both found"),
    ]);
    // The children may finish only once the waiting call runs.
    let outcome = fx
        .run_with(
            fx.params(builtin::build(), 10),
            &model,
            &host,
            CancellationToken::new(),
            |event| {
                if let taskwire_agent::SessionEvent::ToolCall { call_id, .. } = event
                    && call_id == "s1"
                {
                    host.release("A");
                    host.release("B");
                }
            },
        )
        .await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let requests = model.requests();
    assert_eq!(
        tool_result(&requests[2].messages, "s0"),
        "background task task-A (explore: A) running\n\nbackground task task-B (general: B) running"
    );
    let waited = tool_result(&requests[3].messages, "s1");
    assert!(
        waited
            .contains("background task task-A (explore: A) completed:\nreport on find the parser")
            && waited.contains(
                "background task task-B (general: B) completed:\nreport on find the printer"
            ),
        "{waited}"
    );
    // Given through task_status, the results are not given again.
    assert!(deliveries(&requests[3].messages).is_empty());
}

#[tokio::test]
async fn a_final_answer_while_children_run_waits_for_them_and_continues() {
    let fx = Fixture::new();
    let host = TestHost::new([]);
    let model = ScriptedModel::new([
        call("t1", "task", background("A", "explore", "find the parser")),
        text("waiting for the explorer"),
        text("the explorer says: report on find the parser"),
    ]);
    let outcome = fx
        .run_with(
            fx.params(builtin::build(), 10),
            &model,
            &host,
            CancellationToken::new(),
            |event| {
                if *event
                    == (taskwire_agent::SessionEvent::StepFinished {
                        step: 2,
                        usage: usage(10, 5),
                    })
                {
                    host.release("A");
                }
            },
        )
        .await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    assert_eq!(outcome.text, "the explorer says: report on find the parser");
    let requests = model.requests();
    assert_eq!(requests.len(), 3, "the early answer was not the last word");
    let last = &requests[2].messages;
    let answered = last
        .iter()
        .position(|m| m.role == Role::Assistant && m.content == "waiting for the explorer")
        .expect("the early answer stays in the conversation");
    let delivered = last
        .iter()
        .position(|m| m.content.starts_with("Background tasks"))
        .expect("then the child's result");
    assert!(answered < delivered);
    assert_eq!(outcome.steps, 3);
}

#[tokio::test]
async fn background_children_are_cancelled_when_the_session_ends() {
    let fx = Fixture::new();
    let host = TestHost::new([]);
    // Two steps: the second is the last, answered without tools, while A still runs.
    let model = ScriptedModel::new([
        call("t1", "task", background("A", "explore", "find the parser")),
        text("out of steps"),
    ]);
    let outcome = fx
        .run_hosted(fx.params(builtin::build(), 2), &model, &host)
        .await;

    assert_eq!(outcome.status, SessionStatus::MaxSteps);
    let tokens = host.child_tokens.lock().expect("not poisoned").clone();
    assert_eq!(tokens.len(), 1);
    assert!(tokens[0].is_cancelled(), "the child was told to stop");
}

#[tokio::test]
async fn cancelling_the_session_cancels_its_background_children() {
    let fx = Fixture::new();
    let host = TestHost::new([]);
    let cancel = CancellationToken::new();
    let model = ScriptedModel::new([
        call("t1", "task", background("A", "explore", "find the parser")),
        Answer::Hang,
    ]);
    let stop = cancel.clone();
    let outcome = fx
        .run_with(
            fx.params(builtin::build(), 10),
            &model,
            &host,
            cancel,
            move |event| {
                if matches!(event, taskwire_agent::SessionEvent::StepStarted { step: 2 }) {
                    stop.cancel();
                }
            },
        )
        .await;

    assert_eq!(outcome.status, SessionStatus::Cancelled);
    let tokens = host.child_tokens.lock().expect("not poisoned").clone();
    assert!(tokens[0].is_cancelled());
}

#[tokio::test]
async fn a_background_childs_changes_are_applied_when_its_result_is_delivered() {
    let fx = Fixture::new();
    let host = TestHost::new([]);
    let model = ScriptedModel::new([
        calls(&[
            ("t1", "task", background("A", "general", "edit the parser")),
            (
                "t2",
                "task",
                background("conflict", "general", "edit the printer"),
            ),
        ]),
        call("g1", "grep", json!({"pattern": "TODO"})),
        text("done"),
    ]);
    let stepped = Stepped {
        model: &model,
        host: &host,
        before: vec![(1, "A"), (1, "conflict")],
    };
    let outcome = fx
        .run_with(
            fx.params(builtin::build(), 10),
            &stepped,
            &host,
            CancellationToken::new(),
            |_| {},
        )
        .await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    assert_eq!(host.applied(), ["patch of A", "patch of conflict"]);
    let requests = model.requests();
    let delivered = deliveries(&requests[2].messages);
    assert_eq!(delivered.len(), 1);
    assert!(
        delivered[0]
            .contains("background task task-A (general: A) completed:\nreport on edit the parser"),
        "{}",
        delivered[0]
    );
    assert!(
        delivered[0].contains(
            "error: subagent general finished, but its changes were not applied to your workspace: conflict in a.txt"
        ),
        "{}",
        delivered[0]
    );
}

#[tokio::test]
async fn a_background_child_that_cannot_start_is_an_error_naming_the_listed_agents() {
    let fx = Fixture::new();
    let host = TestHost::new([]);
    let model = ScriptedModel::new([
        call("t1", "task", background("A", "nope", "anything")),
        text("gave up"),
    ]);
    let outcome = fx
        .run_hosted(fx.params(builtin::build(), 5), &model, &host)
        .await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let result = tool_result(&model.requests()[1].messages, "t1").to_owned();
    assert!(
        result.starts_with("error: subagent nope failed:")
            && result.contains("the listed subagents are: explore, general"),
        "{result}"
    );
}

#[tokio::test]
async fn task_status_comes_with_task_and_obeys_its_own_rules() {
    let fx = Fixture::new();
    let host = TestHost::new([]);
    let model = ScriptedModel::new([text("hi")]);
    fx.run_hosted(fx.params(builtin::build(), 5), &model, &host)
        .await;
    let requests = model.requests();
    let offered = tool_names(&requests[0]);
    assert!(offered.contains(&"task") && offered.contains(&"task_status"));

    // An agent that does not list `task` gets neither.
    let mut agent = builtin::build();
    agent.tools = vec!["read".into(), "grep".into()];
    let model = ScriptedModel::new([text("hi")]);
    fx.run_hosted(fx.params(agent, 5), &model, &host).await;
    let requests = model.requests();
    let offered = tool_names(&requests[0]);
    assert!(!offered.contains(&"task_status"), "{offered:?}");

    // Denied outright, it is not offered; `task` still is.
    let mut agent = builtin::build();
    agent.permission.push(PermissionRule::new(
        "task_status",
        "*",
        PermissionAction::Deny,
    ));
    let model = ScriptedModel::new([text("hi")]);
    fx.run_hosted(fx.params(agent, 5), &model, &host).await;
    let requests = model.requests();
    let offered = tool_names(&requests[0]);
    assert!(offered.contains(&"task") && !offered.contains(&"task_status"));

    // Denied for some ids, a call naming them is refused before it runs.
    let mut agent = builtin::build();
    agent.permission.push(PermissionRule::new(
        "task_status",
        "secret*",
        PermissionAction::Deny,
    ));
    let model = ScriptedModel::new([
        call("s1", "task_status", json!({"task_ids": ["secret-1"]})),
        text("denied"),
    ]);
    fx.run_hosted(fx.params(agent, 5), &model, &host).await;
    let requests = model.requests();
    let result = tool_result(&requests[1].messages, "s1");
    assert!(
        result.starts_with(
            "error: permission denied: task_status on secret-1 is denied by rule \"task_status secret* deny\""
        ),
        "{result}"
    );
}

#[tokio::test]
async fn a_run_resumed_from_its_checkpoint_re_attaches_to_its_background_children() {
    let fx = Fixture::new();
    // A first attempt saves its checkpoint before starting A, then stops (out of
    // steps) while A runs.
    let host = TestHost::new([]);
    let model = ScriptedModel::new([
        call("t1", "task", background("A", "explore", "find the parser")),
        text("out of steps"),
    ]);
    fx.run_hosted(fx.params(builtin::build(), 2), &model, &host)
        .await;
    let (checkpoint, _) = host.checkpoints().remove(0);

    // The next attempt runs the interrupted call again with its id (the host's
    // submit, keyed by parent and call id, finds the same child), and the child's
    // result reaches the model.
    let host = TestHost::new([]);
    host.release("A");
    let model = ScriptedModel::new([text("waiting"), text("the parser is in src/lib.rs")]);
    let mut params = fx.params(builtin::build(), 5);
    params.history = checkpoint;
    params.from_checkpoint = true;
    let outcome = fx.run_hosted(params, &model, &host).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let children = host.children();
    assert_eq!(children.len(), 1);
    assert!(children[0].background && children[0].call_id == "t1");
    let requests = model.requests();
    let delivered: Vec<_> = requests
        .iter()
        .flat_map(|r| deliveries(&r.messages))
        .collect();
    assert!(
        delivered
            .iter()
            .any(|d| d.contains("background task task-A (explore: A) completed")),
        "{delivered:?}"
    );
}

#[tokio::test]
async fn a_resumed_run_re_attaches_to_background_children_started_before_its_checkpoint() {
    let fx = Fixture::new();
    // The first attempt starts A in the background, then delegates B in a later step
    // (a second checkpoint, in which A's call is finished) and stops.
    let host = TestHost::new([]);
    let model = ScriptedModel::new([
        call("t1", "task", background("A", "explore", "find the parser")),
        call(
            "t2",
            "task",
            json!({"description": "B", "prompt": "find the printer", "subagent_type": "general"}),
        ),
        text("out of steps"),
    ]);
    fx.run_hosted(fx.params(builtin::build(), 3), &model, &host)
        .await;
    let checkpoints = host.checkpoints();
    assert_eq!(checkpoints.len(), 2);
    let (checkpoint, _) = checkpoints[1].clone();

    let host = TestHost::new([]);
    host.release("A");
    let model = ScriptedModel::new([text("waiting"), text("the parser is in src/lib.rs")]);
    let mut params = fx.params(builtin::build(), 10);
    params.history = checkpoint;
    params.from_checkpoint = true;
    let outcome = fx.run_hosted(params, &model, &host).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let mut asked: Vec<_> = host
        .children()
        .into_iter()
        .map(|c| (c.call_id, c.background))
        .collect();
    asked.sort();
    assert_eq!(
        asked,
        [("t1".to_owned(), true), ("t2".to_owned(), false)],
        "A is followed again by its call id, B re-run"
    );
    let delivered: Vec<_> = model
        .requests()
        .iter()
        .flat_map(|r| {
            deliveries(&r.messages)
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        delivered
            .iter()
            .any(|d| d.contains("background task task-A (explore: A) completed")),
        "{delivered:?}"
    );
}
