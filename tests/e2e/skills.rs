//! Skills (`skills/NAME/SKILL.md`, the format OpenCode, Claude Code and Codex share)
//! through a real coordinator and worker: the `skill` tool's description lists each
//! skill's name and description only; a call loads the body into the conversation; the
//! skill's files are read under `.taskwire/skills/NAME/`; a skill the agent's rules deny
//! is neither listed nor loaded.

use serde_json::json;
use taskwire_e2e::start_with;
use taskwire_protocol::pb;
use taskwire_test_support::files::write;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

const BODY: &str = "To write release notes: read templates/notes.md, fill one line per change.";

/// Loads `release-notes`, reads its template, tries the denied `secrets`, then
/// answers with what it got.
fn script(req: &SeenRequest) -> ScriptedReply {
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([("s1", "skill", json!({"name": "release-notes"}))]),
        1 => ScriptedReply::tool_calls([
            (
                "r1",
                "read",
                json!({"filePath": ".taskwire/skills/release-notes/templates/notes.md"}),
            ),
            ("s2", "skill", json!({"name": "secrets"})),
        ]),
        _ => ScriptedReply::text(format!(
            "template: {} | denied: {}",
            req.tool_result("r1"),
            req.tool_result("s2")
        )),
    }
}

#[tokio::test]
async fn a_skill_is_listed_by_description_loaded_on_call_and_its_files_read() {
    let config = tempfile::tempdir().expect("config dir");
    write(
        config.path(),
        "skills/release-notes/SKILL.md",
        &format!(
            "---\nname: release-notes\ndescription: Writes release notes from the git log.\n---\n{BODY}\n"
        ),
    );
    write(
        config.path(),
        "skills/release-notes/templates/notes.md",
        "## Changes\n- one line per change\n",
    );
    write(
        config.path(),
        "skills/secrets/SKILL.md",
        "---\nname: secrets\ndescription: Rotates the deploy keys.\n---\nRotate them.\n",
    );
    write(
        config.path(),
        "agents/writer.md",
        "---\ndescription: writes\nmode: primary\npermission:\n  skill:\n    secrets: deny\n---\nYou write.\n",
    );
    let dir = config.path().to_owned();
    let mut cluster = start_with(ScriptedModel::start(script).await, 0, 1, move |c| {
        c.config_dir = Some(dir)
    })
    .await
    .expect("cluster");
    cluster.add_worker("w", 1);
    let id = cluster
        .submit("writer", "write the release notes")
        .await
        .expect("submit");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");

    let requests = cluster.model.requests();
    let skill_tool = requests[0].raw["tools"]
        .as_array()
        .expect("tools offered")
        .iter()
        .find(|t| t["function"]["name"] == "skill")
        .expect("the skill tool is offered")
        .clone();
    let description = skill_tool["function"]["description"]
        .as_str()
        .expect("a description");
    eprintln!("the skill tool's description:\n{description}");
    assert!(
        description.contains("<name>release-notes</name>")
            && description
                .contains("<description>Writes release notes from the git log.</description>"),
        "{description}"
    );
    assert!(
        !description.contains(BODY),
        "only names and descriptions are listed"
    );
    assert!(
        !description.contains("secrets"),
        "a denied skill is not listed"
    );
    assert_eq!(
        skill_tool["function"]["parameters"]["required"],
        json!(["name"])
    );
    assert!(
        !requests[0]
            .messages
            .iter()
            .any(|m| m.content.contains(BODY)),
        "the body is not in the conversation before the call"
    );

    let loaded = requests[1].tool_result("s1");
    eprintln!("the skill call's result:\n{loaded}");
    assert!(
        loaded.starts_with(
            "## Skill: release-notes\n\n**Base directory**: .taskwire/skills/release-notes\n\n"
        ) && loaded.contains(BODY)
            && loaded.contains("- .taskwire/skills/release-notes/templates/notes.md"),
        "{loaded}"
    );
    let text = task.result.expect("result").output.expect("output").text;
    assert!(text.contains("1\t## Changes"), "{text}");
    assert!(
        text.contains("denied:") && text.contains("secrets"),
        "{text}"
    );
    assert!(!text.contains("Rotate them."), "{text}");
    assert!(
        !cluster.workspace.path().join(".taskwire").exists(),
        "nothing is written into the workspace"
    );
    cluster.shutdown().await;
}
