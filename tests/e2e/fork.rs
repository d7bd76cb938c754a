//! Forked context through a real coordinator and two workers: a `task` call with
//! `fork: true` starts its child from the parent's conversation so far. The child's
//! first request begins with the parent's last request (system prompt, tools, messages)
//! under the parent's prompt cache key, then the separator and the child's prompt; the
//! child runs only its own tools.

use serde_json::json;
use taskwire_e2e::start;
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

const SEPARATOR_MARK: &str = "You are now the `general` subagent";
const CHILD_PROMPT: &str = "find the callers of run()";

fn is_child(req: &SeenRequest) -> bool {
    req.messages
        .iter()
        .any(|m| m.role == "user" && m.content.contains(SEPARATOR_MARK))
}

fn script(req: &SeenRequest) -> ScriptedReply {
    if is_child(req) {
        // Turns after the forked conversation's own.
        let own = req
            .messages
            .iter()
            .skip_while(|m| !m.content.contains(SEPARATOR_MARK))
            .filter(|m| m.role == "assistant")
            .count();
        return match own {
            // A tool of the parent's that the child may not use (children at the depth
            // limit start none).
            0 => ScriptedReply::tool_calls([(
                "c1",
                "task",
                json!({"description": "deeper", "prompt": "go on", "subagent_type": "general"}),
            )]),
            _ => ScriptedReply::text("callers of run(): src/main.rs"),
        };
    }
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([("r1", "read", json!({"filePath": "src/lib.rs"}))])
            .with_text("I will read lib.rs first."),
        1 => ScriptedReply::tool_calls([(
            "t1",
            "task",
            json!({
                "description": "find callers",
                "prompt": CHILD_PROMPT,
                "subagent_type": "general",
                "fork": true
            }),
        )])
        .with_text("run() is defined in lib.rs; a subagent finds its callers."),
        _ => ScriptedReply::text("done"),
    }
}

#[tokio::test]
async fn a_forked_child_starts_from_the_parents_conversation_and_shares_its_prefix() {
    let mut cluster = start(ScriptedModel::start(script).await, 0, 2)
        .await
        .expect("cluster");
    std::fs::create_dir_all(cluster.workspace.path().join("src")).expect("mkdir");
    std::fs::write(
        cluster.workspace.path().join("src/lib.rs"),
        "pub fn run() {}\n",
    )
    .expect("write");
    cluster.add_worker("w1", 2);
    cluster.add_worker("w2", 2);
    let id = cluster
        .submit("build", "refactor run()")
        .await
        .expect("submit");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");

    let requests = cluster.model.requests();
    let parent_last = requests
        .iter()
        .find(|r| !is_child(r) && r.assistant_turns() == 1)
        .expect("the parent's request that started the child");
    let child_first = requests
        .iter()
        .find(|r| is_child(r))
        .expect("the child's first request");
    eprintln!(
        "a fork: true child's first request:\n{}",
        serde_json::to_string_pretty(&child_first.raw).expect("json")
    );

    // The same prefix: tools, system prompt, every message the parent last sent.
    assert_eq!(child_first.raw["tools"], parent_last.raw["tools"]);
    let parent_messages = parent_last.raw["messages"].as_array().expect("messages");
    let child_messages = child_first.raw["messages"].as_array().expect("messages");
    assert_eq!(
        child_messages[..parent_messages.len()],
        parent_messages[..],
        "the child's request begins with the parent's last request"
    );
    assert_eq!(
        child_first.raw["prompt_cache_key"], parent_last.raw["prompt_cache_key"],
        "under the parent's cache key"
    );
    assert!(child_first.raw["prompt_cache_key"].is_string());
    // Then the parent's step, without its pending task call; the separator; the prompt.
    let rest = &child_messages[parent_messages.len()..];
    assert_eq!(rest.len(), 3, "{rest:?}");
    assert_eq!(rest[0]["role"], "assistant");
    assert_eq!(
        rest[0]["content"],
        "run() is defined in lib.rs; a subagent finds its callers."
    );
    assert!(
        rest[0].get("tool_calls").is_none_or(|c| c.is_null()),
        "{}",
        rest[0]
    );
    assert_eq!(rest[1]["role"], "user");
    let separator = rest[1]["content"].as_str().expect("text");
    assert!(separator.contains(SEPARATOR_MARK), "{separator}");
    assert!(
        separator.contains("The tools you may use: ") && !separator.contains(" task,"),
        "{separator}"
    );
    assert_eq!(rest[2]["role"], "user");
    assert!(
        rest[2]["content"]
            .as_str()
            .is_some_and(|c| c.starts_with(CHILD_PROMPT)),
        "{}",
        rest[2]
    );

    // The child runs only its own tools, though it is offered the parent's.
    let child_second = requests
        .iter()
        .filter(|r| is_child(r))
        .nth(1)
        .expect("the child's second request");
    let refused = child_second
        .messages
        .iter()
        .find(|m| m.role == "tool" && m.tool_call_id.as_deref() == Some("c1"))
        .expect("a result for the child's call");
    assert_eq!(
        refused.content,
        "error: tool task is not available to agent general"
    );
    let answered = requests
        .iter()
        .find(|r| !is_child(r) && r.assistant_turns() == 2)
        .expect("the parent's last request");
    let result = answered
        .messages
        .iter()
        .find(|m| m.role == "tool" && m.tool_call_id.as_deref() == Some("t1"))
        .expect("the task call's result");
    assert!(
        result.content.starts_with("callers of run(): src/main.rs"),
        "{}",
        result.content
    );
    cluster.shutdown().await;
}
