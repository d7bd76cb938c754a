//! Built-in agents and the registry that holds agents by name.
//!
//! Built-ins are data, like user agents: the coming markdown loader
//! (`.taskwire/agents/*.md`) inserts specs into the same [`AgentRegistry`], replacing a
//! built-in of the same name or removing it (`disable: true`).

use std::collections::BTreeMap;

use crate::agent::{AgentMode, AgentName, AgentSpec};
use crate::permission::{PermissionAction, PermissionRule};

const GENERAL_PROMPT: &str = include_str!("prompt/general.txt");
const EXPLORE_PROMPT: &str = include_str!("prompt/explore.txt");

/// The read-only tools every built-in subagent gets today.
const READ_ONLY_TOOLS: [&str; 4] = ["read", "list", "glob", "grep"];

fn name(name: &str) -> AgentName {
    name.parse().expect("built-in agent names are valid")
}

fn tools(names: &[&str]) -> Vec<String> {
    names.iter().map(|&name| name.to_owned()).collect()
}

/// `general`: a general-purpose subagent for multi-step research and tasks.
pub fn general() -> AgentSpec {
    AgentSpec {
        name: name("general"),
        description: "General-purpose agent for researching complex questions and executing \
                      multi-step tasks. Use it to search for code or answers when you are not \
                      confident you will find them in the first few tries."
            .to_owned(),
        mode: AgentMode::Subagent,
        hidden: false,
        prompt: GENERAL_PROMPT.to_owned(),
        // Grows with the tool set (edit, write, bash); todo and task stay off for
        // children by the worker's rule, not by this list.
        tools: tools(&READ_ONLY_TOOLS),
        permission: Vec::new(),
        max_steps: 50,
        model: None,
        temperature: None,
        top_p: None,
        color: None,
    }
}

/// `explore`: a fast, read-only codebase search subagent.
pub fn explore() -> AgentSpec {
    AgentSpec {
        name: name("explore"),
        description: "Fast agent specialised in exploring codebases: find files by pattern, \
                      search code for keywords, answer questions about how the code works. \
                      Read-only. Say how thorough it should be: quick, medium or very thorough."
            .to_owned(),
        mode: AgentMode::Subagent,
        hidden: false,
        prompt: EXPLORE_PROMPT.to_owned(),
        tools: tools(&READ_ONLY_TOOLS),
        // The allow-list already leaves out editing tools; the rules make read-only a
        // property of the agent that survives a wider allow-list (`tools: ["*"]` in a
        // user override).
        permission: vec![
            PermissionRule::new("edit", "*", PermissionAction::Deny),
            PermissionRule::new("write", "*", PermissionAction::Deny),
        ],
        // Searching should converge quickly; a longer hunt is a sign the question
        // should be split.
        max_steps: 30,
        model: None,
        temperature: None,
        top_p: None,
        color: None,
    }
}

/// Agents by name.
#[derive(Debug, Clone, Default)]
pub struct AgentRegistry {
    // Ordered so that listings (and the `task` tool description built from them) are
    // stable.
    agents: BTreeMap<AgentName, AgentSpec>,
}

impl AgentRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in agents: `general` and `explore`.
    pub fn builtin() -> Self {
        let mut registry = Self::new();
        registry.insert(general());
        registry.insert(explore());
        registry
    }

    /// Adds `spec`, returning the agent it replaced (user config overrides built-ins).
    pub fn insert(&mut self, spec: AgentSpec) -> Option<AgentSpec> {
        self.agents.insert(spec.name.clone(), spec)
    }

    /// Removes an agent (`disable: true` in user config).
    pub fn remove(&mut self, name: &AgentName) -> Option<AgentSpec> {
        self.agents.remove(name)
    }

    pub fn get(&self, name: &AgentName) -> Option<&AgentSpec> {
        self.agents.get(name)
    }

    /// Agents in name order; hidden ones only if asked for (they stay callable by name).
    pub fn list(&self, include_hidden: bool) -> Vec<&AgentSpec> {
        self.agents
            .values()
            .filter(|spec| include_hidden || !spec.hidden)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permission::{evaluate, is_disabled};

    #[test]
    fn builtin_registry_lists_general_and_explore() {
        let registry = AgentRegistry::builtin();
        let names: Vec<_> = registry
            .list(false)
            .iter()
            .map(|spec| spec.name.as_str())
            .collect();
        assert_eq!(names, ["explore", "general"]);
        let explore = registry.get(&name("explore")).expect("explore is built in");
        assert_eq!(explore.mode, AgentMode::Subagent);
        assert!(registry.get(&name("build")).is_none());
    }

    #[test]
    fn explore_is_read_only_even_with_a_wider_allow_list() {
        let mut explore = explore();
        explore.tools = vec!["*".into()];
        assert!(is_disabled(&explore.permission, "edit"));
        assert!(is_disabled(&explore.permission, "write"));
        assert!(!is_disabled(&explore.permission, "read"));
        assert_eq!(
            evaluate(&explore.permission, "edit", "src/lib.rs"),
            PermissionAction::Deny
        );
        assert!(explore.prompt.contains("READ-ONLY"));
    }

    #[test]
    fn hidden_agents_are_callable_but_not_listed() {
        let mut registry = AgentRegistry::builtin();
        let mut summary = general();
        summary.name = name("summary");
        summary.hidden = true;
        assert!(registry.insert(summary).is_none());
        assert_eq!(registry.list(false).len(), 2);
        assert_eq!(registry.list(true).len(), 3);
        assert!(registry.get(&name("summary")).is_some());
    }

    #[test]
    fn insert_overrides_and_remove_disables() {
        let mut registry = AgentRegistry::builtin();
        let mut custom = explore();
        custom.max_steps = 5;
        let replaced = registry.insert(custom).expect("explore was built in");
        assert_eq!(replaced.max_steps, 30);
        assert_eq!(
            registry.get(&name("explore")).map(|spec| spec.max_steps),
            Some(5)
        );
        assert!(registry.remove(&name("general")).is_some());
        assert_eq!(registry.list(true).len(), 1);
    }
}
