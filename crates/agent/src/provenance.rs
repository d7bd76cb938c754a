//! Provenance: what a session drew on — the files it read, the URLs it fetched, the
//! commands it ran — for `TaskResult.provenance`.
//!
//! Sources are read from the session's record after it ran (the tool calls that
//! succeeded: `read`, `grep` (one per matching file), `glob`, `webfetch`, `bash`, and
//! each MCP tool as `mcp`, its uri the tool's name and arguments), and
//! added by the worker for what it put in the first message itself (`@path` mentions
//! and file context refs as `file`, a command template's !`cmd` as `command`). Each
//! `(source, uri)` appears once, in the order first used; the list is bounded by
//! [`MAX_SOURCES`] and each excerpt by [`MAX_EXCERPT_CHARS`]. A call that failed drew
//! on nothing and is left out (a denied command never ran); a command that ran and
//! exited non-zero is in.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::transcript::{Part, TranscriptMessage};

/// Most sources a result lists.
pub const MAX_SOURCES: usize = 100;
/// Most characters of one excerpt.
pub const MAX_EXCERPT_CHARS: usize = 200;
/// Most characters of an MCP call's uri (its tool name and arguments).
pub const MAX_MCP_URI_CHARS: usize = 300;

/// One thing the session drew on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// `read`, `grep`, `glob`, `file`, `webfetch`, `bash`, `command` or `mcp`.
    pub source: String,
    /// The workspace-relative path, the URL, the command line, or an MCP tool's name
    /// and arguments (`NAME_TOOL {"a":1}`, at most [`MAX_MCP_URI_CHARS`]).
    pub uri: String,
    /// A short, single-line piece of what came back.
    pub excerpt: String,
}

/// Sources gathered so far: de-duplicated, bounded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    list: Vec<Source>,
    /// Sources left out once the list was full.
    dropped: usize,
}

impl Sources {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a source unless the same `(source, uri)` is there already or the list is
    /// full.
    pub fn add(&mut self, source: &str, uri: &str, excerpt: &str) {
        let uri = uri.trim();
        if uri.is_empty() || self.list.iter().any(|s| s.source == source && s.uri == uri) {
            return;
        }
        if self.list.len() >= MAX_SOURCES {
            self.dropped += 1;
            return;
        }
        self.list.push(Source {
            source: source.to_owned(),
            uri: uri.to_owned(),
            excerpt: excerpt_of(excerpt),
        });
    }

    /// Adds what the successful tool calls of `messages` read, fetched and ran;
    /// `is_mcp` tells the tools served over MCP.
    pub fn add_tool_calls(
        &mut self,
        messages: &[TranscriptMessage],
        is_mcp: impl Fn(&str) -> bool,
    ) {
        for part in messages.iter().flat_map(|m| &m.parts) {
            let Part::ToolCall {
                tool,
                input,
                output: Some(output),
                ..
            } = part
            else {
                continue;
            };
            let arg = |name: &str| input.get(name).and_then(Value::as_str).unwrap_or_default();
            match tool.as_str() {
                "read" => self.add("read", arg("filePath"), output),
                "webfetch" => self.add("webfetch", arg("url"), output),
                "bash" => self.add("bash", arg("command"), output),
                "glob" => {
                    let pattern = match arg("path") {
                        "" | "." => arg("pattern").to_owned(),
                        path => format!("{}/{}", path.trim_end_matches('/'), arg("pattern")),
                    };
                    self.add("glob", &pattern, output);
                }
                "grep" => {
                    for (path, line) in grep_matches(output) {
                        self.add("grep", path, line);
                    }
                }
                name if is_mcp(name) => {
                    let uri = format!("{name} {input}");
                    let uri: String = uri.chars().take(MAX_MCP_URI_CHARS).collect();
                    self.add("mcp", &uri, output);
                }
                _ => {}
            }
        }
    }

    /// How many sources were left out because the list was full.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    pub fn into_vec(self) -> Vec<Source> {
        self.list
    }
}

/// `(path, text)` of each `path:line: text` line of a `grep` result.
fn grep_matches(output: &str) -> impl Iterator<Item = (&str, &str)> {
    output.lines().filter_map(|line| {
        // The path may hold colons; the line number is the first all-digit field.
        let mut from = 0;
        while let Some(offset) = line[from..].find(':') {
            let colon = from + offset;
            let rest = &line[colon + 1..];
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 && rest[digits..].starts_with(": ") {
                return Some((&line[..colon], &rest[digits + 2..]));
            }
            from = colon + 1;
        }
        None
    })
}

/// `text` on one line, cut to [`MAX_EXCERPT_CHARS`] characters.
fn excerpt_of(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(MAX_EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(tool: &str, input: Value, result: Result<&str, &str>) -> Part {
        Part::tool_call(
            "c",
            tool,
            input,
            tool,
            result.map(str::to_owned).map_err(str::to_owned),
        )
    }

    #[test]
    fn successful_reads_fetches_and_commands_are_listed_once_in_order() {
        let message = TranscriptMessage::assistant(
            "build",
            vec![
                call("read", json!({"filePath": "src/a.rs"}), Ok("fn a() {}")),
                call(
                    "bash",
                    json!({"command": "git log -1"}),
                    Ok("commit 1\n(exit code 0)"),
                ),
                call("read", json!({"filePath": "src/a.rs"}), Ok("fn a() {}")),
                call("webfetch", json!({"url": "http://x/doc"}), Ok("the doc")),
                call(
                    "bash",
                    json!({"command": "rm -rf /"}),
                    Err("permission denied"),
                ),
                call("todowrite", json!({}), Ok("ok")),
            ],
        );
        let mut sources = Sources::new();
        sources.add_tool_calls(&[message], |_| false);
        let got: Vec<(String, String)> = sources
            .into_vec()
            .into_iter()
            .map(|s| (s.source, s.uri))
            .collect();
        assert_eq!(
            got,
            [
                ("read".to_owned(), "src/a.rs".to_owned()),
                ("bash".into(), "git log -1".into()),
                ("webfetch".into(), "http://x/doc".into()),
            ]
        );
    }

    #[test]
    fn grep_lists_each_matching_file_with_its_first_line() {
        let output = "found 3 matches\n\nsrc/a:b.rs:3: // TODO: x\nsrc/a:b.rs:9: // TODO: y\nnotes.md:1: TODO\n";
        let message = TranscriptMessage::assistant(
            "build",
            vec![call("grep", json!({"pattern": "TODO"}), Ok(output))],
        );
        let mut sources = Sources::new();
        sources.add_tool_calls(&[message], |_| false);
        let got = sources.into_vec();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].uri.as_str(), got[0].excerpt.as_str()),
            ("src/a:b.rs", "// TODO: x")
        );
        assert_eq!(got[1].uri, "notes.md");
    }

    #[test]
    fn a_successful_mcp_call_is_listed_with_its_tool_and_arguments() {
        let message = TranscriptMessage::assistant(
            "build",
            vec![
                call("everything_echo", json!({"message": "hi"}), Ok("Echo: hi")),
                call("everything_fail", json!({}), Err("the server failed")),
                call("todowrite", json!({}), Ok("ok")),
                call("docs_search", json!({"q": "x".repeat(1000)}), Ok("found")),
            ],
        );
        let mut sources = Sources::new();
        sources.add_tool_calls(&[message], |name| name.contains('_'));
        let got = sources.into_vec();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(
            (
                got[0].source.as_str(),
                got[0].uri.as_str(),
                got[0].excerpt.as_str()
            ),
            ("mcp", r#"everything_echo {"message":"hi"}"#, "Echo: hi")
        );
        assert_eq!(got[1].uri.chars().count(), MAX_MCP_URI_CHARS);
        assert!(got[1].uri.starts_with("docs_search {"), "{}", got[1].uri);
    }

    #[test]
    fn the_list_and_its_excerpts_are_bounded() {
        let mut sources = Sources::new();
        for i in 0..MAX_SOURCES + 5 {
            sources.add("read", &format!("f{i}"), &"word ".repeat(100));
        }
        assert_eq!(sources.dropped(), 5);
        let list = sources.into_vec();
        assert_eq!(list.len(), MAX_SOURCES);
        assert_eq!(list[0].excerpt.chars().count(), MAX_EXCERPT_CHARS + 1);
        assert!(!list[0].excerpt.contains('\n'));
    }
}
