//! What a session needs from the distributed system, as one trait the worker
//! implements: human approval for `ask` permissions and child tasks for the `task`
//! tool.
//!
//! The crate stays free of tonic, sqlx and async-nats: a worker publishes
//! `approval_required`, submits child tasks and watches their progress over NATS, and
//! hands the session only the answers. [`NoopHost`] is the safe default for hosts that
//! support neither: every approval is rejected at once and every child task refused,
//! so a session never waits on something that cannot answer.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use taskwire_llm::Usage;
use tokio_util::sync::CancellationToken;

use crate::error::SessionError;
use crate::session::ToolCallState;
use crate::transcript::Transcript;

/// The distributed system, as seen from one session.
#[async_trait]
pub trait SessionHost: Send + Sync {
    /// An `ask` permission: the host records the request where it can be answered,
    /// then calls `asked` (the session then emits `approval_required`, so nobody sees
    /// a request that cannot be answered yet), waits for an answer with a timeout, and
    /// returns [`ApprovalAnswer::TimedOut`] when none came. A host that answers at once
    /// without recording anything does not call `asked`. Must never block forever.
    async fn approve(
        &self,
        request: ApprovalRequest,
        asked: &(dyn Fn() + Send + Sync),
    ) -> ApprovalAnswer;

    /// The `task` tool: starts a child task anywhere in the fleet and waits for it.
    /// `on_progress` gets [`ChildProgress::Started`] once the child is submitted, then
    /// the child's tool calls live; `cancel` fires when the parent
    /// session is cancelled, and the host should then cancel the child. `Err` is a
    /// failure to run the child at all (unknown agent, submit refused); a child that
    /// ran and failed is `Ok` with its status. A host with workspaces starts the child
    /// from the session's files as they are, and brings a successful child's changes
    /// into them before returning (or says why not in
    /// [`ChildTaskResult::changes_not_applied`]).
    async fn run_child(
        &self,
        request: ChildTaskRequest,
        on_progress: &(dyn Fn(ChildProgress) + Send + Sync),
        cancel: CancellationToken,
    ) -> Result<ChildTaskResult, String>;

    /// The agents the `task` tool lists in its description, as `(name, description)`,
    /// already filtered (not primary, not hidden, not denied). Empty means the `task`
    /// tool is not offered at all. Not the authority on which names exist: a hidden
    /// subagent is callable by name, and [`SessionHost::run_child`] refuses an unknown
    /// one.
    fn subagents(&self) -> &[(String, String)];

    /// The skills the `skill` tool offers (and whose files `read` serves under
    /// `.taskwire/skills/`); none by default.
    fn skills(&self) -> std::sync::Arc<[taskwire_definitions::skill::Skill]> {
        std::sync::Arc::from([])
    }

    /// Makes the session's files ready; called before any of its tool calls run. A
    /// host that makes workspaces on demand (so that a session that never uses a tool
    /// costs none) makes it now. `Err` ends the session with that error. Hosts whose
    /// files are always there succeed at once.
    async fn ensure_workspace(&self) -> Result<(), SessionError> {
        Ok(())
    }

    /// Saves the session so far, ending with a step whose `task` calls are about to
    /// run (recorded without results). A later attempt of the same task resumes from
    /// it and runs those calls again with the same ids, so it re-attaches to the
    /// children they started instead of starting new ones. An `Err` stops the session
    /// before any child starts. Hosts that keep nothing succeed at once.
    async fn checkpoint(&self, _transcript: &Transcript) -> Result<(), String> {
        Ok(())
    }

    /// Brings a background child's changes ([`ChildTaskResult::deferred_patch`]) into
    /// the session's files, with the same conflict handling as
    /// [`SessionHost::run_child`]: `Err` says why they were not applied (the files are
    /// then unchanged). Called when the child's result is given to the model, never
    /// while the session's own tools run. Hosts without workspaces have nothing to
    /// apply.
    async fn apply_child_changes(&self, _patch: &str) -> Result<(), String> {
        Ok(())
    }
}

/// A tool call that needs a human (or policy) answer before it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// Unique within the session run; the answer refers to it.
    pub request_id: String,
    /// The permission key, e.g. `bash` or `edit`.
    pub permission: String,
    /// The subjects that need approval, e.g. the parts of a compound bash command that
    /// no rule allows. An `Always` answer allows exactly these for the rest of the
    /// session.
    pub patterns: Vec<String>,
    /// The tool call's progress title, for the person answering.
    pub title: String,
}

/// The answer to an [`ApprovalRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum ApprovalAnswer {
    /// Run this call only.
    Once,
    /// Run this call and allow the same permission and patterns for the rest of the
    /// session without asking again.
    Always,
    /// Do not run it; `message` (from the person) is passed to the model.
    Reject {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Nobody answered in time: a deny the model sees as a tool error.
    TimedOut,
}

/// The arguments of a `task` call (or a slash-command subtask), for the host to turn
/// into a child task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildTaskRequest {
    /// The model's id for the `task` call (or the subtask's fixed one). With the
    /// parent task it names the child: the same call asked again, by a later attempt
    /// of the parent, finds the child it started.
    #[serde(default)]
    pub call_id: String,
    /// A short (3-5 words) description for progress and listings.
    pub description: String,
    pub prompt: String,
    /// The child's agent name.
    pub subagent_type: String,
    /// A previous child session to continue, from an earlier `<task_metadata>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The slash command that produced this task, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The model the child runs on, as the `task` call asked (the host refuses one
    /// costlier than the parent's); none: the child's agent's own, else the parent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A background child (`task` with `background: true`): the host leaves its
    /// changes out of the session's files and returns them in
    /// [`ChildTaskResult::deferred_patch`], for the session to bring in with
    /// [`SessionHost::apply_child_changes`] when the result is delivered.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
    /// `task` with `fork: true`: the parent's conversation, which the child starts
    /// from (see [`crate::fork`]).
    #[serde(skip)]
    pub fork: Option<std::sync::Arc<crate::fork::Fork>>,
}

/// What a running child reports to its parent, live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChildProgress {
    /// The child was submitted: its task and session.
    Started { task_id: String, session_id: String },
    /// One tool call of the child (or of a descendant it shows, `task_id`) changed
    /// state; `call_id` is the call's id in that task's session.
    ToolCall {
        task_id: String,
        call_id: String,
        tool: String,
        title: String,
        state: ToolCallState,
    },
    /// The child, or one of its descendants (`task_id`), waits for an approval: the
    /// parent shows it so that whoever watches the root can answer it.
    ApprovalRequired {
        task_id: String,
        request_id: String,
        permission: String,
        patterns: Vec<String>,
    },
}

impl ChildProgress {
    /// The task this report is about.
    pub fn task_id(&self) -> &str {
        match self {
            Self::Started { task_id, .. }
            | Self::ToolCall { task_id, .. }
            | Self::ApprovalRequired { task_id, .. } => task_id,
        }
    }
}

/// How a child task ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildTaskResult {
    pub task_id: String,
    /// The child's session, to continue it with `session_id` later.
    pub session_id: String,
    /// The task status as on the wire: `completed`, `max_steps`, `error`,
    /// `cancelled`, `deadline_exceeded`, `rejected`.
    pub status: String,
    /// The child's last text.
    pub text: String,
    /// Tokens used by the child and all its descendants.
    pub usage: Usage,
    /// Why the child's changes to the files are not in the session's workspace (they
    /// conflict with its own; the report shows the conflicting hunks). `None` when
    /// they were applied, or there were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes_not_applied: Option<String>,
    /// A background child's changes, not yet applied (see
    /// [`ChildTaskRequest::background`]); `None` for a foreground child, or when there
    /// were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferred_patch: Option<String>,
}

impl ChildTaskResult {
    /// Whether the child produced an answer the parent can use: `completed`, or the
    /// partial summary of `max_steps` or `budget_exceeded`.
    pub fn succeeded(&self) -> bool {
        matches!(
            self.status.as_str(),
            "completed" | "max_steps" | "budget_exceeded"
        )
    }
}

/// A host that supports neither approvals nor child tasks: approvals are rejected at
/// once, child tasks refused, and no subagent is listed (so `task` is not offered).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopHost;

/// Given to the model when [`NoopHost`] rejects an approval.
pub const NO_APPROVAL_MESSAGE: &str = "approval is not available in this session";

#[async_trait]
impl SessionHost for NoopHost {
    async fn approve(
        &self,
        _request: ApprovalRequest,
        _asked: &(dyn Fn() + Send + Sync),
    ) -> ApprovalAnswer {
        ApprovalAnswer::Reject {
            message: Some(NO_APPROVAL_MESSAGE.to_owned()),
        }
    }

    async fn run_child(
        &self,
        request: ChildTaskRequest,
        _on_progress: &(dyn Fn(ChildProgress) + Send + Sync),
        _cancel: CancellationToken,
    ) -> Result<ChildTaskResult, String> {
        Err(format!(
            "child tasks are not available in this session (agent {})",
            request.subagent_type
        ))
    }

    fn subagents(&self) -> &[(String, String)] {
        &[]
    }
}

/// The same as [`NoopHost`], under the name a local, single-process caller reaches
/// for.
pub type LocalHost = NoopHost;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn noop_host_rejects_approvals_and_refuses_children() {
        let announced = std::sync::atomic::AtomicBool::new(false);
        let answer = NoopHost
            .approve(
                ApprovalRequest {
                    request_id: "1".into(),
                    permission: "bash".into(),
                    patterns: vec!["rm x".into()],
                    title: "rm x".into(),
                },
                &|| announced.store(true, std::sync::atomic::Ordering::SeqCst),
            )
            .await;
        assert!(
            !announced.load(std::sync::atomic::Ordering::SeqCst),
            "nothing to answer, nothing announced"
        );
        assert_eq!(
            answer,
            ApprovalAnswer::Reject {
                message: Some(NO_APPROVAL_MESSAGE.into())
            }
        );
        let request = ChildTaskRequest {
            call_id: "c1".into(),
            description: "d".into(),
            prompt: "p".into(),
            subagent_type: "explore".into(),
            session_id: None,
            command: None,
            background: false,
            model: None,
            fork: None,
        };
        let err = NoopHost
            .run_child(request, &|_| {}, CancellationToken::new())
            .await
            .expect_err("refused");
        assert!(err.contains("not available"), "{err}");
        assert!(NoopHost.subagents().is_empty());
        assert_eq!(NoopHost.checkpoint(&Transcript::new("s")).await, Ok(()));
        assert_eq!(NoopHost.ensure_workspace().await, Ok(()));
        assert_eq!(NoopHost.apply_child_changes("diff").await, Ok(()));
    }

    #[test]
    fn approval_answers_serialize_with_a_tag() {
        let json = serde_json::to_string(&ApprovalAnswer::Reject {
            message: Some("no".into()),
        })
        .expect("serializable");
        assert_eq!(json, r#"{"answer":"reject","message":"no"}"#);
        let back: ApprovalAnswer =
            serde_json::from_str(r#"{"answer":"timed_out"}"#).expect("parse");
        assert_eq!(back, ApprovalAnswer::TimedOut);
    }

    #[test]
    fn only_completed_and_max_steps_children_succeed() {
        let mut result = ChildTaskResult {
            task_id: "t".into(),
            session_id: "s".into(),
            status: "completed".into(),
            text: String::new(),
            usage: Usage::default(),
            changes_not_applied: None,
            deferred_patch: None,
        };
        assert!(result.succeeded());
        result.status = "max_steps".into();
        assert!(result.succeeded());
        for status in ["error", "cancelled", "deadline_exceeded", "rejected"] {
            result.status = status.into();
            assert!(!result.succeeded(), "{status}");
        }
    }
}
