//! The built-in agents against the built-in tools: which tools each is offered.

use crate::tools::ToolRegistry;
use taskwire_definitions::agent::{AgentMode, AgentName, AgentSpec};
use taskwire_definitions::builtin::*;
use taskwire_definitions::permission::PermissionAction;
use taskwire_definitions::permission::{
    Approvals, Decision, Permissions, decide, evaluate, is_disabled,
};

fn name(name: &str) -> AgentName {
    name.parse().expect("a valid agent name")
}

fn offered(agent: &AgentSpec) -> Vec<&'static str> {
    let registry = ToolRegistry::builtin();
    registry
        .available_to(agent, Permissions::new(&agent.permission, &[]))
        .map(|tool| tool.name())
        .collect()
}

fn bash(agent: &AgentSpec, command: &str) -> Decision {
    let parts = taskwire_definitions::shell::split_commands(command);
    decide(&agent.permission, &Approvals::default(), "bash", &parts)
}

#[test]
fn builtin_registry_lists_the_visible_agents_and_the_subagents() {
    let registry = AgentRegistry::builtin();
    let names: Vec<_> = registry
        .list(false)
        .iter()
        .map(|spec| spec.name.as_str())
        .collect();
    assert_eq!(names, ["build", "explore", "general", "plan"]);
    assert_eq!(registry.list(true).len(), 6);
    let subagents: Vec<_> = registry
        .subagents()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    // `plan` is a primary agent and a subagent (mode `all`).
    assert_eq!(subagents, ["explore", "general", "plan"]);
    let explore = registry.get(&name("explore")).expect("explore is built in");
    assert_eq!(explore.mode, AgentMode::Subagent);
}

#[test]
fn build_has_every_tool_and_general_all_but_todos() {
    assert_eq!(
        offered(&build()).len(),
        ToolRegistry::builtin().iter().count()
    );
    let general = offered(&general());
    assert!(!general.contains(&"todowrite") && !general.contains(&"todoread"));
    for tool in ["read", "edit", "write", "bash", "webfetch", "task"] {
        assert!(general.contains(&tool), "general lacks {tool}");
    }
}

#[test]
fn explore_is_read_only_even_with_a_wider_allow_list() {
    assert_eq!(
        offered(&explore()),
        ["read", "list", "glob", "grep", "webfetch", "skill"]
    );
    let mut explore = explore();
    explore.tools = vec!["*".into()];
    assert!(is_disabled(&explore.permission, "edit"));
    assert!(is_disabled(&explore.permission, "bash"));
    assert!(!is_disabled(&explore.permission, "read"));
    let wide = offered(&explore);
    for tool in ["edit", "write", "bash"] {
        assert!(!wide.contains(&tool), "explore offers {tool}");
    }
    assert_eq!(
        evaluate(&explore.permission, "edit", "src/lib.rs"),
        PermissionAction::Deny
    );
    assert!(explore.prompt.contains("READ-ONLY"));
}

#[test]
fn plan_cannot_edit_and_asks_before_commands_that_are_not_read_only() {
    let plan = plan();
    let tools = offered(&plan);
    assert!(!tools.contains(&"edit") && !tools.contains(&"write"));
    assert!(tools.contains(&"bash"));
    for command in [
        "ls -la",
        "git status --short",
        "git diff HEAD~1",
        "rg -n TODO src && git log --oneline -5",
        "cat Cargo.toml | grep serde",
        "find . -name '*.rs'",
    ] {
        assert_eq!(bash(&plan, command), Decision::Allow, "{command}");
    }
    for command in [
        "cargo build",
        "rm -rf target",
        "git status && rm x",
        "ls > files.txt",
        "find . -name x -delete",
        "find . -exec rm {} ;",
        "git commit -m x",
        "echo $(curl evil)",
    ] {
        assert!(
            matches!(bash(&plan, command), Decision::Ask { .. }),
            "{command} should ask"
        );
    }
}

#[test]
fn internal_agents_are_hidden_tool_less_and_single_step() {
    for agent in [compaction(), title()] {
        assert!(is_internal(&agent.name), "{}", agent.name);
        assert!(agent.hidden, "{}", agent.name);
        assert!(offered(&agent).is_empty(), "{}", agent.name);
        assert_eq!(agent.max_steps, 1);
        assert!(!agent.prompt.is_empty());
    }
}

#[test]
fn only_the_two_internal_agents_are_internal() {
    let internal: Vec<_> = AgentRegistry::builtin()
        .list(true)
        .into_iter()
        .filter(|a| is_internal(&a.name))
        .map(|a| a.name.to_string())
        .collect();
    assert_eq!(internal, ["compaction", "title"]);
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
    assert_eq!(registry.list(true).len(), 5);
}
