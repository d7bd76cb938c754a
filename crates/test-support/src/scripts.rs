//! Scripts for the scripted model shared by several tests and the dev fleet
//! (`taskwire-scripted-model --tree`).

use crate::{ScriptedReply, SeenRequest};

/// `asker` asks before every command: the agent file [`two_children`] expects.
pub const ASKER: &str = "---\ndescription: Runs one command, asking first\nmode: subagent\n\
                     permission:\n  bash: { \"*\": ask }\n---\nYou run commands.\n";

/// A small tree: the prompt `parent: two children` starts an `asker` child (which runs
/// `echo approved > approved.txt`, so it needs an approval) and an `explore` child in
/// one step; every other turn answers `done: <first user message>`. Every call reports
/// 100 input and 10 output tokens.
pub fn two_children(req: &SeenRequest) -> ScriptedReply {
    answer(req).with_usage(100, 10)
}

fn answer(req: &SeenRequest) -> ScriptedReply {
    let user = req.first_user_message().unwrap_or_default().to_owned();
    let first = req.assistant_turns() == 0;
    match user.as_str() {
        "parent: two children" if first => ScriptedReply::tool_calls([
            (
                "c1",
                "task",
                serde_json::json!({"description": "write the file", "prompt": "child: write it", "subagent_type": "asker"}),
            ),
            (
                "c2",
                "task",
                serde_json::json!({"description": "look around", "prompt": "child: look", "subagent_type": "explore"}),
            ),
        ]),
        "child: write it" if first => ScriptedReply::tool_calls([(
            "b1",
            "bash",
            serde_json::json!({"command": "echo approved > approved.txt", "description": "write approved.txt"}),
        )]),
        _ => ScriptedReply::text(format!("done: {user}")),
    }
}

/// A parent and two `explore` children: the prompt `parent` starts the children
/// `child one` and `child two` in one step; every other turn answers
/// `done: <first user message>`.
pub fn parent_and_two_explorers(req: &SeenRequest) -> ScriptedReply {
    let user = req.first_user_message().unwrap_or_default().to_owned();
    if user == "parent" && req.assistant_turns() == 0 {
        return ScriptedReply::tool_calls([
            (
                "c1",
                "task",
                serde_json::json!({"description": "one", "prompt": "child one", "subagent_type": "explore"}),
            ),
            (
                "c2",
                "task",
                serde_json::json!({"description": "two", "prompt": "child two", "subagent_type": "explore"}),
            ),
        ]);
    }
    ScriptedReply::text(format!("done: {user}"))
}
