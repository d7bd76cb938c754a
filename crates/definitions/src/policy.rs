//! The tools a child session gets: the agent's own, minus what children do not get by
//! default (seed 001, step 9), within the parent's scope.
//!
//! The worker applies both before it runs a child task; the model is never trusted to
//! respect them, since a tool left out of the spec is neither offered nor executed.
//! Both work by appending to the allow-list, so they never widen it.

use crate::agent::AgentSpec;
use crate::permission::wildcard_match;

/// How deep a task tree may grow by default: children, but no grandchildren.
pub const DEFAULT_MAX_DEPTH: u32 = 1;

/// Tools a child session does not get unless its agent names them and the tree may
/// grow deeper: the todo list is the parent's plan, and `task` would recurse.
const CHILD_DEFAULT_OFF: [&str; 3] = ["todowrite", "todoread", "task"];

/// The spec for a child session at `depth` (the root task is 0, its children 1):
/// `todowrite`, `todoread` and `task` are disabled unless the agent names them
/// literally in its allow-list (a wildcard is not enough): its `tools` are merged last
/// (seed 001, step 9). The depth limit bounds `task` alone: a child at `max_depth`
/// starts no children, but keeps the todo list its agent asks for.
pub fn child_tools_policy(agent: &AgentSpec, depth: u32, max_depth: u32) -> AgentSpec {
    let mut child = agent.clone();
    for tool in CHILD_DEFAULT_OFF {
        let below_limit = tool != "task" || depth < max_depth;
        if !(agent.names_tool(tool) && below_limit) {
            child.tools.push(format!("!{tool}"));
        }
    }
    child
}

/// The spec restricted to the tools in `scope` (the capabilities the parent granted):
/// a tool stays only if the agent lists it and a scope pattern matches it. An empty
/// scope restricts nothing. Entries starting with `!` exclude tools outright.
///
/// Each enabling entry of the agent is replaced by its intersection with the scope
/// patterns, which keeps the last-match-wins reading of the list intact. When two
/// wildcards' intersection has no single-pattern form (`a*b` with `*c`) it is dropped:
/// the result may be narrower than exact, never wider.
pub fn restrict_to_scope(agent: &AgentSpec, scope: &[String]) -> AgentSpec {
    let (exclusions, grants): (Vec<&String>, Vec<&String>) =
        scope.iter().partition(|entry| entry.starts_with('!'));
    if grants.is_empty() && exclusions.is_empty() {
        return agent.clone();
    }
    let mut restricted = agent.clone();
    if !grants.is_empty() {
        restricted.tools = agent
            .tools
            .iter()
            .flat_map(|entry| {
                if entry.starts_with('!') {
                    vec![entry.clone()]
                } else {
                    let mut within: Vec<String> = grants
                        .iter()
                        .filter_map(|grant| intersect(entry, grant))
                        .collect();
                    within.dedup();
                    within
                }
            })
            .collect();
    }
    restricted.tools.extend(exclusions.into_iter().cloned());
    restricted
}

fn is_wildcard(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

/// A pattern matching exactly the names both `a` and `b` match, when there is one.
fn intersect(a: &str, b: &str) -> Option<String> {
    match (is_wildcard(a), is_wildcard(b)) {
        (false, _) => wildcard_match(b, a).then(|| a.to_owned()),
        (_, false) => wildcard_match(a, b).then(|| b.to_owned()),
        _ if a == "*" => Some(b.to_owned()),
        _ if b == "*" => Some(a.to_owned()),
        _ if a == b => Some(a.to_owned()),
        _ => {
            // Two prefix patterns (`mcp_*`, `mcp_git*`): the longer prefix, if one
            // extends the other.
            let prefix = |p: &str| {
                p.strip_suffix('*')
                    .filter(|head| !is_wildcard(head))
                    .map(str::to_owned)
            };
            match (prefix(a), prefix(b)) {
                (Some(pa), Some(pb)) if pa.starts_with(&pb) => Some(a.to_owned()),
                (Some(pa), Some(pb)) if pb.starts_with(&pa) => Some(b.to_owned()),
                _ => None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin;
    use proptest::prelude::*;

    fn with_tools(tools: &[&str]) -> AgentSpec {
        let mut agent = builtin::general();
        agent.tools = tools.iter().map(|t| (*t).to_owned()).collect();
        agent
    }

    fn scope(entries: &[&str]) -> Vec<String> {
        entries.iter().map(|e| (*e).to_owned()).collect()
    }

    #[test]
    fn children_lose_todo_and_task_by_default() {
        let child = child_tools_policy(&with_tools(&["*"]), 1, DEFAULT_MAX_DEPTH);
        for tool in CHILD_DEFAULT_OFF {
            assert!(!child.lists_tool(tool), "{tool}");
        }
        assert!(child.lists_tool("bash"));
    }

    #[test]
    fn a_named_task_survives_only_below_the_depth_limit_and_named_todos_at_any_depth() {
        let agent = with_tools(&["read", "task", "todowrite"]);
        let shallow = child_tools_policy(&agent, 1, 2);
        assert!(shallow.lists_tool("task") && shallow.lists_tool("todowrite"));
        assert!(!shallow.lists_tool("todoread"), "not named");
        let deep = child_tools_policy(&agent, 2, 2);
        assert!(!deep.lists_tool("task"));
        assert!(deep.lists_tool("todowrite"), "the limit bounds task only");
        let default = child_tools_policy(&agent, 1, DEFAULT_MAX_DEPTH);
        assert!(
            !default.lists_tool("task"),
            "default depth 1 means no grandchildren"
        );
        assert!(default.lists_tool("read") && default.lists_tool("todowrite"));
    }

    #[test]
    fn an_empty_scope_changes_nothing() {
        let agent = with_tools(&["*", "!write"]);
        assert_eq!(restrict_to_scope(&agent, &[]), agent);
    }

    #[test]
    fn scope_intersects_literal_and_wildcard_entries() {
        let agent = with_tools(&["*", "!write"]);
        let narrowed = restrict_to_scope(&agent, &scope(&["read", "grep", "write"]));
        assert_eq!(narrowed.tools, ["read", "grep", "write", "!write"]);
        assert!(narrowed.lists_tool("read") && narrowed.lists_tool("grep"));
        assert!(!narrowed.lists_tool("write"), "scope never re-enables");
        assert!(!narrowed.lists_tool("bash"));

        let agent = with_tools(&["read", "mcp_*"]);
        let narrowed = restrict_to_scope(&agent, &scope(&["mcp_git*", "bash", "!mcp_git_push"]));
        assert!(!narrowed.lists_tool("read"));
        assert!(!narrowed.lists_tool("bash"), "the agent never had bash");
        assert!(narrowed.lists_tool("mcp_git_log"));
        assert!(!narrowed.lists_tool("mcp_fs"));
        assert!(
            !narrowed.lists_tool("mcp_git_push"),
            "excluded by the scope"
        );
    }

    fn tool_name() -> impl Strategy<Value = String> {
        "[abc]{1,3}"
    }

    fn entry() -> impl Strategy<Value = String> {
        prop_oneof![
            tool_name(),
            tool_name().prop_map(|t| format!("!{t}")),
            "[abc]{0,2}".prop_map(|t| format!("{t}*")),
            "[abc]{0,2}".prop_map(|t| format!("!{t}*")),
        ]
    }

    proptest! {
        #[test]
        fn restriction_never_widens_and_is_exact_for_prefix_patterns(
            tools in prop::collection::vec(entry(), 0..6),
            grants in prop::collection::vec(entry(), 0..4),
            probe in tool_name(),
        ) {
            let agent = with_tools(&tools.iter().map(String::as_str).collect::<Vec<_>>());
            let narrowed = restrict_to_scope(&agent, &grants);
            let positive: Vec<&String> = grants.iter().filter(|g| !g.starts_with('!')).collect();
            let negative: Vec<&String> = grants.iter().filter(|g| g.starts_with('!')).collect();
            let excluded = negative.iter().any(|g| wildcard_match(&g[1..], &probe));
            let in_scope = positive.is_empty() || positive.iter().any(|g| wildcard_match(g, &probe));
            let expected = agent.lists_tool(&probe) && in_scope && !excluded;
            // Only prefix patterns are generated, whose intersections are exact.
            prop_assert_eq!(narrowed.lists_tool(&probe), expected);
        }

        #[test]
        fn child_policy_only_removes(
            tools in prop::collection::vec(entry(), 0..6),
            depth in 0u32..3, max_depth in 0u32..3, probe in tool_name(),
        ) {
            let agent = with_tools(&tools.iter().map(String::as_str).collect::<Vec<_>>());
            let child = child_tools_policy(&agent, depth, max_depth);
            prop_assert!(!child.lists_tool(&probe) || agent.lists_tool(&probe));
        }
    }
}
