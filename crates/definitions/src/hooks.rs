//! Hooks: an operator's or agent author's own checks around the agent, declared in
//! Claude Code's settings shape so that a user can copy theirs.
//!
//! ```json
//! {"hooks": {
//!   "PreToolUse": [{"matcher": "bash", "hooks": [{"type": "command", "command": "./check.sh", "timeout": 10}]}],
//!   "PostToolUse": [{"matcher": "edit|write", "hooks": [{"type": "http", "url": "https://hooks.example.com/lint"}]}],
//!   "Stop": [{"hooks": [{"type": "command", "command": "make -q test || echo tests fail >&2; exit 2"}]}]
//! }}
//! ```
//!
//! Each definitions directory may hold a `hooks.json`; an agent file may give the same
//! `hooks` value in its frontmatter. A session runs the directories' hooks in directory
//! order, then its agent's. Nothing replaces anything: hooks add up, like Claude Code's
//! settings files.
//!
//! A matcher is `|`-separated patterns (`*` and `?` wildcards; Claude Code's `.*` reads
//! as `*`), compared without regard to case, so `Bash` and `Edit|Write` match the
//! tools `bash`, `edit` and `write`; empty or `*` matches everything. It is matched
//! against the tool's name (`PreToolUse`, `PostToolUse`), how the session started
//! (`SessionStart`: `startup` or `resume`), the subagent's name (`SubagentStop`) and
//! what triggered a compaction (`PreCompact`: `auto`); `Stop` has none.
//!
//! What a hook is given and may answer is the agent crate's (`taskwire_agent::hooks`).

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::LoadError;

/// A hook's timeout when its definition gives none.
pub const DEFAULT_TIMEOUT_SECS: u32 = 60;
/// The longest timeout a hook may ask for.
pub const MAX_TIMEOUT_SECS: u32 = 600;

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HookEvent {
    /// Before a tool call runs (after the permission rules allowed it): may deny it
    /// with a reason the model reads, or rewrite its input.
    PreToolUse,
    /// After a tool call returned: may add to the result the model reads.
    PostToolUse,
    /// When a session run starts: may add context to the system prompt.
    SessionStart,
    /// When a root task's session is about to answer: may ask it to go on, once.
    Stop,
    /// [`HookEvent::Stop`] for a child task's session (a subagent).
    SubagentStop,
    /// Before the older turns are summarised.
    PreCompact,
}

impl HookEvent {
    pub const ALL: [HookEvent; 6] = [
        Self::PreToolUse,
        Self::PostToolUse,
        Self::SessionStart,
        Self::Stop,
        Self::SubagentStop,
        Self::PreCompact,
    ];

    /// The name as `hooks.json` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::SessionStart => "SessionStart",
            Self::Stop => "Stop",
            Self::SubagentStop => "SubagentStop",
            Self::PreCompact => "PreCompact",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == name)
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a hook runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum HookAction {
    /// A `bash -c` command in the task's workspace, under the sandbox of `bash`: the
    /// event as JSON on stdin, its answer on stdout and in its exit code.
    Command { command: String },
    /// A POST of the event as JSON; the response body is the answer. Only to a URL
    /// the worker allows (`hook_urls`).
    Http {
        url: String,
        /// Sent with the request, sorted; values may hold `{env:VAR}`, read from the
        /// worker's environment.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        headers: Vec<(String, String)>,
    },
}

/// One declared hook.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Hook {
    pub event: HookEvent,
    /// `|`-separated wildcard patterns; empty matches everything.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub matcher: String,
    pub action: HookAction,
    /// Seconds; `None`: [`DEFAULT_TIMEOUT_SECS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u32>,
    /// Where it was declared (`hooks.json` of a directory, or `agent NAME`), for
    /// reports.
    #[serde(default)]
    pub source: String,
}

impl Hook {
    /// Whether it runs for `subject` (a tool's name, a start's source, ...); a
    /// [`HookEvent::Stop`] hook runs whatever its matcher says.
    pub fn matches(&self, subject: &str) -> bool {
        if self.event == HookEvent::Stop {
            return true;
        }
        matcher_matches(&self.matcher, subject)
    }

    pub fn timeout_secs(&self) -> u32 {
        self.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS)
    }

    /// The command or the URL: what a report names.
    pub fn label(&self) -> &str {
        match &self.action {
            HookAction::Command { command } => command,
            HookAction::Http { url, .. } => url,
        }
    }
}

/// Whether `matcher` matches `subject` (see the module's documentation).
pub fn matcher_matches(matcher: &str, subject: &str) -> bool {
    let matcher = matcher.trim();
    if matcher.is_empty() {
        return true;
    }
    let subject = subject.to_ascii_lowercase();
    matcher.split('|').any(|alternative| {
        let pattern = alternative.trim().replace(".*", "*").to_ascii_lowercase();
        crate::permission::wildcard_match(&pattern, &subject)
    })
}

/// The hooks of every layer, in the order they run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hooks(Vec<Hook>);

impl Hooks {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn list(&self) -> &[Hook] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn extend(&mut self, hooks: impl IntoIterator<Item = Hook>) {
        self.0.extend(hooks);
    }
}

/// Reads `dir/hooks.json` after `base`. A missing file changes nothing; a file that is
/// not of this shape, or has one bad hook, is one error and adds nothing (a check that
/// half loads is worse than none that loads).
pub fn load_hooks(dir: &Path, base: Hooks) -> (Hooks, Vec<LoadError>) {
    let path = dir.join("hooks.json");
    let file = path.display().to_string();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (base, Vec::new()),
        Err(e) => {
            let error = LoadError {
                file,
                key: None,
                message: format!("failed to read: {e}"),
            };
            return (base, vec![error]);
        }
    };
    let mut hooks = base;
    match parse_hooks_file(&file, &text) {
        Ok(found) => {
            hooks.extend(found);
            (hooks, Vec::new())
        }
        Err(error) => (hooks, vec![error]),
    }
}

/// The hooks of the text of a `hooks.json` named `file`.
pub fn parse_hooks_file(file: &str, text: &str) -> Result<Vec<Hook>, LoadError> {
    let fail = |key: Option<String>, message: String| LoadError {
        file: file.to_owned(),
        key,
        message,
    };
    let value: Value = serde_json::from_str(text).map_err(|e| {
        fail(
            None,
            format!("not JSON ({{\"hooks\": {{EVENT: [...]}}}}): {e}"),
        )
    })?;
    let Value::Object(top) = value else {
        return Err(fail(None, "expected an object: {\"hooks\": {...}}".into()));
    };
    let mut hooks = Vec::new();
    for (key, value) in top {
        match key.as_str() {
            "hooks" => {
                hooks = parse_hooks(&value, file).map_err(|(key, m)| fail(Some(key), m))?;
            }
            "$schema" => {}
            other => {
                return Err(fail(
                    Some(other.to_owned()),
                    "unknown key; expected hooks".into(),
                ));
            }
        }
    }
    Ok(hooks)
}

/// The hooks of a `hooks` value (`{EVENT: [{matcher, hooks: [...]}]}`), from `source`;
/// `Err` is the dotted key at fault and why.
pub fn parse_hooks(value: &Value, source: &str) -> Result<Vec<Hook>, (String, String)> {
    let Value::Object(events) = value else {
        return Err((
            "hooks".into(),
            "expected a map of events to lists of matchers".into(),
        ));
    };
    let mut hooks = Vec::new();
    for (name, groups) in events {
        let key = format!("hooks.{name}");
        let event = HookEvent::parse(name).ok_or_else(|| {
            let known = HookEvent::ALL.map(HookEvent::as_str).join(", ");
            (
                key.clone(),
                format!("unknown event; expected one of {known}"),
            )
        })?;
        let Value::Array(groups) = groups else {
            return Err((key, "expected a list of {matcher, hooks}".into()));
        };
        for (i, group) in groups.iter().enumerate() {
            let key = format!("{key}[{i}]");
            let Value::Object(group) = group else {
                return Err((key, "expected {\"matcher\": ..., \"hooks\": [...]}".into()));
            };
            let mut matcher = String::new();
            let mut handlers = None;
            for (field, value) in group {
                match field.as_str() {
                    "matcher" => {
                        matcher = value
                            .as_str()
                            .ok_or_else(|| (format!("{key}.matcher"), "expected a string".into()))?
                            .to_owned();
                    }
                    "hooks" => handlers = Some(value),
                    other => {
                        return Err((
                            format!("{key}.{other}"),
                            "unknown key; expected matcher, hooks".into(),
                        ));
                    }
                }
            }
            let Some(Value::Array(handlers)) = handlers else {
                return Err((format!("{key}.hooks"), "expected a list of hooks".into()));
            };
            for (j, handler) in handlers.iter().enumerate() {
                let key = format!("{key}.hooks[{j}]");
                let (action, timeout_secs) = handler_of(handler).map_err(|m| (key, m))?;
                hooks.push(Hook {
                    event,
                    matcher: matcher.clone(),
                    action,
                    timeout_secs,
                    source: source.to_owned(),
                });
            }
        }
    }
    Ok(hooks)
}

/// One `{"type": ..., ...}` entry.
fn handler_of(value: &Value) -> Result<(HookAction, Option<u32>), String> {
    let Value::Object(fields) = value else {
        return Err("expected {\"type\": \"command\", \"command\": ...}".into());
    };
    let text = |name: &str| -> Result<Option<String>, String> {
        match fields.get(name) {
            None => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
            Some(_) => Err(format!("`{name}` must be a non-empty string")),
        }
    };
    let kind = text("type")?.ok_or("`type` is required: command or http")?;
    let allowed: &[&str] = match kind.as_str() {
        "command" => &["type", "command", "timeout"],
        "http" => &["type", "url", "headers", "timeout"],
        other => return Err(format!("unknown type `{other}`; expected command or http")),
    };
    if let Some(extra) = fields.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!(
            "unknown key `{extra}` for a {kind} hook; expected {}",
            allowed.join(", ")
        ));
    }
    let timeout = match fields.get("timeout") {
        None => None,
        Some(t) => Some(
            t.as_u64()
                .and_then(|t| u32::try_from(t).ok())
                .filter(|t| (1..=MAX_TIMEOUT_SECS).contains(t))
                .ok_or_else(|| {
                    format!("`timeout` must be a number of seconds, 1 to {MAX_TIMEOUT_SECS}")
                })?,
        ),
    };
    let action = if kind == "command" {
        HookAction::Command {
            command: text("command")?.ok_or("`command` is required")?,
        }
    } else {
        let url = text("url")?.ok_or("`url` is required")?;
        let parsed = url::Url::parse(&url).map_err(|e| format!("`url` is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("`url` must be http or https".into());
        }
        let mut headers = Vec::new();
        match fields.get("headers") {
            None => {}
            Some(Value::Object(map)) => {
                for (name, value) in map {
                    let value = value
                        .as_str()
                        .ok_or_else(|| format!("header `{name}` must be a string"))?;
                    headers.push((name.clone(), value.to_owned()));
                }
            }
            Some(_) => return Err("`headers` must be a map of names to values".into()),
        }
        headers.sort();
        HookAction::Http { url, headers }
    };
    Ok((action, timeout))
}

#[cfg(test)]
mod tests;
