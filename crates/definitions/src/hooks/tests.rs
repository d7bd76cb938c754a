use super::*;

#[test]
fn a_claude_code_settings_hooks_block_loads_as_written() {
    let text = r#"{"hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh", "timeout": 10}]}],
        "PostToolUse": [{"matcher": "Edit|Write", "hooks": [
            {"type": "http", "url": "https://hooks.example.com/lint", "headers": {"X-Token": "{env:TOKEN}"}}
        ]}],
        "Stop": [{"hooks": [{"type": "command", "command": "exit 0"}]}]
    }}"#;
    let hooks = parse_hooks_file("hooks.json", text).expect("as set up");
    assert_eq!(hooks.len(), 3);
    let pre = hooks
        .iter()
        .find(|h| h.event == HookEvent::PreToolUse)
        .expect("as set up");
    assert_eq!(pre.matcher, "Bash");
    assert_eq!(pre.timeout_secs(), 10);
    assert_eq!(pre.source, "hooks.json");
    assert_eq!(
        pre.action,
        HookAction::Command {
            command: "./check.sh".into()
        }
    );
    let post = hooks
        .iter()
        .find(|h| h.event == HookEvent::PostToolUse)
        .expect("as set up");
    assert_eq!(post.timeout_secs(), DEFAULT_TIMEOUT_SECS);
    assert_eq!(
        post.action,
        HookAction::Http {
            url: "https://hooks.example.com/lint".into(),
            headers: vec![("X-Token".into(), "{env:TOKEN}".into())],
        }
    );
    let stop = hooks
        .iter()
        .find(|h| h.event == HookEvent::Stop)
        .expect("as set up");
    assert!(stop.matches("anything"));
}

#[test]
fn matchers_read_claude_code_tool_names_alternatives_and_wildcards() {
    assert!(matcher_matches("Bash", "bash"));
    assert!(matcher_matches("Edit|Write", "write"));
    assert!(!matcher_matches("Edit|Write", "read"));
    assert!(matcher_matches("mcp_.*", "mcp_fetch"));
    assert!(matcher_matches("github_*", "github_search"));
    assert!(matcher_matches("", "read"));
    assert!(matcher_matches("*", "read"));
    assert!(!matcher_matches("bash", "bash2"));
}

#[test]
fn a_bad_hook_is_refused_with_its_key_and_the_reason() {
    let cases = [
        (
            r#"{"hooks": {"BeforeTool": []}}"#,
            "hooks.BeforeTool",
            "unknown event",
        ),
        (
            r#"{"hooks": {"PreToolUse": [{"matcher": "bash", "hooks": [{"type": "command"}]}]}}"#,
            "hooks.PreToolUse[0].hooks[0]",
            "`command` is required",
        ),
        (
            r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "prompt", "prompt": "x"}]}]}}"#,
            "hooks.PreToolUse[0].hooks[0]",
            "unknown type `prompt`",
        ),
        (
            r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x", "timeout": 0}]}]}}"#,
            "hooks.Stop[0].hooks[0]",
            "`timeout` must be a number of seconds",
        ),
        (
            r#"{"hooks": {"Stop": [{"hooks": [{"type": "http", "url": "file:///etc/passwd"}]}]}}"#,
            "hooks.Stop[0].hooks[0]",
            "must be http or https",
        ),
        (
            r#"{"hooks": {"Stop": [{"matchers": "x", "hooks": []}]}}"#,
            "hooks.Stop[0].matchers",
            "unknown key",
        ),
        (r#"{"hook": {}}"#, "hook", "unknown key"),
    ];
    for (text, key, message) in cases {
        let err = parse_hooks_file("hooks.json", text).expect_err("refused");
        assert_eq!(err.key.as_deref(), Some(key), "{text}: {err}");
        assert!(err.message.contains(message), "{text}: {err}");
    }
    let err = parse_hooks_file("hooks.json", "{not json").expect_err("refused");
    assert!(err.message.starts_with("not JSON"), "{err}");
}

#[test]
fn directories_add_their_hooks_in_order_and_a_bad_file_adds_none() {
    let first = tempfile::tempdir().expect("as set up");
    let second = tempfile::tempdir().expect("as set up");
    let bad = tempfile::tempdir().expect("as set up");
    let hook = |command: &str| {
        format!(
            r#"{{"hooks": {{"PreToolUse": [{{"hooks": [{{"type": "command", "command": "{command}"}}]}}]}}}}"#
        )
    };
    std::fs::write(first.path().join("hooks.json"), hook("one")).expect("as set up");
    std::fs::write(second.path().join("hooks.json"), hook("two")).expect("as set up");
    std::fs::write(
        bad.path().join("hooks.json"),
        r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "three"}, {"type": "command"}]}]}}"#,
    )
    .expect("as set up");
    let (hooks, errors) = load_hooks(first.path(), Hooks::new());
    assert!(errors.is_empty());
    let (hooks, errors) = load_hooks(second.path(), hooks);
    assert!(errors.is_empty());
    let (hooks, errors) = load_hooks(bad.path(), hooks);
    assert_eq!(errors.len(), 1);
    let labels: Vec<_> = hooks.list().iter().map(Hook::label).collect();
    assert_eq!(labels, ["one", "two"]);
    let empty = tempfile::tempdir().expect("as set up");
    let (same, errors) = load_hooks(empty.path(), hooks.clone());
    assert!(errors.is_empty());
    assert_eq!(same, hooks);
}
