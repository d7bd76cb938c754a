//! !`cmd` in slash-command templates (seed 001, step 8): each is run in the
//! workspace before the session starts and replaced by its output, so a command such
//! as `Review the diff: !`git diff --stat`` reaches the model with the diff in it.
//!
//! A template's command is treated as a call of the `bash` tool: the same sandboxed
//! shell path runs it, and the session's `bash` rules (its agent's and every inherited
//! layer) judge it. `deny` refuses it; `ask` is answered as a tool call's would be,
//! through the session's approval host (the task waits in `awaiting_approval`, and an
//! unanswered ask times out as a refusal); an `always` answer holds for the session's
//! render only. A refused command is replaced by a bracketed line saying why, and
//! never runs. A command that fails still gives its output (stdout and stderr
//! interleaved) and its exit status. Each output is capped at [`MAX_OUTPUT_BYTES`]
//! and at most [`MAX_COMMANDS`] commands run; the rest are left as written. Progress
//! shows each as a `bash` call with the id `command_shell_<n>`.
//!
//! Whether the agent has the `bash` tool does not matter: the command was written by
//! whoever wrote the template, not chosen by the model.

use serde_json::json;

use crate::error::ToolError;
use crate::host::{ApprovalAnswer, ApprovalRequest};
use crate::session::{SessionEvent, ToolCallState};
use crate::tools::{Tool, ToolContext};
use taskwire_definitions::permission::Decision;

/// Most bytes of one command's output put in the prompt.
pub const MAX_OUTPUT_BYTES: usize = 16 * 1024;
/// Most commands one template runs.
pub const MAX_COMMANDS: usize = 10;

/// A template with its commands' outputs in place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expanded {
    pub text: String,
    /// `(command, output)` of each command that ran, for the result's provenance.
    pub ran: Vec<(String, String)>,
}

/// The commands of `text`: `(start, end, command)` of each !`...` span, in order.
pub fn shell_spans(text: &str) -> Vec<(usize, usize, &str)> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(offset) = text[from..].find("!`") {
        let start = from + offset;
        let body = start + 2;
        let Some(len) = text[body..].find('`') else {
            break;
        };
        let command = &text[body..body + len];
        if command.trim().is_empty() {
            from = body;
            continue;
        }
        spans.push((start, body + len + 1, command));
        from = body + len + 1;
    }
    spans
}

/// Runs the commands of `text` with `bash` under `ctx`'s rules and returns the text
/// with each replaced by its output (or by why it did not run).
pub async fn expand(text: &str, bash: &dyn Tool, ctx: &ToolContext<'_>) -> Expanded {
    let mut out = String::with_capacity(text.len());
    let mut ran = Vec::new();
    let mut last = 0;
    for (index, (start, end, command)) in shell_spans(text).into_iter().enumerate() {
        if index >= MAX_COMMANDS {
            tracing::warn!(
                limit = MAX_COMMANDS,
                "template has more commands than run; the rest are left as written"
            );
            break;
        }
        out.push_str(&text[last..start]);
        last = end;
        let call_id = format!("command_shell_{}", index + 1);
        match run_one(command.trim(), &call_id, bash, ctx).await {
            Ok(output) => {
                out.push_str(&output);
                ran.push((command.trim().to_owned(), output));
            }
            Err(err) => out.push_str(&format!("[!`{}` did not run: {err}]", command.trim())),
        }
    }
    out.push_str(&text[last..]);
    Expanded { text: out, ran }
}

/// One command: judged, approved if asked, run; its capped output.
async fn run_one(
    command: &str,
    call_id: &str,
    bash: &dyn Tool,
    ctx: &ToolContext<'_>,
) -> Result<String, ToolError> {
    let args = json!({ "command": command, "description": "slash command template" });
    let title = command.to_owned();
    let emit = |state, error: Option<String>| {
        ctx.observer.on_event(SessionEvent::ToolCall {
            call_id: call_id.to_owned(),
            tool: "bash".to_owned(),
            state,
            title: title.clone(),
            error,
            metadata: None,
        });
    };
    emit(ToolCallState::Pending, None);
    let result = judge_and_run(command, call_id, args, bash, ctx).await;
    match &result {
        Ok(_) => emit(ToolCallState::Completed, None),
        Err(err) => emit(ToolCallState::Error, Some(err.to_string())),
    }
    result.map(|output| capped(&output))
}

async fn judge_and_run(
    command: &str,
    call_id: &str,
    args: serde_json::Value,
    bash: &dyn Tool,
    ctx: &ToolContext<'_>,
) -> Result<String, ToolError> {
    let patterns = bash.patterns(&args, &ctx.workspace);
    let decision = ctx
        .permissions
        .decide(&ctx.state.approvals(), "bash", &patterns);
    let rule_text = |rule: &taskwire_definitions::permission::PermissionRule,
                     from: Option<&str>| match from {
        Some(agent) => format!("{rule} (inherited from {agent})"),
        None => rule.to_string(),
    };
    match decision {
        Decision::Allow => {}
        Decision::Deny {
            subject,
            rule,
            inherited_from,
        } => {
            return Err(ToolError::Denied {
                permission: "bash".into(),
                subject,
                rule: rule_text(&rule, inherited_from.as_deref()),
            });
        }
        Decision::Ask {
            patterns,
            rule,
            inherited_from,
        } => {
            let rule = rule_text(&rule, inherited_from.as_deref());
            let request_id = ctx.state.next_approval_id(call_id);
            let request = ApprovalRequest {
                request_id: request_id.clone(),
                permission: "bash".into(),
                patterns: patterns.clone(),
                title: command.to_owned(),
            };
            let announce = || {
                ctx.observer.on_event(SessionEvent::ApprovalRequired {
                    request_id: request_id.clone(),
                    permission: "bash".into(),
                    patterns: patterns.clone(),
                });
            };
            match ctx.host.approve(request, &announce).await {
                ApprovalAnswer::Once => {}
                ApprovalAnswer::Always => ctx.state.approvals().grant("bash", &patterns),
                ApprovalAnswer::Reject { message } => {
                    return Err(ToolError::Rejected {
                        permission: "bash".into(),
                        subject: patterns.join(", "),
                        rule,
                        message,
                    });
                }
                ApprovalAnswer::TimedOut => {
                    return Err(ToolError::ApprovalTimedOut {
                        permission: "bash".into(),
                        subject: patterns.join(", "),
                        rule,
                    });
                }
            }
        }
    }
    let ctx = ToolContext {
        call_id: call_id.to_owned(),
        ..ctx.clone()
    };
    Ok(bash.execute(args, &ctx).await?.output)
}

/// `output` cut to about [`MAX_OUTPUT_BYTES`] on a character boundary, saying so,
/// keeping its last line (the exit status).
fn capped(output: &str) -> String {
    let output = output.trim_end();
    if output.len() <= MAX_OUTPUT_BYTES {
        return output.to_owned();
    }
    let last = output.rsplit('\n').next().unwrap_or_default();
    let mut end = MAX_OUTPUT_BYTES.saturating_sub(last.len().min(MAX_OUTPUT_BYTES / 2));
    while !output.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[output cut at {end} of {} bytes]\n{last}",
        &output[..end],
        output.len()
    )
}

#[cfg(test)]
mod tests;
