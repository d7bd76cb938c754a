//! Tools the model can call, and the registry the session loop picks them from.
//!
//! One file per tool under `tools/`. Every file tool confines its paths with
//! [`Workspace::resolve`] and does its file work on the blocking pool (see
//! `run_blocking`); long-running tools check the cancellation token; every tool caps
//! its output so one call cannot flood the model's context.
//!
//! Tools do not check permissions themselves: they describe the call
//! ([`Tool::permission`], [`Tool::patterns`]) and the session loop decides, asking
//! the host when a rule says `ask`, before [`Tool::execute`] runs. A tool the rules
//! deny never executes.

pub(crate) mod bash;
mod edit;
mod glob;
mod grep;
mod list;
mod read;
mod schema;
mod skill;
pub(crate) mod task;
mod task_status;
mod todoread;
mod todowrite;
mod webfetch;
mod write;

use std::path::Path;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::Value;
use taskwire_llm::{ToolDef, ToolSchema};
use tokio_util::sync::CancellationToken;

pub use self::bash::{BashTool, CommandSandbox, Enforced, NETWORK_PERMISSION};
pub(crate) use self::bash::{
    DEFAULT_PATH, Extra, Prepared, ProcessGroup, bash_command, prepare_with,
};
pub use self::edit::EditTool;
pub use self::glob::GlobTool;
pub use self::grep::GrepTool;
pub use self::list::ListTool;
pub use self::read::ReadTool;
pub use self::skill::SkillTool;
pub use self::task::{TaskTool, task_output};
pub use self::task_status::TaskStatusTool;
pub use self::todoread::TodoReadTool;
pub use self::todowrite::{Todo, TodoPriority, TodoStatus, TodoWriteTool};
pub use self::webfetch::WebFetchTool;
pub use self::write::WriteTool;
use crate::error::ToolError;
use crate::host::SessionHost;
use crate::session::{SessionObserver, SessionState};
use crate::workspace::Workspace;
use taskwire_definitions::agent::AgentSpec;
use taskwire_definitions::permission::Permissions;

/// What a tool needs from the session it runs in. Shared by the concurrent calls of a
/// turn; cheap to clone.
#[derive(Clone)]
pub struct ToolContext<'a> {
    pub workspace: Workspace,
    /// Cancelled when the session is; long-running tools stop (and kill what they
    /// started) when it fires.
    pub cancel: CancellationToken,
    /// Approvals and child tasks (the `task` tool).
    pub host: &'a dyn SessionHost,
    /// For tools that report progress of their own (the `task` tool's child events).
    pub observer: &'a dyn SessionObserver,
    /// The session's todo list and child usage.
    pub state: &'a SessionState,
    /// The model's id of the call being executed (empty outside a call): the `task`
    /// tool names its child by it.
    pub call_id: String,
    /// The session's permission rules (its agent's and the inherited layers), for
    /// tools that enforce some while they run (`bash` opens hosts of the `network`
    /// permission to its commands only where every layer allows them).
    pub permissions: Permissions<'a>,
}

/// A successful tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// Short description for progress events, e.g. `grep TODO in src`.
    pub title: String,
    /// What the model reads.
    pub output: String,
    /// Structured details for UIs and summaries (counts, truncation); never sent to
    /// the model.
    pub metadata: Value,
}

/// A capability offered to the model.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by; also the allow-list key.
    fn name(&self) -> &'static str;

    /// Tells the model when and how to use the tool.
    fn description(&self) -> &str;

    /// JSON Schema of the arguments object.
    fn parameters(&self) -> Value;

    /// The permission rules are matched against. Defaults to the tool name; tools
    /// that share a risk share a key (`edit` and `write` both use `edit`).
    fn permission(&self) -> &'static str {
        self.name()
    }

    /// The subject the rules' patterns match for this call: a workspace-relative path
    /// for file tools, the search pattern for search tools, the url for `webfetch`.
    /// Must not fail: unparsable arguments give an empty subject (matched by `*`), and
    /// `execute` then reports the bad arguments.
    fn subject(&self, args: &Value, workspace: &Workspace) -> String;

    /// Every subject of the call; all must pass and the strictest verdict wins.
    /// One, the [`Tool::subject`], except for `bash`, which has one per simple command.
    fn patterns(&self, args: &Value, workspace: &Workspace) -> Vec<String> {
        vec![self.subject(args, workspace)]
    }

    /// Short title for progress while the call runs.
    fn title(&self, args: &Value) -> String;

    /// Another tool whose listing in an agent's allow-list lists this one too
    /// (`task_status` goes with `task`); `None` for tools listed by their own name.
    fn listed_with(&self) -> Option<&'static str> {
        None
    }

    /// Whether the tool can work in a session with this host; one that cannot is not
    /// offered (the `task` tool needs subagents to start).
    fn available(&self, _host: &dyn SessionHost) -> bool {
        true
    }

    /// Whether a call works on the session's files, which must then be ready (made by
    /// the host, [`SessionHost::ensure_workspace`]) before it runs. Most tools do;
    /// `task`, `task_status`, `webfetch` and the todo list do not, so a session that only
    /// delegates, fetches or plans never has its files made.
    fn uses_files(&self) -> bool {
        true
    }

    /// Whether a call can change the session's files: with its own writes (`edit`,
    /// `write`), through a command (`bash`), or by bringing a child's changes back
    /// (`task`; `task_status` only reports on the children `task` started). A session offered none of these only reads, and a
    /// worker gives it no workspace of its own (see [`ToolRegistry::may_change_files`]).
    fn changes_files(&self) -> bool {
        false
    }

    /// Runs the call.
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError>;

    /// The definition offered to the model; a [`ToolRegistry`] makes it once, when the
    /// tool is registered.
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: self.name().into(),
            description: self.description().into(),
            parameters: ToolSchema::new(&self.parameters()),
        }
    }

    /// The definition offered in a session with this host, given the tool's own
    /// (`definition`, shared: cloning it copies nothing); tools whose description
    /// depends on the fleet (the `task` tool lists the subagents) override it.
    fn definition_for(&self, definition: &ToolDef, _host: &dyn SessionHost) -> ToolDef {
        definition.clone()
    }
}

/// A registered tool and its definition, made once.
struct Registered {
    tool: Box<dyn Tool>,
    definition: ToolDef,
}

impl Registered {
    fn new(tool: Box<dyn Tool>) -> Self {
        let definition = tool.definition();
        Self { tool, definition }
    }
}

/// The tools a worker can offer, by name.
#[derive(Default)]
pub struct ToolRegistry {
    // A handful of tools: a vector keeps registration order for stable tool lists
    // (and stable prompt caching upstream) and is as fast as a map at this size.
    // Shared, so that a session's registry (the worker's tools and its MCP servers')
    // copies none of them.
    tools: Vec<std::sync::Arc<Registered>>,
    /// Prefixes of tools that could not be listed (an MCP server that failed to
    /// start), with why: a call to one is that error rather than an unknown tool.
    unavailable: Vec<(String, String)>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|tool| tool.name()))
            .finish()
    }
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// The read-only built-in tools: `read`, `list`, `glob`, `grep`.
    pub fn read_only() -> Self {
        let mut registry = Self::new();
        registry.register(ReadTool);
        registry.register(ListTool);
        registry.register(GlobTool);
        registry.register(GrepTool);
        registry
    }

    /// All built-in tools: the read-only ones, then `edit`, `write`, `bash`,
    /// `webfetch`, `todowrite`, `todoread`, `task`, `task_status` and `skill`. `webfetch` needs a rustls
    /// crypto provider installed by the binary.
    pub fn builtin() -> Self {
        let mut registry = Self::read_only();
        registry.register(EditTool);
        registry.register(WriteTool);
        registry.register(BashTool::default());
        registry.register(WebFetchTool::default());
        registry.register(TodoWriteTool);
        registry.register(TodoReadTool);
        registry.register(TaskTool::default());
        registry.register(TaskStatusTool);
        registry.register(SkillTool);
        registry
    }

    /// Adds `tool`, replacing a tool of the same name.
    pub fn register(&mut self, tool: impl Tool + 'static) {
        self.register_boxed(Box::new(tool));
    }

    fn register_boxed(&mut self, tool: Box<dyn Tool>) {
        let tool = std::sync::Arc::new(Registered::new(tool));
        match self
            .tools
            .iter_mut()
            .find(|t| t.tool.name() == tool.tool.name())
        {
            Some(slot) => *slot = tool,
            None => self.tools.push(tool),
        }
    }

    /// Every tool replaced by `wrap(tool)`, in the same order: decorates them all (the
    /// worker measures each tool's calls this way).
    pub fn wrap_each(self, mut wrap: impl FnMut(Box<dyn Tool>) -> Box<dyn Tool>) -> Self {
        Self {
            tools: self
                .tools
                .into_iter()
                .map(|registered| {
                    let registered = std::sync::Arc::into_inner(registered)
                        .expect("tools are wrapped before the registry is shared");
                    std::sync::Arc::new(Registered::new(wrap(registered.tool)))
                })
                .collect(),
            unavailable: self.unavailable,
        }
    }

    /// This registry's tools (shared) and `extra` after them (replacing tools of the
    /// same name), each wrapped by `wrap`; calls to a tool named `PREFIX_...` for a
    /// `(PREFIX, reason)` of `unavailable` fail with that reason. A session's registry:
    /// the worker's tools and its MCP servers'.
    pub fn with_tools(
        &self,
        extra: Vec<Box<dyn Tool>>,
        unavailable: Vec<(String, String)>,
        mut wrap: impl FnMut(Box<dyn Tool>) -> Box<dyn Tool>,
    ) -> Self {
        let mut registry = Self {
            tools: self.tools.clone(),
            unavailable,
        };
        for tool in extra {
            registry.register_boxed(wrap(tool));
        }
        registry
    }

    /// Why a tool named `name` could not be offered, when it belongs to a server that
    /// failed (see [`ToolRegistry::with_tools`]).
    pub fn unavailable(&self, name: &str) -> Option<&str> {
        self.unavailable.iter().find_map(|(prefix, reason)| {
            name.strip_prefix(prefix.as_str())
                .is_some_and(|rest| rest.starts_with('_'))
                .then_some(reason.as_str())
        })
    }

    pub fn get(&self, name: &str) -> Option<&dyn Tool> {
        self.iter().find(|tool| tool.name() == name)
    }

    /// All tools in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &dyn Tool> {
        self.tools.iter().map(|registered| registered.tool.as_ref())
    }

    /// The tools `agent` may be offered: named by its allow-list (wildcards and `!`
    /// exclusions allowed; a tool [`Tool::listed_with`] another is named with it) and
    /// not disabled outright by `permissions`, the session's rules (the agent's own
    /// and the inherited ones).
    pub fn available_to<'a>(
        &'a self,
        agent: &'a AgentSpec,
        permissions: Permissions<'a>,
    ) -> impl Iterator<Item = &'a dyn Tool> {
        self.registered_for(agent, permissions)
            .map(|registered| registered.tool.as_ref())
    }

    /// The tools offered to `agent` in a session with `host`: those it may be offered
    /// ([`ToolRegistry::available_to`]) that the host can serve
    /// ([`Tool::available`]), each with its definition for the session
    /// ([`Tool::definition_for`], from the one made when it was registered).
    pub fn offered_to<'a>(
        &'a self,
        agent: &'a AgentSpec,
        permissions: Permissions<'a>,
        host: &'a dyn SessionHost,
    ) -> impl Iterator<Item = (&'a dyn Tool, ToolDef)> {
        self.registered_for(agent, permissions)
            .filter(move |registered| registered.tool.available(host))
            .map(move |registered| {
                let tool = registered.tool.as_ref();
                (tool, tool.definition_for(&registered.definition, host))
            })
    }

    /// Whether a session of `agent` under `permissions` may be offered a tool that
    /// changes files ([`Tool::changes_files`]). Rules that ask count as allowing: only
    /// a tool disabled outright (denied for every subject, by the agent or an
    /// ancestor) or left off the agent's list is out.
    pub fn may_change_files(&self, agent: &AgentSpec, permissions: Permissions<'_>) -> bool {
        self.available_to(agent, permissions)
            .any(|tool| tool.changes_files())
    }

    fn registered_for<'a>(
        &'a self,
        agent: &'a AgentSpec,
        permissions: Permissions<'a>,
    ) -> impl Iterator<Item = &'a Registered> {
        self.tools
            .iter()
            .map(AsRef::as_ref)
            .filter(move |registered| {
                let tool = &registered.tool;
                agent.lists_tool(tool.listed_with().unwrap_or(tool.name()))
                    && !permissions.is_disabled(tool.permission())
            })
    }
}

/// A context with no host (approvals rejected, no children) and a fresh, leaked
/// session state, for unit tests of single tools.
#[cfg(test)]
pub(crate) fn test_context(workspace: Workspace) -> ToolContext<'static> {
    ToolContext {
        workspace,
        cancel: CancellationToken::new(),
        host: &crate::host::NoopHost,
        observer: &crate::session::NoopObserver,
        state: Box::leak(Box::new(SessionState::new())),
        call_id: String::new(),
        permissions: Permissions::new(&[], &[]),
    }
}

/// Deserializes a tool's arguments, naming the tool in the error.
pub(crate) fn parse_args<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|err| ToolError::invalid_arguments(tool, err))
}

/// A string argument for titles and subjects, which must not fail.
pub(crate) fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// The rule subject of a tool that works on the file `filePath`: the path as seen from
/// the workspace root, so `./a.txt` and `a.txt` meet the same rules.
pub(crate) fn file_subject(args: &Value, workspace: &Workspace) -> String {
    str_arg(args, "filePath")
        .map(|path| workspace.subject(path))
        .unwrap_or_default()
}

/// Runs file work on the blocking pool so a slow disk never stalls the runtime that
/// drives thousands of sessions.
pub(crate) async fn run_blocking<T: Send + 'static>(
    tool: &str,
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| ToolError::Failed {
            tool: tool.to_owned(),
            reason: err.to_string(),
        })?
}

/// A walker over `root` with the search tools' shared rules: `.gitignore`/`.ignore`
/// respected even outside a git repository, hidden files included (the model often
/// needs `.github/`), `.git/` itself skipped, symlinks not followed (a followed link
/// could lead out of the workspace), and a stable order. `keep` prunes further
/// entries (a pruned directory is not descended into).
pub(crate) fn walker(
    root: &Path,
    keep: impl Fn(&ignore::DirEntry) -> bool + Send + Sync + 'static,
) -> ignore::Walk {
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        // The walker holds one filter, so the `.git` rule and the caller's are combined.
        .filter_entry(move |entry| entry.file_name() != ".git" && keep(entry))
        .build()
}

/// A file-name glob with ripgrep's `--glob` reading: a pattern without `/` matches
/// the file name at any depth (`*.rs`), one with `/` matches the path relative to the
/// search root (`src/**/*.rs`). `*` stays within one path segment, `**` crosses them.
pub(crate) struct FileGlob {
    matcher: globset::GlobMatcher,
    basename_only: bool,
}

impl FileGlob {
    pub(crate) fn new(tool: &str, pattern: &str) -> Result<Self, ToolError> {
        let glob = globset::GlobBuilder::new(pattern.trim_start_matches("./"))
            .literal_separator(true)
            .build()
            .map_err(|err| {
                ToolError::invalid_arguments(tool, format!("bad glob {pattern}: {err}"))
            })?;
        Ok(Self {
            matcher: glob.compile_matcher(),
            basename_only: !pattern.contains('/'),
        })
    }

    /// `relative` is the path below the search root.
    pub(crate) fn matches(&self, relative: &Path) -> bool {
        if self.basename_only {
            relative
                .file_name()
                .is_some_and(|name| self.matcher.is_match(name))
        } else {
            self.matcher.is_match(relative)
        }
    }
}

/// Cuts `line` to at most `max` characters, marking the cut.
pub(crate) fn truncate_line(line: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}... (line truncated)", &line[..cut]).into(),
        None => line.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwire_definitions::permission::{PermissionAction, PermissionRule};

    #[test]
    fn only_a_session_offered_no_writing_tool_reads_without_changing_files() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let registry = ToolRegistry::builtin();
        let may_change =
            |agent: &AgentSpec, inherited: &[taskwire_definitions::permission::PermissionLayer]| {
                registry.may_change_files(agent, Permissions::new(&agent.permission, inherited))
            };
        assert!(
            !may_change(&taskwire_definitions::builtin::explore(), &[]),
            "explore only reads"
        );
        assert!(may_change(&taskwire_definitions::builtin::general(), &[]));
        // `plan` denies edit but asks before commands: it may still change files.
        assert!(may_change(&taskwire_definitions::builtin::plan(), &[]));
        // A general child whose ancestors deny every writing tool only reads.
        let deny = |tool: &str| PermissionRule::new(tool, "*", PermissionAction::Deny);
        let ancestors = [taskwire_definitions::permission::PermissionLayer {
            agent: "lead".into(),
            rules: vec![deny("edit"), deny("bash"), deny("task")],
        }];
        assert!(!may_change(
            &taskwire_definitions::builtin::general(),
            &ancestors
        ));
        // Denying only some subjects leaves the tool offered.
        let partly = [taskwire_definitions::permission::PermissionLayer {
            agent: "lead".into(),
            rules: vec![
                deny("edit"),
                deny("task"),
                PermissionRule::new("bash", "rm *", PermissionAction::Deny),
            ],
        }];
        assert!(may_change(
            &taskwire_definitions::builtin::general(),
            &partly
        ));
    }

    #[test]
    fn available_tools_follow_allow_list_and_blanket_denies() {
        let registry = ToolRegistry::read_only();
        let mut agent = taskwire_definitions::builtin::general();
        agent.tools = vec!["*".into()];
        agent.permission = vec![PermissionRule::new("grep", "*", PermissionAction::Deny)];
        let names: Vec<_> = registry
            .available_to(&agent, Permissions::new(&agent.permission, &[]))
            .map(|tool| tool.name())
            .collect();
        assert_eq!(names, ["read", "list", "glob"]);

        agent.tools = vec!["read".into(), "nonexistent".into()];
        let names: Vec<_> = registry
            .available_to(&agent, Permissions::new(&agent.permission, &[]))
            .map(|tool| tool.name())
            .collect();
        assert_eq!(names, ["read"]);
    }

    #[test]
    fn tools_an_ancestor_denies_outright_are_not_offered() {
        let registry = ToolRegistry::builtin();
        let general = taskwire_definitions::builtin::general();
        let plan = taskwire_definitions::permission::PermissionLayer {
            agent: "plan".into(),
            rules: taskwire_definitions::builtin::plan().permission,
        };
        let inherited = [plan];
        let names: Vec<_> = registry
            .available_to(&general, Permissions::new(&general.permission, &inherited))
            .map(|tool| tool.name())
            .collect();
        assert!(
            !names.contains(&"edit") && !names.contains(&"write"),
            "{names:?}"
        );
        assert!(
            names.contains(&"bash") && names.contains(&"read"),
            "{names:?}"
        );
        let alone: Vec<_> = registry
            .available_to(&general, Permissions::new(&general.permission, &[]))
            .map(|tool| tool.name())
            .collect();
        assert!(
            alone.contains(&"edit") && alone.contains(&"write"),
            "{alone:?}"
        );
    }

    #[test]
    fn register_replaces_a_tool_of_the_same_name() {
        let mut registry = ToolRegistry::read_only();
        registry.register(ReadTool);
        assert_eq!(registry.iter().count(), 4);
        assert!(registry.get("read").is_some());
        assert!(registry.get("bash").is_none());
    }

    #[test]
    fn builtin_registry_has_every_tool_once_and_edit_write_share_a_permission() {
        let registry = ToolRegistry::builtin();
        let names: Vec<_> = registry.iter().map(|tool| tool.name()).collect();
        assert_eq!(
            names,
            [
                "read",
                "list",
                "glob",
                "grep",
                "edit",
                "write",
                "bash",
                "webfetch",
                "todowrite",
                "todoread",
                "task",
                "task_status",
                "skill"
            ]
        );
        let permission = |name| registry.get(name).map(|tool| tool.permission());
        assert_eq!(permission("edit"), Some("edit"));
        assert_eq!(permission("write"), Some("edit"));
        assert_eq!(permission("bash"), Some("bash"));
    }

    #[test]
    fn excluded_tools_are_not_offered() {
        let registry = ToolRegistry::builtin();
        let mut agent = taskwire_definitions::builtin::general();
        agent.tools = vec!["*".into(), "!write".into(), "!todo*".into()];
        let names: Vec<_> = registry
            .available_to(&agent, Permissions::new(&agent.permission, &[]))
            .map(|tool| tool.name())
            .collect();
        assert!(!names.contains(&"write"), "{names:?}");
        assert!(!names.contains(&"todowrite") && !names.contains(&"todoread"));
        assert!(names.contains(&"edit"), "{names:?}");
    }

    #[test]
    fn file_glob_without_slash_matches_names_at_any_depth() {
        let glob = FileGlob::new("glob", "*.rs").expect("valid glob");
        assert!(glob.matches(Path::new("a.rs")));
        assert!(glob.matches(Path::new("src/deep/a.rs")));
        let glob = FileGlob::new("glob", "src/*.rs").expect("valid glob");
        assert!(glob.matches(Path::new("src/a.rs")));
        assert!(!glob.matches(Path::new("src/deep/a.rs")));
        let glob = FileGlob::new("glob", "src/**/*.rs").expect("valid glob");
        assert!(glob.matches(Path::new("src/deep/a.rs")));
        assert!(FileGlob::new("glob", "a[").is_err());
    }

    #[test]
    fn long_lines_are_cut_on_char_boundaries() {
        assert_eq!(truncate_line("héllo", 10), "héllo");
        assert_eq!(truncate_line("héllo", 2), "hé... (line truncated)");
    }
}
