//! Agents from markdown, tool-less agents, the doom-loop guard, transcripts, and a
//! slash command run as a subtask.

use std::time::Duration;

use serde_json::json;
use taskwire_agent::command::{self, CommandMode, command_mode, run_subtask};
use taskwire_agent::transcript::SUBTASK_USER_TEXT;
use taskwire_agent::{
    MessageRole, NoopHost, Part, SUBTASK_SUMMARY_PROMPT, SessionEvent, SessionStatus,
    ToolCallState, Transcript,
};
use taskwire_definitions::{AgentRegistry, builtin, load_agents};
use taskwire_llm::Role;
use tokio_util::sync::CancellationToken;

use crate::support::*;

#[tokio::test]
async fn a_markdown_agent_with_a_tool_denied_never_sees_that_tool() {
    let fx = Fixture::new();
    let dir = tempfile::tempdir().expect("temp dir");
    let agents = dir.path().join("agents");
    std::fs::create_dir(&agents).expect("mkdir");
    std::fs::write(
        agents.join("reviewer.md"),
        "---\ndescription: Reviews code\nmode: subagent\ntools:\n  bash: false\n  \"web*\": false\n---\nYou review code.\n",
    )
    .expect("write");
    let (registry, errors) = load_agents(&agents, AgentRegistry::builtin());
    assert!(errors.is_empty(), "{errors:?}");
    let reviewer = registry
        .get(&"reviewer".parse().expect("valid"))
        .expect("loaded")
        .clone();

    let model = ScriptedModel::new([
        call("c1", "bash", json!({"command": "touch pwned.txt"})),
        text("fine"),
    ]);
    let outcome = fx.run(fx.params(reviewer, 5), &model).await;

    let requests = model.requests();
    let offered = tool_names(&requests[0]);
    assert!(!offered.contains(&"bash"), "{offered:?}");
    assert!(!offered.contains(&"webfetch"), "{offered:?}");
    assert!(
        offered.contains(&"read") && offered.contains(&"edit"),
        "{offered:?}"
    );
    assert_eq!(
        requests[0].messages[0].content.lines().next(),
        Some("You review code.")
    );
    assert_eq!(
        tool_result(&requests[1].messages, "c1"),
        "error: tool bash is not available to agent reviewer"
    );
    assert_eq!(
        fx.states_of("c1"),
        [ToolCallState::Pending, ToolCallState::Error]
    );
    assert!(!fx.workspace.root().join("pwned.txt").exists());
    assert_eq!(outcome.status, SessionStatus::Completed);
}

#[tokio::test]
async fn a_tool_less_agent_answers_in_one_step() {
    let fx = Fixture::new();
    let model = ScriptedModel::new([text("Fix flaky retry test")]);
    let outcome = fx.run(fx.params(builtin::title(), 1), &model).await;
    assert_eq!(outcome.status, SessionStatus::Completed);
    assert_eq!(outcome.text, "Fix flaky retry test");
    let request = &model.requests()[0];
    assert!(request.tools.is_empty());
    assert!(
        !request
            .messages
            .iter()
            .any(|m| m.content.contains("MAXIMUM STEPS")),
        "no step-limit instruction for an agent without tools"
    );
}

#[tokio::test]
async fn the_third_identical_call_in_a_row_is_refused() {
    let fx = Fixture::new();
    let read = || json!({"filePath": "src/lib.rs"});
    let model = ScriptedModel::new([
        call("c1", "read", read()),
        call("c2", "read", read()),
        call("c3", "read", read()),
        calls(&[
            ("c4", "read", json!({"filePath": "src/main.rs"})),
            ("c5", "grep", json!({"pattern": "x"})),
            ("c6", "grep", json!({"pattern": "x"})),
            ("c7", "grep", json!({"pattern": "x"})),
        ]),
        text("stuck no more"),
    ]);
    let outcome = fx.run(fx.params(builtin::general(), 10), &model).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let sent = &model.requests()[4].messages;
    assert!(
        tool_result(sent, "c2").contains("pub fn run()"),
        "the second still runs"
    );
    assert!(
        tool_result(sent, "c3")
            .starts_with("error: refusing to run read a third time in a row with the same input"),
        "{}",
        tool_result(sent, "c3")
    );
    assert!(!tool_result(sent, "c6").starts_with("error"));
    assert!(tool_result(sent, "c7").starts_with("error: refusing to run grep"));
    assert_eq!(
        fx.states_of("c3"),
        [ToolCallState::Pending, ToolCallState::Error]
    );
    let oks: Vec<_> = outcome.tool_calls.iter().map(|c| c.ok).collect();
    assert_eq!(oks, [true, true, false, true, true, true, false]);
}

#[tokio::test]
async fn the_transcript_records_parts_and_resumes_with_the_todo_list() {
    let fx = Fixture::new();
    let todos =
        json!([{"id": "1", "content": "fix it", "status": "in_progress", "priority": "high"}]);
    let model = ScriptedModel::new([
        call("c1", "todowrite", json!({ "todos": todos })),
        text("planned"),
    ]);
    let outcome = fx.run(fx.params(builtin::build(), 5), &model).await;

    let transcript = &outcome.transcript;
    assert_eq!(transcript.to_messages(), outcome.messages);
    let roles: Vec<_> = transcript.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            MessageRole::User,
            MessageRole::Assistant,
            MessageRole::Assistant
        ]
    );
    assert_eq!(transcript.messages[1].agent.as_deref(), Some("build"));
    match &transcript.messages[1].parts[..] {
        [
            Part::ToolCall {
                call_id,
                tool,
                state,
                title,
                output,
                ..
            },
            Part::StepFinish { usage: step },
        ] => {
            assert_eq!((call_id.as_str(), tool.as_str()), ("c1", "todowrite"));
            assert_eq!(*state, ToolCallState::Completed);
            assert_eq!(title, "1 open todos");
            assert!(output.as_deref().is_some_and(|o| o.contains("fix it")));
            assert_eq!(*step, usage(10, 5));
        }
        other => panic!("unexpected parts {other:?}"),
    }
    assert_eq!(transcript.usage(), outcome.usage);

    // Shipped as JSON to the coordinator and back, then resumed on another worker.
    let shipped: Transcript =
        serde_json::from_str(&serde_json::to_string(transcript).expect("json")).expect("parse");
    let resumed_model = ScriptedModel::new([call("c2", "todoread", json!({})), text("still open")]);
    let mut params = fx.params(builtin::build(), 5);
    params.history = shipped;
    params.prompt = "what is left?".into();
    let resumed = fx.run(params, &resumed_model).await;
    assert!(
        tool_result(&resumed_model.requests()[1].messages, "c2").contains("fix it"),
        "the todo list survived the resume"
    );
    assert_eq!(resumed.transcript.messages.len(), 6);
}

#[tokio::test]
async fn a_subagent_command_runs_as_a_subtask_and_the_parent_summarises_it() {
    let fx = Fixture::new();
    let dir = tempfile::tempdir().expect("temp dir");
    let commands = dir.path().join("commands");
    std::fs::create_dir(&commands).expect("mkdir");
    std::fs::write(
        commands.join("find.md"),
        "---\nagent: explore\ndescription: Find things\n---\nFind all $1 in the codebase\n",
    )
    .expect("write");
    let (registry, errors) = command::load_commands(&commands);
    assert!(errors.is_empty(), "{errors:?}");
    let find = registry.get("/find").expect("loaded");
    let explore = builtin::explore();
    assert_eq!(command_mode(find, &explore), CommandMode::Subtask);

    let part = find.subtask_part(&explore, "TODOs please");
    let host = TestHost::new([]);
    let observer = |event: SessionEvent| fx.record(event);
    let run = run_subtask(&part, "sub-1", &host, &observer, CancellationToken::new()).await;
    assert!(run.ok);
    assert_eq!(run.usage, usage(3, 2));
    // Running repeats as the child reports (the call's metadata updates).
    let mut states = fx.states_of("sub-1");
    states.dedup();
    assert_eq!(
        states,
        [
            ToolCallState::Pending,
            ToolCallState::Running,
            ToolCallState::Completed
        ]
    );

    let mut history = Transcript::new("ses-parent");
    history.messages.extend(run.messages);
    let model = ScriptedModel::new([text("the explorer found the TODOs")]);
    let mut params = fx.params(builtin::build(), 5);
    params.history = history;
    params.prompt = String::new();
    let outcome = fx.run_hosted(params, &model, &host).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let sent = &model.requests()[0].messages;
    let roles: Vec<_> = sent.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::User
        ]
    );
    assert_eq!(sent[1].content, SUBTASK_USER_TEXT);
    assert_eq!(sent[2].tool_calls[0].name, "task");
    assert_eq!(
        sent[3].content,
        "report on Find all TODOs please in the codebase\n\n<task_metadata>\nsession_id: ses-Find things\n</task_metadata>"
    );
    assert_eq!(sent[4].content, SUBTASK_SUMMARY_PROMPT);
    let synthetic = &outcome.transcript.messages[2];
    assert_eq!(
        synthetic.parts,
        [Part::synthetic_text(SUBTASK_SUMMARY_PROMPT)]
    );
    assert_eq!(
        outcome.transcript.messages[1].agent.as_deref(),
        Some("explore")
    );
}

#[tokio::test]
async fn cancelling_the_session_kills_a_running_command() {
    let fx = Fixture::new();
    let model = ScriptedModel::new([
        call(
            "c1",
            "bash",
            json!({"command": "echo $$ > leader; sleep 30"}),
        ),
        text("never reached"),
    ]);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let pid_file = fx.workspace.root().join("leader");
    let watcher = pid_file.clone();
    tokio::spawn(async move {
        // The shell creates the file before it writes the pid: wait for the whole line,
        // or the session may be cancelled before there is a pid to check.
        while !std::fs::read_to_string(&watcher).is_ok_and(|s| s.ends_with('\n')) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        trigger.cancel();
    });
    let outcome = fx
        .run_with(
            fx.params(builtin::build(), 5),
            &model,
            &NoopHost,
            cancel,
            |_| {},
        )
        .await;
    assert_eq!(outcome.status, SessionStatus::Cancelled);
    assert!(!outcome.tool_calls[0].ok);

    let pid: u32 = std::fs::read_to_string(&pid_file)
        .expect("pid written")
        .trim()
        .parse()
        .expect("a pid");
    let stat = format!("/proc/{pid}/stat");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let running = std::fs::read_to_string(&stat).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        });
        if !running {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the command outlived the session"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
