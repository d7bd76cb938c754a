use super::*;
use crate::permission::{Approvals, Decision, decide, evaluate};

/// Writes `files` into a fresh `agents/` directory and loads it over the built-ins.
fn load(files: &[(&str, &str)]) -> (AgentRegistry, Vec<LoadError>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let agents = dir.path().join("agents");
    std::fs::create_dir(&agents).expect("mkdir");
    for (name, text) in files {
        std::fs::write(agents.join(name), text).expect("write");
    }
    load_agents(&agents, AgentRegistry::builtin())
}

fn get<'r>(registry: &'r AgentRegistry, name: &str) -> Option<&'r AgentSpec> {
    registry.get(&name.parse().expect("valid name"))
}

#[test]
fn a_new_agent_gets_defaults_and_its_name_from_the_file() {
    let (registry, errors) = load(&[(
        "review.md",
        "---\ndescription: Reviews code\nmode: subagent\n---\nYou review code.\n",
    )]);
    assert!(errors.is_empty(), "{errors:?}");
    let review = get(&registry, "review").expect("loaded");
    assert_eq!(review.description, "Reviews code");
    assert_eq!(review.mode, AgentMode::Subagent);
    assert_eq!(review.prompt, "You review code.");
    assert_eq!(review.tools, ["*"]);
    assert_eq!(review.max_steps, DEFAULT_MAX_STEPS);
    assert!(
        registry
            .subagents()
            .iter()
            .any(|(name, _)| name == "review")
    );

    let (registry, _) = load(&[("helper.md", "Only a prompt.")]);
    let helper = get(&registry, "helper").expect("loaded");
    assert_eq!(
        (helper.mode, helper.prompt.as_str()),
        (AgentMode::All, "Only a prompt.")
    );
}

#[test]
fn a_file_named_like_a_built_in_overrides_only_the_keys_it_gives() {
    let (registry, errors) = load(&[(
        "explore.md",
        "---\nmax_steps: 5\nmodel: small-model\ntemperature: 0.1\ncolor: \"#38bdf8\"\n---\n",
    )]);
    assert!(errors.is_empty(), "{errors:?}");
    let explore = get(&registry, "explore").expect("still there");
    let builtin = crate::builtin::explore();
    assert_eq!(explore.max_steps, 5);
    assert_eq!(explore.model.as_deref(), Some("small-model"));
    assert_eq!(explore.temperature, Some(0.1));
    assert_eq!(explore.color.as_deref(), Some("#38bdf8"));
    assert_eq!(
        explore.prompt, builtin.prompt,
        "an empty body keeps the prompt"
    );
    assert_eq!(explore.description, builtin.description);
    assert_eq!(explore.permission, builtin.permission);
}

#[test]
fn disable_removes_an_agent() {
    let (registry, errors) = load(&[("general.md", "---\ndisable: true\n---\n")]);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(get(&registry, "general").is_none());
    assert!(get(&registry, "explore").is_some());
}

#[test]
fn a_bad_file_is_reported_with_its_key_and_the_rest_still_load() {
    let (registry, errors) = load(&[
        ("bad.md", "---\nmode: sidekick\n---\nx"),
        ("good.md", "---\nmode: primary\n---\nx"),
        ("typo.md", "---\ncolour: red\n---\nx"),
    ]);
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages[0],
        "agents/bad.md: key `mode`: expected one of primary, subagent, all"
    );
    assert!(
        messages[1].starts_with("agents/typo.md: key `colour`: unknown key; expected one of"),
        "{}",
        messages[1]
    );
    assert_eq!(errors[1].key.as_deref(), Some("colour"));
    assert_eq!(errors.len(), 2);
    assert!(get(&registry, "good").is_some());
    assert!(get(&registry, "bad").is_none());
}

#[test]
fn values_of_the_wrong_kind_name_the_key() {
    let cases = [
        (
            "---\nhidden: sometimes\n---\n",
            "hidden",
            "expected true or false",
        ),
        ("---\nmax_steps: 0\n---\n", "max_steps", "at least 1"),
        ("---\ntemperature: 3\n---\n", "temperature", "from 0 to 2"),
        ("---\ntools: [read]\n---\n", "tools", "expected a mapping"),
        (
            "---\ntools: {read: maybe}\n---\n",
            "tools.read",
            "true or false",
        ),
        (
            "---\npermission: {bash: sometimes}\n---\n",
            "permission.bash",
            "allow, ask, deny",
        ),
        (
            "---\npermission: {bash: {\"rm*\": never}}\n---\n",
            "permission.bash.\"rm*\"",
            "allow, ask, deny",
        ),
        (
            "---\npermission: {write: deny}\n---\n",
            "permission.write",
            "`edit`",
        ),
        (
            "---\nmaxSteps: 3\nmax_steps: 4\n---\n",
            "max_steps",
            "already given as maxSteps",
        ),
        ("---\nname: Bad Name\n---\n", "name", "invalid agent name"),
    ];
    for (text, key, message) in cases {
        let err = parse_agent("agents/x.md", "x", text, &AgentRegistry::builtin()).expect_err(text);
        assert_eq!(err.key.as_deref(), Some(key), "{text}");
        assert!(err.message.contains(message), "{text}: {err}");
    }
    let err = parse_agent(
        "agents/x.md",
        "x",
        "---\nname: [\n---\n",
        &AgentRegistry::builtin(),
    )
    .expect_err("bad yaml");
    assert_eq!(err.key, None);
    assert!(
        err.to_string()
            .starts_with("agents/x.md: the frontmatter is not valid yaml")
    );
}

#[test]
fn max_steps_alias_and_name_key() {
    let change = parse_agent(
        "agents/file.md",
        "file",
        "---\nname: custom\nmaxSteps: 7\nhidden: true\ntop_p: 0.9\n---\nPrompt",
        &AgentRegistry::builtin(),
    )
    .expect("valid");
    let AgentChange::Define(spec) = change else {
        panic!("expected a definition");
    };
    assert_eq!(spec.name.as_str(), "custom");
    assert_eq!(spec.max_steps, 7);
    assert!(spec.hidden);
    assert_eq!(spec.top_p, Some(0.9));
}

#[test]
fn small_model_and_reasoning_effort_are_read_and_a_bad_effort_is_refused() {
    let change = parse_agent(
        "agents/thinker.md",
        "thinker",
        "---\nsmall_model: gpt-4o-mini\nreasoning_effort: high\n---\nThink.",
        &AgentRegistry::builtin(),
    )
    .expect("valid");
    let AgentChange::Define(spec) = change else {
        panic!("expected a definition");
    };
    assert_eq!(spec.small_model.as_deref(), Some("gpt-4o-mini"));
    assert_eq!(spec.reasoning_effort.as_deref(), Some("high"));
    let err = parse_agent(
        "agents/thinker.md",
        "thinker",
        "---\nreasoning_effort: maximal\n---\nThink.",
        &AgentRegistry::builtin(),
    )
    .expect_err("an unknown effort");
    let text = err.to_string();
    assert!(
        text.contains("reasoning_effort") && text.contains("minimal, low, medium, high"),
        "{text}"
    );
    let change = parse_agent(
        "agents/thinker.md",
        "thinker",
        "---\nthinking_budget: 4096\n---\nThink.",
        &AgentRegistry::builtin(),
    )
    .expect("valid");
    let AgentChange::Define(spec) = change else {
        panic!("expected a definition");
    };
    assert_eq!(spec.thinking_budget, Some(4096));
    let err = parse_agent(
        "agents/thinker.md",
        "thinker",
        "---\nthinking_budget: 100\n---\nThink.",
        &AgentRegistry::builtin(),
    )
    .expect_err("under Anthropic's least budget");
    assert!(err.to_string().contains("at least 1024"), "{err}");
}

#[test]
fn model_tier_is_read_explore_is_small_by_default_and_a_bad_tier_is_refused() {
    use crate::agent::ModelTier;
    let builtin = AgentRegistry::builtin();
    assert_eq!(
        get(&builtin, "explore").expect("built in").model_tier,
        ModelTier::Small
    );
    assert_eq!(
        get(&builtin, "general").expect("built in").model_tier,
        ModelTier::Default
    );
    let (registry, errors) = load(&[
        (
            "scout.md",
            "---
model_tier: small
---
Scout.",
        ),
        (
            "explore.md",
            "---
model_tier: default
---
",
        ),
    ]);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        get(&registry, "scout").expect("loaded").model_tier,
        ModelTier::Small
    );
    assert_eq!(
        get(&registry, "explore").expect("overridden").model_tier,
        ModelTier::Default
    );
    let err = parse_agent(
        "agents/scout.md",
        "scout",
        "---
model_tier: huge
---
Scout.",
        &AgentRegistry::builtin(),
    )
    .expect_err("an unknown tier");
    assert!(
        err.to_string().contains("model_tier") && err.to_string().contains("default, small"),
        "{err}"
    );
}

#[test]
fn tools_set_false_are_excluded_and_specific_entries_win() {
    let (registry, errors) = load(&[
        (
            "narrow.md",
            "---\ntools: {read: true, \"*\": false, grep: true}\n---\n",
        ),
        (
            "wide.md",
            "---\ntools: {write: false, \"mcp_*\": false}\n---\n",
        ),
    ]);
    assert!(errors.is_empty(), "{errors:?}");
    let narrow = get(&registry, "narrow").expect("loaded");
    assert_eq!(narrow.tools, ["*", "!*", "read", "grep"]);
    assert!(narrow.lists_tool("read") && narrow.lists_tool("grep"));
    assert!(!narrow.lists_tool("bash"));
    let wide = get(&registry, "wide").expect("loaded");
    assert!(wide.lists_tool("edit"));
    assert!(!wide.lists_tool("write"));
    assert!(!wide.lists_tool("mcp_github"));
}

#[test]
fn permission_maps_become_rules_with_specific_patterns_winning() {
    let (registry, errors) = load(&[(
        "careful.md",
        "---\npermission:\n  bash:\n    \"git status*\": allow\n    \"*\": ask\n    \"rm*\": deny\n  edit: deny\n  webfetch: ask\n---\n",
    )]);
    assert!(errors.is_empty(), "{errors:?}");
    let careful = get(&registry, "careful").expect("loaded");
    let rules = &careful.permission;
    assert_eq!(evaluate(rules, "edit", "src/a.rs"), PermissionAction::Deny);
    assert_eq!(
        evaluate(rules, "webfetch", "https://x"),
        PermissionAction::Ask
    );
    assert_eq!(
        evaluate(rules, "bash", "git status --short"),
        PermissionAction::Allow
    );
    assert_eq!(evaluate(rules, "bash", "cargo test"), PermissionAction::Ask);
    assert_eq!(evaluate(rules, "bash", "rm -rf x"), PermissionAction::Deny);
    let parts = crate::shell::split_commands("git status && cargo test");
    assert!(matches!(
        decide(rules, &Approvals::default(), "bash", &parts),
        Decision::Ask { .. }
    ));
}

#[test]
fn two_files_defining_one_agent_are_refused() {
    let (registry, errors) = load(&[
        ("a.md", "---\nname: twin\ndescription: first\n---\n"),
        ("b.md", "---\nname: twin\ndescription: second\n---\n"),
    ]);
    assert_eq!(
        errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["agents/b.md: key `name`: agent twin is already defined in agents/a.md"]
    );
    assert_eq!(
        get(&registry, "twin").map(|spec| spec.description.as_str()),
        Some("first")
    );
}

#[test]
fn a_missing_directory_loads_nothing_and_other_files_are_ignored() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (registry, errors) = load_agents(&dir.path().join("nope"), AgentRegistry::builtin());
    assert!(errors.is_empty());
    assert_eq!(registry.list(true).len(), 6);
    let (registry, errors) = load(&[("notes.txt", "---\nmode: nonsense\n---\n")]);
    assert!(errors.is_empty());
    assert_eq!(registry.list(true).len(), 6);
}

#[test]
fn frontmatter_hooks_are_read_in_the_hooks_json_shape_and_a_bad_one_names_its_key() {
    let (registry, errors) = load(&[(
        "guarded.md",
        "---\nmode: subagent\nhooks:\n  PreToolUse:\n    - matcher: bash\n      hooks:\n        - type: command\n          command: ./deny-rm.sh\n          timeout: 5\n---\nGuarded.\n",
    )]);
    assert!(errors.is_empty(), "{errors:?}");
    let guarded = get(&registry, "guarded").expect("loaded");
    assert_eq!(guarded.hooks.len(), 1);
    let hook = &guarded.hooks[0];
    assert_eq!(hook.event, crate::hooks::HookEvent::PreToolUse);
    assert_eq!(hook.matcher, "bash");
    assert_eq!(hook.timeout_secs(), 5);
    assert_eq!(hook.source, "agent guarded");
    assert_eq!(hook.label(), "./deny-rm.sh");

    let (registry, errors) = load(&[(
        "broken.md",
        "---\nhooks:\n  AfterEverything:\n    - hooks: []\n---\nBroken.\n",
    )]);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].key.as_deref(), Some("hooks.AfterEverything"));
    assert!(errors[0].message.contains("unknown event"), "{}", errors[0]);
    assert!(get(&registry, "broken").is_none());
}
