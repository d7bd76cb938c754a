//! A scripted OpenAI-compatible model for demos without a model endpoint.
//!
//! It plays one short agent session: grep the workspace for the first word of the
//! prompt that looks like an identifier (default `send_publish`), read the first file
//! found around the match, then answer with what it read. Everything it says comes from
//! real tool output. Prints its base URL on stdout and serves until killed.
//!
//! With `--tree` it plays [`taskwire_test_support::scripts::two_children`] instead: the
//! prompt `parent: two children` starts an `asker` child that needs an approval and an
//! `explore` child; any other prompt is answered `done: <prompt>` (what the SDKs' tests
//! and `scripts/dev-fleet.sh` use).
//!
//! Usage: `taskwire-scripted-model [PATTERN | --tree]`

use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

fn script(pattern: &str, req: &SeenRequest) -> ScriptedReply {
    let last_tool = req
        .messages
        .iter()
        .rev()
        .find(|m| m.role == "tool")
        .map(|m| m.content.as_str())
        .unwrap_or("");
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([("call_grep", "grep", serde_json::json!({ "pattern": pattern }))])
            .with_text(format!("Let me search the workspace for `{pattern}`.")),
        1 => match first_hit(last_tool) {
            Some((path, line)) => ScriptedReply::tool_calls([(
                "call_read",
                "read",
                serde_json::json!({ "filePath": path, "offset": line.saturating_sub(3).max(1), "limit": 12 }),
            )])
            .with_text(format!("`{pattern}` appears in {path} at line {line}; reading around it.")),
            None => ScriptedReply::text(format!("`{pattern}` does not appear in the workspace.")),
        },
        _ => {
            let excerpt: Vec<&str> = last_tool.lines().take(12).collect();
            ScriptedReply::text(format!(
                "Here is where `{pattern}` is used (from the read tool):\n\n{}\n\n(This answer comes from the \
                 scripted demo model; set TASKWIRE_MODEL_BASE_URL to use a real one.)",
                excerpt.join("\n")
            ))
        }
    }
}

/// The first `path:line: text` match of grep output.
fn first_hit(grep_output: &str) -> Option<(String, usize)> {
    grep_output.lines().find_map(|l| {
        let (path, rest) = l.split_once(':')?;
        let (line, _) = rest.split_once(':')?;
        Some((path.to_owned(), line.trim().parse().ok()?))
    })
}

#[tokio::main]
async fn main() {
    let pattern = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "send_publish".to_owned());
    let model = if pattern == "--tree" {
        ScriptedModel::start(taskwire_test_support::scripts::two_children).await
    } else {
        ScriptedModel::start(move |req: &SeenRequest| script(&pattern, req)).await
    };
    println!("{}", model.base_url());
    // Serve until the process is killed.
    std::future::pending::<()>().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_hit_reads_grep_lines() {
        let out = "found 2 matches\n\ncrates/a.rs:12:     js.send_publish(x)\ncrates/b.rs:3: y\n";
        assert_eq!(first_hit(out), Some(("crates/a.rs".to_owned(), 12)));
        assert_eq!(first_hit("no matches found"), None);
    }
}
