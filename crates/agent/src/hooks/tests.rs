use super::*;

#[test]
fn plain_output_is_context_only_at_session_start() {
    assert_eq!(
        parse_answer(Some(HookEvent::SessionStart), "branch: main\n"),
        Answer::Pass {
            context: Some("branch: main".into()),
            updated_input: None,
            ask: None
        }
    );
    assert_eq!(
        parse_answer(Some(HookEvent::PreToolUse), "checked\n"),
        Answer::Pass {
            context: None,
            updated_input: None,
            ask: None
        }
    );
}

#[test]
fn json_answers_block_ask_rewrite_and_add_context_in_claude_codes_shape() {
    assert_eq!(
        parse_answer(None, r#"{"decision": "block", "reason": "no rm"}"#),
        Answer::Block {
            reason: "no rm".into()
        }
    );
    assert_eq!(
        parse_answer(
            None,
            r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "secrets"}}"#
        ),
        Answer::Block {
            reason: "secrets".into()
        }
    );
    assert_eq!(
        parse_answer(
            None,
            r#"{"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "prod"}}"#
        ),
        Answer::Pass {
            context: None,
            updated_input: None,
            ask: Some("prod".into())
        }
    );
    assert_eq!(
        parse_answer(
            None,
            r#"{"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "ls"}, "additionalContext": "note"}}"#
        ),
        Answer::Pass {
            context: Some("note".into()),
            updated_input: Some(serde_json::json!({"command": "ls"})),
            ask: None
        }
    );
}

#[test]
fn an_answer_that_cannot_be_read_is_a_failure_not_a_pass() {
    for bad in [
        r#"{"decision": "block""#,
        r#"{"decision": "maybe"}"#,
        r#"{"hookSpecificOutput": {"updatedInput": "ls"}}"#,
    ] {
        assert!(
            matches!(parse_answer(None, bad), Answer::Failed { .. }),
            "{bad}"
        );
    }
}

#[test]
fn http_hooks_reach_only_the_allowed_url_prefixes() {
    let runner = HookRunner::new(
        CommandSandbox::Unsandboxed,
        vec!["https://hooks.example.com/".into()],
    );
    assert!(runner.allows_url("https://hooks.example.com/lint"));
    assert!(!runner.allows_url("https://hooks.example.com.evil.test/lint"));
    assert!(!runner.allows_url("http://169.254.169.254/latest"));
    assert!(!HookRunner::default().allows_url("https://hooks.example.com/lint"));
}
