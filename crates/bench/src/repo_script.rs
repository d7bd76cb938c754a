//! What the scripted model answers in the real-task phase: a `general` parent delegates
//! to an `explore` child, which greps and reads the repository, and both then answer.
//!
//! The parent's prompt names the lookup (`grep: PATTERN`, `read: FILE`); its first turn
//! calls `task` with the same lookup under the child's marker, so every reply is a
//! function of the request alone (the model serves many runs at once):
//!
//! | session | turn 0 | turn 1 |
//! |---|---|---|
//! | parent (`general`) | `task` → `explore` | text |
//! | child (`explore`) | `grep` and `read` | text |
//!
//! With `--repo-parent-writes` the parent first writes a file of its own (its prompt
//! says `write: FILE`) and runs a command on the repository (`git status --short`), so
//! that its workspace is made, a command's changes are looked for, and the child starts
//! from its change: turn 0 `write`, turn 1 `bash`, turn 2 `task`, turn 3 text.

use serde_json::json;
use taskwire_test_support::{ScriptedReply, SeenRequest};

use crate::repos::Lookup;

/// First word of a parent's prompt.
pub const PARENT: &str = "bench-repo-run";
/// First word of a child's prompt.
pub const CHILD: &str = "bench-repo-child";

/// Which session of a run a request is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Parent,
    Child,
}

/// The prompt of run `i`'s parent; one that `writes` first writes a file of its own.
pub fn parent_prompt(lookup: Lookup, i: usize, writes: bool) -> String {
    let write = if writes {
        format!("\nwrite: bench-note-{i}.txt")
    } else {
        String::new()
    };
    format!(
        "{PARENT} {i}\ngrep: {}\nread: {}{write}",
        lookup.grep, lookup.read
    )
}

/// The file a parent's prompt says to write first, if any.
fn file_to_write(prompt: &str) -> Option<&str> {
    prompt
        .lines()
        .find_map(|l| l.trim().strip_prefix("write:"))
        .map(str::trim)
}

/// The role and lookup a prompt names, if it is one of the phase's.
pub fn parse(prompt: &str) -> Option<(Role, String, String)> {
    let role = if prompt.contains(PARENT) {
        Role::Parent
    } else if prompt.contains(CHILD) {
        Role::Child
    } else {
        return None;
    };
    let field = |name: &str| {
        prompt
            .lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .map(|v| v.trim().to_owned())
    };
    Some((role, field("grep:")?, field("read:")?))
}

/// The reply to a request of the phase; `None` for any other request.
pub fn reply(request: &SeenRequest) -> Option<ScriptedReply> {
    let prompt = request.first_user_message()?;
    let (role, grep, read) = parse(prompt)?;
    let write = file_to_write(prompt).filter(|_| role == Role::Parent);
    // A parent that writes and runs a command first is two turns later from then on.
    let turn = match (write, request.assistant_turns()) {
        (Some(file), 0) => {
            return Some(ScriptedReply::tool_calls([(
                "call-write",
                "write",
                json!({ "filePath": file, "content": "a note of the parent's\n" }),
            )]));
        }
        (Some(_), 1) => {
            return Some(ScriptedReply::tool_calls([(
                "call-bash",
                "bash",
                json!({ "command": "git status --short", "description": "what changed" }),
            )]));
        }
        (Some(_), turn) => turn - 2,
        (None, turn) => turn,
    };
    Some(match (role, turn) {
        (Role::Parent, 0) => ScriptedReply::tool_calls([(
            "call-task",
            "task",
            json!({
                "description": "find it",
                "prompt": format!("{CHILD}\ngrep: {grep}\nread: {read}"),
                "subagent_type": "explore",
            }),
        )]),
        (Role::Child, 0) => ScriptedReply::tool_calls([
            ("call-grep", "grep", json!({ "pattern": grep })),
            ("call-read", "read", json!({ "filePath": read })),
        ]),
        _ => ScriptedReply::text("done"),
    })
}

/// Checks that every tool call of the phase's sessions in `requests` succeeded and the
/// grep found something; how many tool results were checked.
pub fn check(requests: &[SeenRequest]) -> anyhow::Result<usize> {
    let mut checked = 0;
    for request in requests {
        if request.assistant_turns() != 1 || request.first_user_message().and_then(parse).is_none()
        {
            continue;
        }
        for message in request.messages.iter().filter(|m| m.role == "tool") {
            let call = message.tool_call_id.as_deref().unwrap_or("?");
            let text = message.content.trim_start();
            anyhow::ensure!(
                !text.starts_with("error:") && !text.starts_with("no matches found"),
                "tool call {call} of a real-task run answered: {}",
                text.chars().take(300).collect::<String>()
            );
            checked += 1;
        }
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwire_test_support::model::{SeenMessage, WireFormat};

    const LOOKUP: Lookup = Lookup {
        grep: "fn main",
        read: "Cargo.toml",
    };

    fn message(role: &str, content: &str) -> SeenMessage {
        SeenMessage {
            role: role.to_owned(),
            content: content.to_owned(),
            tool_calls: Vec::new(),
            tool_call_id: (role == "tool").then(|| "call-grep".to_owned()),
        }
    }

    fn request(messages: Vec<SeenMessage>) -> SeenRequest {
        SeenRequest {
            format: WireFormat::OpenAi,
            model: "scripted".to_owned(),
            messages,
            tools: Vec::new(),
            stream: false,
            include_usage: false,
            headers: Default::default(),
            raw: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_writing_parent_writes_runs_a_command_then_delegates() {
        let prompt = parent_prompt(LOOKUP, 3, true);
        assert_eq!(file_to_write(&prompt), Some("bench-note-3.txt"));
        let first = request(vec![message("user", &prompt)]);
        let debug = format!("{:?}", reply(&first).expect("a phase request"));
        assert!(
            debug.contains("\"write\"") && debug.contains("bench-note-3.txt"),
            "{debug}"
        );
        let mut second = first.clone();
        second.messages.push(message("assistant", ""));
        second
            .messages
            .push(message("tool", "wrote bench-note-3.txt"));
        let debug = format!("{:?}", reply(&second).expect("a phase request"));
        assert!(
            debug.contains("\"bash\"") && debug.contains("git status"),
            "{debug}"
        );
        let mut third = second.clone();
        third.messages.push(message("assistant", ""));
        third.messages.push(message("tool", "?? bench-note-3.txt"));
        let debug = format!("{:?}", reply(&third).expect("a phase request"));
        assert!(
            debug.contains("\"task\"") && debug.contains("explore"),
            "{debug}"
        );
        assert_eq!(file_to_write(&parent_prompt(LOOKUP, 3, false)), None);
    }

    #[test]
    fn a_prompt_names_its_role_and_lookup_and_others_are_not_the_phases() {
        let prompt = parent_prompt(LOOKUP, 7, false);
        assert_eq!(
            parse(&prompt),
            Some((Role::Parent, "fn main".to_owned(), "Cargo.toml".to_owned()))
        );
        let child = format!("<task>\n{CHILD}\ngrep: a b\nread: x/y.rs\n</task>");
        assert_eq!(
            parse(&child),
            Some((Role::Child, "a b".to_owned(), "x/y.rs".to_owned()))
        );
        assert_eq!(parse("bench no-op 3"), None);
        assert_eq!(parse(&format!("{PARENT} 1\ngrep: x")), None, "no file");
    }

    #[test]
    fn the_parent_delegates_the_child_looks_up_and_both_then_answer() {
        let parent = request(vec![message("user", &parent_prompt(LOOKUP, 0, false))]);
        let debug = format!("{:?}", reply(&parent).expect("a phase request"));
        assert!(
            debug.contains("\"task\"") && debug.contains("explore"),
            "{debug}"
        );
        assert!(
            debug.contains(CHILD) && debug.contains("fn main"),
            "{debug}"
        );

        let child = request(vec![message(
            "user",
            &format!("{CHILD}\ngrep: fn main\nread: Cargo.toml"),
        )]);
        let debug = format!("{:?}", reply(&child).expect("a phase request"));
        assert!(
            debug.contains("\"grep\"") && debug.contains("\"read\""),
            "{debug}"
        );
        assert!(debug.contains("Cargo.toml"), "{debug}");

        let mut later = child.clone();
        later.messages.push(message("assistant", ""));
        later
            .messages
            .push(message("tool", "src/main.rs:1: fn main() {}"));
        let debug = format!("{:?}", reply(&later).expect("a phase request"));
        assert!(
            debug.contains("done") && !debug.contains("\"grep\""),
            "{debug}"
        );

        assert!(reply(&request(vec![message("user", "bench no-op 1")])).is_none());
    }

    #[test]
    fn a_failed_tool_call_or_an_empty_grep_fails_the_check() {
        let answered = |tool: &str| {
            request(vec![
                message("user", &format!("{CHILD}\ngrep: x\nread: y")),
                message("assistant", ""),
                message("tool", tool),
            ])
        };
        assert_eq!(check(&[answered("a.rs:1: x")]).expect("fine"), 1);
        let err = check(&[answered("error: no such file y")]).expect_err("failed");
        assert!(format!("{err}").contains("call-grep"), "{err}");
        assert!(check(&[answered("no matches found")]).is_err());
        // Requests of other tasks are not the phase's to judge.
        let other = request(vec![
            message("user", "bench no-op 1"),
            message("assistant", ""),
            message("tool", "error: whatever"),
        ]);
        assert_eq!(check(&[other]).expect("not checked"), 0);
    }
}
