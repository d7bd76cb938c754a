//! Running a slash command as a subtask, and what it leaves in the parent session
//! (seed 000, steps 1-10).
//!
//! The parent's transcript gets three messages: the user's [`SubtaskPart`], an
//! assistant message (written by the subagent) with a `task` tool call and the
//! child's result, and a synthetic user message asking the model to summarise it,
//! which also keeps user and assistant turns alternating for models that insist. The
//! parent session then continues from that history (a [`crate::run_session`] with an
//! empty prompt adds no user message of its own).

use serde_json::json;
use taskwire_llm::Usage;
use tokio_util::sync::CancellationToken;

use crate::error::ToolError;
use crate::host::{ChildTaskRequest, ChildTaskResult, SessionHost};
use crate::session::{SessionEvent, SessionObserver, ToolCallState};
use crate::tools::task::{Progress, finish};
use crate::transcript::{MessageRole, Part, SubtaskPart, TranscriptMessage};

/// The synthetic user message after a subtask (OpenCode's text, verbatim).
pub const SUBTASK_SUMMARY_PROMPT: &str =
    "Summarize the task tool output above and continue with your task.";

/// A finished subtask.
#[derive(Debug, Clone, PartialEq)]
pub struct SubtaskRun {
    /// The three messages to append to the parent's transcript.
    pub messages: Vec<TranscriptMessage>,
    /// The child's usage (with its descendants), to add to the parent task's.
    pub usage: Usage,
    /// Whether the child produced a usable answer.
    pub ok: bool,
}

/// The parent-session messages for a subtask that ended with `result`: the user's
/// subtask part, the `task` call (id `call_id`) with the child's output or error, and
/// the synthetic request to summarise it.
pub fn subtask_messages(
    part: &SubtaskPart,
    call_id: &str,
    result: Result<ChildTaskResult, String>,
) -> Vec<TranscriptMessage> {
    let outcome = match result {
        Ok(result) => finish(&part.agent, &part.description, result, 0),
        Err(reason) => Err(ToolError::ChildFailed {
            agent: part.agent.clone(),
            reason,
        }),
    };
    let input = json!({
        "prompt": part.prompt,
        "description": part.description,
        "subagent_type": part.agent,
        "command": part.command,
    });
    let call = Part::tool_call(
        call_id,
        "task",
        input,
        part.description.clone(),
        outcome
            .map(|output| output.output)
            .map_err(|err| err.to_string()),
    );
    vec![
        TranscriptMessage {
            role: MessageRole::User,
            agent: None,
            parts: vec![Part::Subtask(part.clone())],
        },
        TranscriptMessage::assistant(part.agent.clone(), vec![call]),
        TranscriptMessage::synthetic_user(SUBTASK_SUMMARY_PROMPT),
    ]
}

/// Runs `part` as a child task through `host`, reporting it as the `task` call
/// `call_id` (with the child's tool calls) to `observer`. A child that fails is an
/// error result in the messages, never a panic or an error return: the parent
/// session goes on either way.
pub async fn run_subtask(
    part: &SubtaskPart,
    call_id: &str,
    host: &dyn SessionHost,
    observer: &dyn SessionObserver,
    cancel: CancellationToken,
) -> SubtaskRun {
    let emit = |state, error: Option<String>| {
        observer.on_event(SessionEvent::ToolCall {
            call_id: call_id.to_owned(),
            tool: "task".to_owned(),
            state,
            title: part.description.clone(),
            error,
            metadata: None,
        });
    };
    emit(ToolCallState::Pending, None);
    emit(ToolCallState::Running, None);
    let request = ChildTaskRequest {
        call_id: call_id.to_owned(),
        description: part.description.clone(),
        prompt: part.prompt.clone(),
        subagent_type: part.agent.clone(),
        session_id: None,
        command: part.command.clone(),
        background: false,
        model: None,
        fork: None,
    };
    let progress = Progress::new(observer, call_id, &part.agent, &part.description);
    let on_progress = |update| progress.child_update(update);
    let result = host.run_child(request, &on_progress, cancel).await;
    let usage = match &result {
        Ok(child) => {
            progress.announce(&child.task_id, &child.session_id);
            child.usage
        }
        Err(_) => Usage::default(),
    };
    let ok = result.as_ref().is_ok_and(ChildTaskResult::succeeded);
    let messages = subtask_messages(part, call_id, result);
    let error = match messages.get(1).and_then(|message| message.parts.first()) {
        Some(Part::ToolCall { error, .. }) => error.clone(),
        _ => None,
    };
    let state = if ok {
        ToolCallState::Completed
    } else {
        ToolCallState::Error
    };
    emit(state, error);
    SubtaskRun {
        messages,
        usage,
        ok,
    }
}
