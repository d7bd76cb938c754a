use std::sync::Mutex;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::host::{ChildProgress, ChildTaskRequest, ChildTaskResult, SessionHost};
use crate::tools::BashTool;
use crate::tools::test_context;
use crate::workspace::Workspace;
use taskwire_definitions::permission::{PermissionAction, PermissionRule, Permissions};

fn setup(rules: &[(&str, PermissionAction)]) -> (tempfile::TempDir, ToolContext<'static>) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n").expect("write");
    let workspace = Workspace::new(dir.path()).expect("workspace");
    let rules: &'static [PermissionRule] = Box::leak(
        rules
            .iter()
            .map(|(pattern, action)| PermissionRule::new("bash", *pattern, *action))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    let ctx = ToolContext {
        permissions: Permissions::new(rules, &[]),
        ..test_context(workspace)
    };
    (dir, ctx)
}

#[test]
fn spans_are_found_in_order_and_empty_or_unclosed_ones_are_text() {
    let text = "a !`ls -1` b !`` c !`wc -l notes.txt` d !`unclosed";
    let commands: Vec<&str> = shell_spans(text).into_iter().map(|(_, _, c)| c).collect();
    assert_eq!(commands, ["ls -1", "wc -l notes.txt"]);
}

#[tokio::test]
async fn a_commands_output_replaces_it_in_the_template() {
    let (_dir, ctx) = setup(&[]);
    let out = expand("Notes:\n!`cat notes.txt`\nEnd.", &BashTool::default(), &ctx).await;
    assert_eq!(out.text, "Notes:\nalpha\nbeta\n(exit code 0)\nEnd.");
    assert_eq!(out.ran.len(), 1);
    assert_eq!(out.ran[0].0, "cat notes.txt");
}

#[tokio::test]
async fn a_failing_command_gives_its_stderr_and_exit_status() {
    let (_dir, ctx) = setup(&[]);
    let out = expand("Result: !`cat missing.txt`", &BashTool::default(), &ctx).await;
    assert!(
        out.text.contains("missing.txt: No such file"),
        "{}",
        out.text
    );
    assert!(out.text.ends_with("(exit code 1)"), "{}", out.text);
}

#[tokio::test]
async fn a_denied_command_is_refused_and_never_runs() {
    let (dir, ctx) = setup(&[
        ("*", PermissionAction::Allow),
        ("touch *", PermissionAction::Deny),
    ]);
    let out = expand(
        "A !`touch made.txt` B !`echo ok`",
        &BashTool::default(),
        &ctx,
    )
    .await;
    assert!(
        out.text.starts_with("A [!`touch made.txt` did not run: "),
        "{}",
        out.text
    );
    assert!(out.text.contains("denied"), "{}", out.text);
    assert!(out.text.ends_with("B ok\n(exit code 0)"), "{}", out.text);
    assert!(
        !dir.path().join("made.txt").exists(),
        "the denied command ran"
    );
    assert_eq!(out.ran.len(), 1, "only the allowed command is listed");
}

/// Answers every approval with `answer` and records what it was asked.
struct Approver {
    answer: ApprovalAnswer,
    asked: Mutex<Vec<ApprovalRequest>>,
}

#[async_trait]
impl SessionHost for Approver {
    async fn approve(
        &self,
        request: ApprovalRequest,
        asked: &(dyn Fn() + Send + Sync),
    ) -> ApprovalAnswer {
        self.asked.lock().expect("lock").push(request);
        asked();
        self.answer.clone()
    }

    async fn run_child(
        &self,
        _request: ChildTaskRequest,
        _on_progress: &(dyn Fn(ChildProgress) + Send + Sync),
        _cancel: CancellationToken,
    ) -> Result<ChildTaskResult, String> {
        Err("no children here".into())
    }

    fn subagents(&self) -> &[(String, String)] {
        &[]
    }
}

#[tokio::test]
async fn an_ask_goes_to_the_approval_host_and_its_answer_decides() {
    for (answer, runs) in [
        (ApprovalAnswer::Once, true),
        (
            ApprovalAnswer::Reject {
                message: Some("not now".into()),
            },
            false,
        ),
        (ApprovalAnswer::TimedOut, false),
    ] {
        let (dir, ctx) = setup(&[("*", PermissionAction::Ask)]);
        let host: &'static Approver = Box::leak(Box::new(Approver {
            answer: answer.clone(),
            asked: Mutex::default(),
        }));
        let events: &'static Mutex<Vec<SessionEvent>> = Box::leak(Box::default());
        let observer: &'static dyn crate::session::SessionObserver =
            Box::leak(Box::new(|e| events.lock().expect("lock").push(e)));
        let ctx = ToolContext {
            host,
            observer,
            ..ctx
        };
        let out = expand("!`touch asked.txt`", &BashTool::default(), &ctx).await;
        let asked = host.asked.lock().expect("lock").clone();
        assert_eq!(asked.len(), 1, "{answer:?}");
        assert_eq!(asked[0].permission, "bash");
        assert_eq!(asked[0].patterns, ["touch asked.txt"]);
        assert_eq!(
            dir.path().join("asked.txt").exists(),
            runs,
            "{answer:?}: {}",
            out.text
        );
        let events = events.lock().expect("lock");
        assert!(
            events
                .iter()
                .any(|e| matches!(e, SessionEvent::ApprovalRequired { permission, .. } if permission == "bash")),
            "the ask is announced: {events:?}"
        );
        if !runs {
            assert!(out.text.contains("did not run"), "{}", out.text);
        }
    }
}

#[test]
fn long_output_is_cut_and_keeps_its_exit_status() {
    let long = format!("{}\n(exit code 2)", "x".repeat(MAX_OUTPUT_BYTES * 2));
    let cut = capped(&long);
    assert!(cut.len() <= MAX_OUTPUT_BYTES + 100, "{}", cut.len());
    assert!(cut.contains("[output cut at"), "cut is said");
    assert!(cut.ends_with("(exit code 2)"));
}
