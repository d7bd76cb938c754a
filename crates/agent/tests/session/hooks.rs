//! Hooks around the session: real `bash -c` commands in the sandbox with the event on
//! stdin, and an HTTP hook against a loopback server.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use taskwire_agent::hooks::{HookContext, HookRunner};
use taskwire_agent::{CommandSandbox, SessionEvent, SessionStatus, ToolCallState};
use taskwire_definitions::builtin;
use taskwire_definitions::hooks::{Hook, HookAction, HookEvent};
use taskwire_definitions::permission::{PermissionAction, PermissionRule};
use taskwire_llm::Role;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::*;

fn command(event: HookEvent, matcher: &str, command: &str) -> Hook {
    Hook {
        event,
        matcher: matcher.into(),
        action: HookAction::Command {
            command: command.into(),
        },
        timeout_secs: None,
        source: "hooks.json".into(),
    }
}

fn context(urls: Vec<String>, subagent: bool) -> HookContext {
    HookContext {
        runner: HookRunner::new(CommandSandbox::probed(), urls),
        task_id: "task-1".into(),
        subagent,
    }
}

/// The hook events, as `(event, outcome, message)`.
fn hook_runs(fx: &Fixture) -> Vec<(String, String, Option<String>)> {
    fx.events()
        .into_iter()
        .filter_map(|event| match event {
            SessionEvent::Hook {
                event,
                outcome,
                message,
                ..
            } => Some((event, outcome, message)),
            _ => None,
        })
        .collect()
}

fn read_json_lines(fx: &Fixture, file: &str) -> Vec<Value> {
    std::fs::read_to_string(fx.workspace.root().join(file))
        .expect("the hook wrote its input")
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON event per line"))
        .collect()
}

#[tokio::test]
async fn a_pre_tool_use_hook_that_exits_2_blocks_the_call_and_the_model_reads_its_reason() {
    let fx = Fixture::new();
    let mut agent = builtin::general();
    agent.hooks = vec![command(
        HookEvent::PreToolUse,
        "Bash",
        "(cat; echo) >> pre.jsonl; echo 'rm is not allowed in this repository' >&2; exit 2",
    )];
    let model = ScriptedModel::new([
        calls(&[
            ("c1", "bash", json!({"command": "rm -f notes.txt"})),
            ("c2", "read", json!({"filePath": "notes.txt"})),
        ]),
        text("done"),
    ]);
    let mut params = fx.params(agent, 5);
    params.hooks = context(Vec::new(), false);
    let outcome = fx.run(params, &model).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let sent = &model.requests()[1].messages;
    let hook = "(cat; echo) >> pre.jsonl; echo 'rm is not allowed in this repository' >&2; exit 2";
    assert_eq!(
        tool_result(sent, "c1"),
        format!(
            "error: blocked by the PreToolUse hook `{hook}`: rm is not allowed in this repository"
        )
    );
    assert!(
        fx.workspace.root().join("notes.txt").exists(),
        "the blocked command never ran"
    );
    assert!(
        tool_result(sent, "c2").contains("secret plans"),
        "a tool the matcher does not name runs without the hook"
    );
    let input = read_json_lines(&fx, "pre.jsonl");
    assert_eq!(input.len(), 1, "the hook ran for bash only: {input:?}");
    assert_eq!(input[0]["hook_event_name"], "PreToolUse");
    assert_eq!(input[0]["tool_name"], "bash");
    assert_eq!(input[0]["tool_input"]["command"], "rm -f notes.txt");
    assert_eq!(input[0]["tool_use_id"], "c1");
    assert_eq!(input[0]["session_id"], "ses-test");
    assert_eq!(input[0]["task_id"], "task-1");
    assert_eq!(
        input[0]["cwd"],
        fx.workspace.root().display().to_string().as_str()
    );
    assert_eq!(
        hook_runs(&fx),
        [(
            "PreToolUse".to_owned(),
            "blocked".to_owned(),
            Some("rm is not allowed in this repository".to_owned())
        )]
    );
    assert_eq!(fx.states_of("c1").last(), Some(&ToolCallState::Error));
}

#[tokio::test]
async fn a_rewritten_input_runs_and_is_judged_by_the_rules_again() {
    let fx = Fixture::new();
    let mut agent = builtin::general();
    agent.permission = vec![PermissionRule::new("bash", "rm*", PermissionAction::Deny)];
    // Rewrites `echo` commands to a harmless one, and `ls` ones to a denied one.
    agent.hooks = vec![command(
        HookEvent::PreToolUse,
        "bash",
        r#"input=$(cat); case "$input" in
  *'"echo '*) echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": "echo rewritten"}}}';;
  *'"ls'*) echo '{"hookSpecificOutput": {"updatedInput": {"command": "rm -f notes.txt"}}}';;
esac"#,
    )];
    let model = ScriptedModel::new([
        calls(&[
            ("echo", "bash", json!({"command": "echo original"})),
            ("ls", "bash", json!({"command": "ls"})),
        ]),
        text("done"),
    ]);
    let mut params = fx.params(agent, 5);
    params.hooks = context(Vec::new(), false);
    let outcome = fx.run(params, &model).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let sent = &model.requests()[1].messages;
    let echoed = tool_result(sent, "echo");
    assert!(
        echoed.starts_with("rewritten") && !echoed.contains("original"),
        "{echoed}"
    );
    assert_eq!(
        tool_result(sent, "ls"),
        "error: permission denied: bash on rm -f notes.txt is denied by rule \"bash rm* deny\""
    );
    assert!(fx.workspace.root().join("notes.txt").exists());
}

#[tokio::test]
async fn a_pre_tool_use_hook_that_fails_or_times_out_refuses_the_call_and_is_reported() {
    let fx = Fixture::new();
    let mut agent = builtin::general();
    let mut slow = command(HookEvent::PreToolUse, "write", "sleep 30");
    slow.timeout_secs = Some(1);
    agent.hooks = vec![
        command(HookEvent::PreToolUse, "bash", "echo boom >&2; exit 1"),
        slow,
    ];
    let model = ScriptedModel::new([
        calls(&[
            ("c1", "bash", json!({"command": "touch made.txt"})),
            (
                "c2",
                "write",
                json!({"filePath": "written.txt", "content": "x"}),
            ),
        ]),
        text("done"),
    ]);
    let mut params = fx.params(agent, 5);
    params.hooks = context(Vec::new(), false);
    let outcome = fx.run(params, &model).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let sent = &model.requests()[1].messages;
    assert_eq!(
        tool_result(sent, "c1"),
        "error: the PreToolUse hook `echo boom >&2; exit 1` failed, so the call was not run: \
         exited with code 1: boom"
    );
    assert_eq!(
        tool_result(sent, "c2"),
        "error: the PreToolUse hook `sleep 30` failed, so the call was not run: \
         timed out after 1 s and was killed"
    );
    assert!(!fx.workspace.root().join("made.txt").exists());
    assert!(!fx.workspace.root().join("written.txt").exists());
    let mut outcomes: Vec<_> = hook_runs(&fx).into_iter().map(|(_, o, _)| o).collect();
    outcomes.sort();
    assert_eq!(outcomes, ["failed", "failed"]);
}

#[tokio::test]
async fn post_tool_use_hooks_add_their_context_and_feedback_to_the_result() {
    let fx = Fixture::new();
    let mut agent = builtin::general();
    agent.hooks = vec![
        command(
            HookEvent::PostToolUse,
            "Read",
            r#"cat > post.json; echo '{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "notes.txt is generated; edit notes.src"}}'"#,
        ),
        command(
            HookEvent::PostToolUse,
            "read",
            "echo 'the file is stale' >&2; exit 2",
        ),
    ];
    let model = ScriptedModel::new([
        call("c1", "read", json!({"filePath": "notes.txt"})),
        text("done"),
    ]);
    let mut params = fx.params(agent, 5);
    params.hooks = context(Vec::new(), false);
    let outcome = fx.run(params, &model).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let requests = model.requests();
    let result = tool_result(&requests[1].messages, "c1");
    assert!(result.contains("secret plans"), "{result}");
    assert!(
        result.ends_with(
            "\n\nPostToolUse hook context:\nnotes.txt is generated; edit notes.src\
             \n\nPostToolUse hook feedback:\nthe file is stale"
        ),
        "{result}"
    );
    let input: Value = serde_json::from_str(
        &std::fs::read_to_string(fx.workspace.root().join("post.json")).expect("written"),
    )
    .expect("json");
    assert_eq!(input["hook_event_name"], "PostToolUse");
    assert!(
        input["tool_response"]["output"]
            .as_str()
            .is_some_and(|o| o.contains("secret plans")),
        "{input}"
    );
}

#[tokio::test]
async fn a_stop_hook_makes_the_session_go_on_once_then_lets_it_end() {
    let fx = Fixture::new();
    let mut agent = builtin::general();
    agent.hooks = vec![command(
        HookEvent::Stop,
        "",
        "(cat; echo) >> stop.jsonl; echo 'the tests still fail: run them' >&2; exit 2",
    )];
    let model = ScriptedModel::new([text("done"), text("ran them, all pass")]);
    let mut params = fx.params(agent, 5);
    params.hooks = context(Vec::new(), false);
    let outcome = fx.run(params, &model).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    assert_eq!(outcome.text, "ran them, all pass");
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "went on once, not forever");
    let last = requests[1].messages.last().expect("a message");
    assert_eq!(last.role, Role::User);
    assert_eq!(
        last.content,
        "Stop hook feedback:\nthe tests still fail: run them"
    );
    let input = read_json_lines(&fx, "stop.jsonl");
    assert_eq!(input.len(), 2);
    assert_eq!(input[0]["hook_event_name"], "Stop");
    assert_eq!(input[0]["stop_hook_active"], false);
    assert_eq!(input[0]["last_assistant_message"], "done");
    assert_eq!(input[1]["stop_hook_active"], true);
    // The feedback is part of the session: a resumed run sees it.
    assert!(
        outcome
            .transcript
            .to_messages()
            .iter()
            .any(|m| m.content == "Stop hook feedback:\nthe tests still fail: run them")
    );
}

#[tokio::test]
async fn a_child_session_runs_subagent_stop_hooks_not_stop_hooks() {
    let fx = Fixture::new();
    let mut agent = builtin::explore();
    agent.hooks = vec![
        command(HookEvent::Stop, "", "touch stop-ran"),
        command(
            HookEvent::SubagentStop,
            "explore",
            "cat > subagent-stop.json",
        ),
        command(HookEvent::SubagentStop, "general", "touch wrong-agent"),
    ];
    let model = ScriptedModel::new([text("found it")]);
    let mut params = fx.params(agent, 5);
    params.hooks = context(Vec::new(), true);
    let outcome = fx.run(params, &model).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let root = fx.workspace.root();
    assert!(!root.join("stop-ran").exists());
    assert!(!root.join("wrong-agent").exists());
    let input: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("subagent-stop.json")).expect("as set up"),
    )
    .expect("as set up");
    assert_eq!(input["hook_event_name"], "SubagentStop");
    assert_eq!(input["agent"], "explore");
}

#[tokio::test]
async fn session_start_hooks_add_their_output_to_the_system_prompt() {
    let fx = Fixture::new();
    let mut agent = builtin::general();
    agent.hooks = vec![
        command(
            HookEvent::SessionStart,
            "startup",
            "echo 'open issues: #12, #14'",
        ),
        command(HookEvent::SessionStart, "resume", "echo 'resumed'"),
    ];
    let model = ScriptedModel::new([text("done")]);
    let mut params = fx.params(agent, 5);
    params.hooks = context(Vec::new(), false);
    fx.run(params, &model).await;

    let system = &model.requests()[0].messages[0];
    assert_eq!(system.role, Role::System);
    assert!(
        system
            .content
            .ends_with("\n\nContext from the session's start hooks:\nopen issues: #12, #14"),
        "{}",
        system.content
    );
    assert!(!system.content.contains("resumed"));
}

/// A loopback HTTP server that records each request's body and answers `status` with
/// `body`.
async fn hook_server(
    status: &'static str,
    body: &'static str,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("bound");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen = recorded.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let text = String::from_utf8_lossy(&request).into_owned();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            seen.lock()
                                .expect("as set up")
                                .push(text[end + 4..end + 4 + length].to_owned());
                            break;
                        }
                    }
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (format!("http://{addr}"), seen)
}

fn http(event: HookEvent, matcher: &str, url: &str) -> Hook {
    Hook {
        event,
        matcher: matcher.into(),
        action: HookAction::Http {
            url: url.into(),
            headers: Vec::new(),
        },
        timeout_secs: Some(5),
        source: "hooks.json".into(),
    }
}

#[tokio::test]
async fn an_http_hook_gets_the_event_and_its_answer_counts_and_an_unlisted_url_fails() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (denying, seen) = hook_server(
        "200 OK",
        r#"{"decision": "block", "reason": "writes are frozen today"}"#,
    )
    .await;
    let (failing, _) = hook_server("500 Internal Server Error", "{}").await;
    let fx = Fixture::new();
    let mut agent = builtin::general();
    agent.hooks = vec![
        http(HookEvent::PreToolUse, "write", &format!("{denying}/pre")),
        http(HookEvent::PreToolUse, "edit", &format!("{failing}/pre")),
        http(HookEvent::PreToolUse, "bash", "http://127.0.0.1:9/unlisted"),
    ];
    let model = ScriptedModel::new([
        calls(&[
            ("w", "write", json!({"filePath": "new.txt", "content": "x"})),
            (
                "e",
                "edit",
                json!({"filePath": "notes.txt", "oldString": "secret", "newString": "open"}),
            ),
            ("b", "bash", json!({"command": "touch made.txt"})),
        ]),
        text("done"),
    ]);
    let mut params = fx.params(agent, 5);
    params.hooks = context(vec![denying.clone(), failing.clone()], false);
    let outcome = fx.run(params, &model).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let sent = &model.requests()[1].messages;
    assert_eq!(
        tool_result(sent, "w"),
        format!("error: blocked by the PreToolUse hook `{denying}/pre`: writes are frozen today")
    );
    assert_eq!(
        tool_result(sent, "e"),
        format!(
            "error: the PreToolUse hook `{failing}/pre` failed, so the call was not run: \
             answered 500 Internal Server Error"
        )
    );
    assert_eq!(
        tool_result(sent, "b"),
        "error: the PreToolUse hook `http://127.0.0.1:9/unlisted` failed, so the call was not \
         run: http://127.0.0.1:9/unlisted is not among the worker's allowed hook URLs (hook_urls)"
    );
    let root = fx.workspace.root();
    assert!(!root.join("new.txt").exists());
    assert!(!root.join("made.txt").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).expect("as set up"),
        "secret plans\n"
    );
    let bodies = seen.lock().expect("as set up").clone();
    assert_eq!(bodies.len(), 1);
    let event: Value = serde_json::from_str(&bodies[0]).expect("the event as JSON");
    assert_eq!(event["tool_name"], "write");
    assert_eq!(event["tool_input"]["filePath"], "new.txt");
}

#[tokio::test]
async fn a_hook_that_asks_sends_the_call_for_approval_with_its_reason() {
    let fx = Fixture::new();
    let host = TestHost::new([taskwire_agent::ApprovalAnswer::Once]);
    let mut agent = builtin::general();
    agent.hooks = vec![command(
        HookEvent::PreToolUse,
        "bash",
        r#"echo '{"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "touches the release branch"}}'"#,
    )];
    let model = ScriptedModel::new([
        call("c1", "bash", json!({"command": "touch made.txt"})),
        text("done"),
    ]);
    let mut params = fx.params(agent, 5);
    params.hooks = context(Vec::new(), false);
    let outcome = fx.run_hosted(params, &model, &host).await;

    assert_eq!(outcome.status, SessionStatus::Completed);
    let asked = host.approvals();
    assert_eq!(asked.len(), 1, "the rules alone allow it: the hook asked");
    assert_eq!(asked[0].permission, "bash");
    assert_eq!(asked[0].patterns, ["touch made.txt"]);
    assert!(
        fx.workspace.root().join("made.txt").exists(),
        "approved once, it ran"
    );
}
