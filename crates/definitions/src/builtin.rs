//! Built-in agents and the registry that holds agents by name.
//!
//! Built-ins are data, like user agents: the markdown loader
//! ([`crate::loader::load_agents`]) merges `.taskwire/agents/*.md` over them in the
//! same [`AgentRegistry`], overriding fields of a built-in of the same name or
//! removing it (`disable: true`).
//!
//! | agent | mode | tools | rules |
//! |---|---|---|---|
//! | `build` | primary | all | none |
//! | `plan` | all (primary, and a subagent) | all | `edit` denied; read-only bash allowed, other bash asks |
//! | `general` | subagent | all but the todo tools | none |
//! | `explore` | subagent, on the small model where there is one | read, list, glob, grep, webfetch, skill | `edit` and `bash` denied |
//! | `compaction`, `title` | primary, hidden | none | none |

use std::collections::BTreeMap;

use crate::agent::{AgentMode, AgentName, AgentSpec, ModelTier};
use crate::permission::{PermissionAction, PermissionRule};

const BUILD_PROMPT: &str = include_str!("prompt/build.txt");
const PLAN_PROMPT: &str = include_str!("prompt/plan.txt");
const GENERAL_PROMPT: &str = include_str!("prompt/general.txt");
const EXPLORE_PROMPT: &str = include_str!("prompt/explore.txt");
const COMPACTION_PROMPT: &str = include_str!("prompt/compaction.txt");
const TITLE_PROMPT: &str = include_str!("prompt/title.txt");

/// Bash commands `plan` may run without asking: they only read.
const PLAN_BASH_ALLOW: [&str; 21] = [
    "ls*",
    "cat*",
    "head*",
    "tail*",
    "wc*",
    "grep*",
    "rg*",
    "find*",
    "tree*",
    "pwd*",
    "file*",
    "stat*",
    "du*",
    "which*",
    "diff*",
    "cut*",
    "echo*",
    "git status*",
    "git diff*",
    "git log*",
    "git show*",
];

/// Ways the allowed commands can still write or run something: these ask again.
const PLAN_BASH_ASK_AGAIN: [&str; 10] = [
    "*>*",
    "find *-delete*",
    "find *-exec*",
    "find *-ok*",
    "find *-fprint*",
    "find *-fls*",
    "rg *--pre*",
    "git diff *--output*",
    "git log *--output*",
    "git show *--output*",
];

/// The steps a user agent gets when its file says nothing.
pub(crate) const DEFAULT_MAX_STEPS: u32 = 50;

fn name(name: &str) -> AgentName {
    name.parse().expect("built-in agent names are valid")
}

fn tools(names: &[&str]) -> Vec<String> {
    names.iter().map(|&name| name.to_owned()).collect()
}

fn spec(agent: &str, mode: AgentMode, description: &str, prompt: &str) -> AgentSpec {
    AgentSpec {
        name: name(agent),
        description: description.to_owned(),
        mode,
        hidden: false,
        prompt: prompt.to_owned(),
        tools: tools(&["*"]),
        permission: Vec::new(),
        max_steps: DEFAULT_MAX_STEPS,
        model: None,
        model_tier: ModelTier::Default,
        temperature: None,
        top_p: None,
        color: None,
        reasoning_effort: None,
        small_model: None,
        thinking_budget: None,
        hooks: Vec::new(),
    }
}

/// `build`: the default primary agent, with every tool and no restrictions.
pub fn build() -> AgentSpec {
    let mut build = spec(
        "build",
        AgentMode::Primary,
        "The default agent for building software and general coding tasks: reads, edits, \
         runs commands and delegates to subagents.",
        BUILD_PROMPT,
    );
    build.max_steps = 100;
    build
}

/// `plan`: an agent that explores and plans but does not change the workspace: `edit`
/// is denied, read-only bash commands are allowed and any other asks. Mode `all`: a
/// primary agent, and a subagent a parent can start with `task` (read-only there too).
pub fn plan() -> AgentSpec {
    let mut plan = spec(
        "plan",
        AgentMode::All,
        "Plans changes without making them: explores the code and writes a step-by-step \
         plan. Cannot edit files; shell commands other than read-only ones need approval.",
        PLAN_PROMPT,
    );
    plan.max_steps = 100;
    let rule =
        |permission: &str, pattern: &str, action| PermissionRule::new(permission, pattern, action);
    plan.permission = vec![
        rule("edit", "*", PermissionAction::Deny),
        rule("bash", "*", PermissionAction::Ask),
    ];
    plan.permission.extend(
        PLAN_BASH_ALLOW
            .iter()
            .map(|pattern| rule("bash", pattern, PermissionAction::Allow)),
    );
    plan.permission.extend(
        PLAN_BASH_ASK_AGAIN
            .iter()
            .map(|pattern| rule("bash", pattern, PermissionAction::Ask)),
    );
    plan
}

/// `general`: a general-purpose subagent for multi-step research and tasks.
pub fn general() -> AgentSpec {
    let mut general = spec(
        "general",
        AgentMode::Subagent,
        "General-purpose agent for researching complex questions and executing \
         multi-step tasks. Use it to search for code or answers when you are not \
         confident you will find them in the first few tries, or to run a self-contained \
         piece of work in parallel.",
        GENERAL_PROMPT,
    );
    // The todo list is the delegating agent's plan, not the helper's.
    general.tools = tools(&["*", "!todowrite", "!todoread"]);
    general
}

/// `explore`: a fast, read-only codebase search subagent.
pub fn explore() -> AgentSpec {
    let mut explore = spec(
        "explore",
        AgentMode::Subagent,
        "Fast agent specialised in exploring codebases: find files by pattern, search \
         code for keywords, answer questions about how the code works. Read-only. Say how \
         thorough it should be: quick, medium or very thorough.",
        EXPLORE_PROMPT,
    );
    // `skill` only reads: a skill's instructions and files.
    explore.tools = tools(&["read", "list", "glob", "grep", "webfetch", "skill"]);
    // The allow-list already leaves out editing tools; the rules make read-only a
    // property of the agent that survives a wider allow-list (`tools: {"*": true}` in
    // a user override).
    explore.permission = vec![
        PermissionRule::new("edit", "*", PermissionAction::Deny),
        PermissionRule::new("bash", "*", PermissionAction::Deny),
    ];
    // Searching should converge quickly; a longer hunt is a sign the question should
    // be split.
    explore.max_steps = 30;
    // Reading and searching need no big model: the small one, where the worker or the
    // agent names one (neovate's explore runs on its `smallModel`).
    explore.model_tier = ModelTier::Small;
    explore
}

/// The internal agents: the worker runs them itself (compacting and titling a
/// session), never as a task; a submit or a delegation naming one is
/// refused.
pub const INTERNAL_AGENTS: [&str; 2] = ["compaction", "title"];

/// Whether `name` is one of the [`INTERNAL_AGENTS`].
pub fn is_internal(name: &AgentName) -> bool {
    INTERNAL_AGENTS.contains(&name.as_str())
}

/// A hidden, tool-less agent that answers in one step.
fn internal(agent: &str, description: &str, prompt: &str) -> AgentSpec {
    let mut internal = spec(agent, AgentMode::Primary, description, prompt);
    internal.hidden = true;
    internal.tools = Vec::new();
    internal.max_steps = 1;
    internal
}

/// `compaction` (hidden): summarises a long session so it can continue in less
/// context.
pub fn compaction() -> AgentSpec {
    internal(
        "compaction",
        "Summarises a long session into a context another run can continue from.",
        COMPACTION_PROMPT,
    )
}

/// `title` (hidden): names a session from its first message.
pub fn title() -> AgentSpec {
    internal("title", "Writes a short title for a session.", TITLE_PROMPT)
}

/// Agents by name.
#[derive(Debug, Clone, Default)]
pub struct AgentRegistry {
    // Ordered so that listings (and the `task` tool description built from them) are
    // stable.
    agents: BTreeMap<AgentName, AgentSpec>,
    /// The MCP servers of the same definitions directories (`mcp.json`), shipped with
    /// every agent's spec.
    mcp: crate::mcp::McpServers,
    /// The skills of the same definitions directories, shipped with every agent's
    /// spec.
    skills: crate::skill::Skills,
    /// The hooks of the same definitions directories (`hooks.json`), shipped with
    /// every agent's spec ahead of the agent's own.
    hooks: crate::hooks::Hooks,
}

impl AgentRegistry {
    /// The MCP servers every agent's sessions may use.
    pub fn mcp(&self) -> &crate::mcp::McpServers {
        &self.mcp
    }

    /// Replaces the MCP servers.
    pub fn set_mcp(&mut self, servers: crate::mcp::McpServers) {
        self.mcp = servers;
    }

    /// The skills every agent's sessions may load.
    pub fn skills(&self) -> &crate::skill::Skills {
        &self.skills
    }

    /// Replaces the skills.
    pub fn set_skills(&mut self, skills: crate::skill::Skills) {
        self.skills = skills;
    }

    /// The hooks every agent's sessions run, before the agent's own.
    pub fn hooks(&self) -> &crate::hooks::Hooks {
        &self.hooks
    }

    /// Replaces the hooks.
    pub fn set_hooks(&mut self, hooks: crate::hooks::Hooks) {
        self.hooks = hooks;
    }

    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in agents: `build`, `plan`, `general`, `explore` and the hidden
    /// `compaction` and `title`.
    pub fn builtin() -> Self {
        let mut registry = Self::new();
        for spec in [build(), plan(), general(), explore(), compaction(), title()] {
            registry.insert(spec);
        }
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

    /// What the `task` tool may start, as `(name, description)`: agents of mode
    /// `subagent` or `all` that are not hidden. What a host returns from
    /// [`crate::SessionHost::subagents`].
    pub fn subagents(&self) -> Vec<(String, String)> {
        self.agents
            .values()
            .filter(|spec| spec.mode.is_subagent() && !spec.hidden)
            .map(|spec| (spec.name.to_string(), spec.description.clone()))
            .collect()
    }
}
