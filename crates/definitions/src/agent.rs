//! Agent specifications: who an agent is (persona), what it may call (tools), how far
//! it may go (permission rules) and when it must stop (`max_steps`).
//!
//! An [`AgentSpec`] is plain data. The coordinator resolves it once and ships it to the
//! worker inside the task envelope, so every worker runs the same definition.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::InvalidName;
use crate::permission::{PermissionRule, wildcard_match};

/// Longest accepted agent name; long enough for descriptive names, short enough for a
/// metric label or a subject token.
const MAX_NAME_LEN: usize = 64;

/// A validated agent name: 1..=64 of `a-z`, `0-9`, `-`, `_`.
///
/// The alphabet is narrow on purpose: names end up in file names
/// (`.taskwire/agents/<name>.md`), NATS subjects and metric labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AgentName(String);

impl AgentName {
    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn validate(name: &str) -> Result<(), InvalidName> {
        let invalid = |reason| InvalidName {
            name: name.to_owned(),
            reason,
        };
        if name.is_empty() {
            return Err(invalid("it is empty"));
        }
        if name.len() > MAX_NAME_LEN {
            return Err(invalid("it is longer than 64 characters"));
        }
        let allowed =
            |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
        if !name.chars().all(allowed) {
            return Err(invalid(
                "only lowercase ascii letters, digits, '-' and '_' are allowed",
            ));
        }
        Ok(())
    }
}

impl FromStr for AgentName {
    type Err = InvalidName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::validate(s)?;
        Ok(Self(s.to_owned()))
    }
}

impl TryFrom<String> for AgentName {
    type Error = InvalidName;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::validate(&s)?;
        Ok(Self(s))
    }
}

impl From<AgentName> for String {
    fn from(name: AgentName) -> Self {
        name.0
    }
}

impl fmt::Display for AgentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for AgentName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// The kind of model an agent runs on when neither the request nor the agent names
/// one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelTier {
    /// The parent's model (a root task: the worker's default).
    #[default]
    Default,
    /// The small model (the agent's `small_model`, else the worker's `--small-model`)
    /// when there is one, else as `Default`: for agents whose work a cheaper model does
    /// as well, like neovate's `smallModel` for its explore agent.
    Small,
}

impl ModelTier {
    fn is_default(&self) -> bool {
        *self == Self::Default
    }
}

/// Where an agent may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentMode {
    /// Talks to the user directly; never started by the `task` tool.
    Primary,
    /// Only started by another agent (the `task` tool or a slash command).
    Subagent,
    /// Either.
    All,
}

impl AgentMode {
    /// Whether another agent may delegate to an agent of this mode.
    pub fn is_subagent(self) -> bool {
        matches!(self, Self::Subagent | Self::All)
    }
}

/// A complete, resolved agent definition.
///
/// Shipped between processes as JSON (and later in the proto envelope); optional
/// fields are omitted when unset so that specs stay small on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentSpec {
    pub name: AgentName,
    /// One line shown to a parent model choosing a subagent, and in listings.
    pub description: String,
    pub mode: AgentMode,
    /// Hidden agents can be called by name but are not listed.
    #[serde(default)]
    pub hidden: bool,
    /// The system prompt.
    pub prompt: String,
    /// Allow-list of tool names; wildcards (`*`, `?`) allowed, and an entry starting
    /// with `!` excludes: `["*", "!write", "!mcp_*"]` is every tool but `write` and
    /// the `mcp_` ones. The last matching entry decides; nothing matching excludes.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Permission rules, evaluated last-match-wins (see [`crate::permission`]).
    #[serde(default)]
    pub permission: Vec<PermissionRule>,
    /// Upper bound of model calls in one session; the last one may not call tools.
    pub max_steps: u32,
    /// Model override (`provider/model` or a bare model id); `None` inherits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The kind of model to run on when neither the request nor `model` names one.
    #[serde(default, skip_serializing_if = "ModelTier::is_default")]
    pub model_tier: ModelTier,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// The model of this agent's side calls (its sessions' titles, and summaries when
    /// the worker compacts with the small model); `None`: the worker's `--small-model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub small_model: Option<String>,
    /// How hard a reasoning model thinks before it answers (OpenAI's
    /// `reasoning_effort`: `minimal`, `low`, `medium`, `high`); `None`: the model's
    /// default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Tokens an Anthropic model may think for before each answer (extended
    /// thinking, at least 1,024); `None`: no extended thinking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// Display colour for UIs, e.g. `#38bdf8`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// Hooks run around this agent's sessions (frontmatter `hooks`). In a task's
    /// envelope: the definitions directories' `hooks.json` first, then these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<crate::hooks::Hook>,
}

impl AgentSpec {
    /// Whether the allow-list enables `tool`: the last entry matching it (directly or
    /// by wildcard) is not an `!` exclusion.
    ///
    /// This is only the allow-list; permission rules can still disable the tool (see
    /// [`crate::permission::is_disabled`]).
    pub fn lists_tool(&self, tool: &str) -> bool {
        self.tools
            .iter()
            .rev()
            .find_map(|entry| match entry.strip_prefix('!') {
                Some(pattern) => wildcard_match(pattern, tool).then_some(false),
                None => wildcard_match(entry, tool).then_some(true),
            })
            .unwrap_or(false)
    }

    /// Whether the allow-list enables `tool` and names it literally, not only by a
    /// wildcard: how an agent opts in to tools that children do not get by default
    /// (see [`crate::policy::child_tools_policy`]).
    pub fn names_tool(&self, tool: &str) -> bool {
        self.lists_tool(tool) && self.tools.iter().any(|entry| entry == tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permission::PermissionAction;

    #[test]
    fn valid_names_parse() {
        for name in ["general", "explore", "code-review_2", "a", &"x".repeat(64)] {
            let parsed: AgentName = name.parse().expect("valid name");
            assert_eq!(parsed.as_str(), name);
            assert_eq!(parsed.to_string(), name);
        }
    }

    #[test]
    fn invalid_names_are_rejected_with_the_reason() {
        for name in [
            "",
            "Explore",
            "with space",
            "dot.name",
            "ünï",
            &"x".repeat(65),
        ] {
            let err = name.parse::<AgentName>().expect_err("invalid name");
            assert!(err.to_string().starts_with("invalid agent name"), "{err}");
        }
    }

    #[test]
    fn spec_round_trips_through_json_and_rejects_bad_names() {
        let spec = AgentSpec {
            name: "explore".parse().expect("valid name"),
            description: "d".into(),
            mode: AgentMode::Subagent,
            hidden: false,
            prompt: "p".into(),
            tools: vec!["read".into(), "g*".into()],
            permission: vec![PermissionRule::new("edit", "*", PermissionAction::Deny)],
            max_steps: 10,
            model: None,
            model_tier: ModelTier::Default,
            temperature: Some(0.2),
            top_p: None,
            color: None,
            reasoning_effort: None,
            small_model: None,
            thinking_budget: None,
            hooks: Vec::new(),
        };
        let json = serde_json::to_string(&spec).expect("serializable");
        assert!(!json.contains("top_p"), "unset options are omitted: {json}");
        let back: AgentSpec = serde_json::from_str(&json).expect("round trip");
        assert_eq!(back, spec);

        let bad = json.replace("\"explore\"", "\"Bad Name\"");
        assert!(serde_json::from_str::<AgentSpec>(&bad).is_err());
    }

    #[test]
    fn allow_list_matches_wildcards() {
        let mut spec = crate::builtin::general();
        spec.tools = vec!["g*".into(), "read".into()];
        assert!(spec.lists_tool("grep"));
        assert!(spec.lists_tool("glob"));
        assert!(spec.lists_tool("read"));
        assert!(!spec.lists_tool("list"));
    }

    #[test]
    fn exclusions_win_when_they_come_last() {
        let mut spec = crate::builtin::general();
        spec.tools = vec![
            "*".into(),
            "!write".into(),
            "!mcp_*".into(),
            "mcp_git".into(),
        ];
        assert!(spec.lists_tool("read"));
        assert!(!spec.lists_tool("write"));
        assert!(!spec.lists_tool("mcp_fs"));
        assert!(spec.lists_tool("mcp_git"));
        spec.tools = vec!["read".into(), "!*".into()];
        assert!(!spec.lists_tool("read"));
    }

    #[test]
    fn only_literal_entries_name_a_tool() {
        let mut spec = crate::builtin::general();
        spec.tools = vec!["*".into(), "task".into()];
        assert!(spec.names_tool("task"));
        assert!(!spec.names_tool("todowrite"), "a wildcard is not a name");
        spec.tools = vec!["task".into(), "!t*".into()];
        assert!(!spec.names_tool("task"), "excluded after being named");
        spec.tools = vec!["task".into(), "t*".into()];
        assert!(spec.names_tool("task"));
    }
}
