//! Hooks (`hooks.json` in Claude Code's shape, an agent's frontmatter `hooks`) through
//! a real coordinator and worker: a `PreToolUse` hook blocks a command and the model
//! reads its reason, the agent's own `PostToolUse` hook adds to a result, and watchers
//! see each hook run as a `hook` progress event.

use serde_json::json;
use taskwire_e2e::{progress_events, start_with};
use taskwire_protocol::pb;
use taskwire_test_support::files::write;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

const GUARD: &str =
    "grep -q 'rm ' && { echo 'deleting files is not allowed here' >&2; exit 2; }; exit 0";

fn script(req: &SeenRequest) -> ScriptedReply {
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([
            ("b1", "bash", json!({"command": "rm -f README.md"})),
            ("b2", "bash", json!({"command": "echo kept"})),
        ]),
        _ => ScriptedReply::text(format!(
            "rm: {} | echo: {}",
            req.tool_result("b1"),
            req.tool_result("b2")
        )),
    }
}

#[tokio::test]
async fn a_pre_tool_use_hook_blocks_a_command_and_watchers_see_every_hook_run() {
    let config = tempfile::tempdir().expect("config dir");
    write(
        config.path(),
        "hooks.json",
        &json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": GUARD, "timeout": 10}
        ]}]}})
        .to_string(),
    );
    write(
        config.path(),
        "agents/careful.md",
        "---\ndescription: careful\nmode: primary\nhooks:\n  PostToolUse:\n    - matcher: bash\n      hooks:\n        - type: command\n          command: |-\n            echo '{\"hookSpecificOutput\": {\"additionalContext\": \"checked by the careful agent\"}}'\n---\nYou are careful.\n",
    );
    let dir = config.path().to_owned();
    let mut cluster = start_with(ScriptedModel::start(script).await, 0, 1, move |c| {
        c.config_dir = Some(dir)
    })
    .await
    .expect("cluster");
    std::fs::write(cluster.workspace.path().join("README.md"), "keep me\n").expect("write");
    cluster.add_worker("w", 1);
    let id = cluster.submit("careful", "tidy up").await.expect("submit");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");

    let requests = cluster.model.requests();
    let denial = requests[1].tool_result("b1");
    eprintln!("the hook's denial as the model reads it:\n{denial}");
    assert_eq!(
        denial,
        format!(
            "error: blocked by the PreToolUse hook `{GUARD}`: deleting files is not allowed here"
        )
    );
    let kept = requests[1].tool_result("b2");
    assert!(
        kept.starts_with("kept\n")
            && kept.ends_with("\n\nPostToolUse hook context:\nchecked by the careful agent"),
        "{kept}"
    );

    let events = cluster.watch(&id).await.expect("watch");
    let mut runs: Vec<_> = progress_events(&events)
        .into_iter()
        .filter_map(|p| match &p.event {
            Some(pb::task_progress::Event::Hook(h)) => Some((
                h.event.clone(),
                h.call_id.clone(),
                h.outcome.clone(),
                h.message.clone(),
                h.source.clone(),
            )),
            _ => None,
        })
        .collect();
    runs.sort();
    eprintln!("hook runs: {runs:?}");
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert_eq!(
        (runs[0].0.as_str(), runs[0].1.as_str(), runs[0].2.as_str()),
        ("PostToolUse", "b2", "ok")
    );
    assert_eq!(runs[0].4, "agent careful");
    assert_eq!(
        (
            runs[1].0.as_str(),
            runs[1].1.as_str(),
            runs[1].2.as_str(),
            runs[1].3.as_str()
        ),
        (
            "PreToolUse",
            "b1",
            "blocked",
            "deleting files is not allowed here"
        )
    );
    assert!(runs[1].4.ends_with("hooks.json"), "{}", runs[1].4);
    assert_eq!(
        (runs[2].0.as_str(), runs[2].1.as_str(), runs[2].2.as_str()),
        ("PreToolUse", "b2", "ok")
    );
    cluster.shutdown().await;
}
