//! Running the tool calls of one assistant turn: refuse what the agent may not do,
//! execute the rest concurrently, and turn every outcome into a tool-result message.
//!
//! A tool failure is never a session failure: errors become results (`error: ...`)
//! that the model reads and can recover from.

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::Value;
use taskwire_llm::{Message, ToolCall};
use tokio_util::sync::CancellationToken;

use super::events::{SessionEvent, SessionObserver, ToolCallState, ToolCallSummary};
use crate::agent::AgentSpec;
use crate::error::ToolError;
use crate::permission::{PermissionAction, deciding_rule};
use crate::tools::{Tool, ToolContext, ToolOutput, ToolRegistry};

/// What a turn's tool calls run against.
pub(super) struct Turn<'a> {
    pub agent: &'a AgentSpec,
    /// The tools offered to the model this session; the only ones that may execute.
    pub offered: &'a [&'a dyn Tool],
    /// All tools, to tell "not offered" from "does not exist" in the error.
    pub registry: &'a ToolRegistry,
    pub ctx: &'a ToolContext,
    pub observer: &'a dyn SessionObserver,
}

/// The results of a turn, in call order.
pub(super) struct TurnResults {
    pub messages: Vec<Message>,
    pub summaries: Vec<ToolCallSummary>,
    /// The session was cancelled while tools ran; unfinished calls got an
    /// `error: tool call was cancelled` result so the transcript stays well-formed.
    pub cancelled: bool,
}

impl<'a> Turn<'a> {
    pub(super) async fn run(&self, calls: &[ToolCall], cancel: &CancellationToken) -> TurnResults {
        let mut titles = Vec::with_capacity(calls.len());
        let mut results: Vec<Option<Result<ToolOutput, ToolError>>> =
            calls.iter().map(|_| None).collect();
        let mut running = FuturesUnordered::new();

        for (index, call) in calls.iter().enumerate() {
            let (title, prepared) = self.prepare(call);
            self.emit(call, ToolCallState::Pending, &title, None);
            match prepared {
                Err(err) => {
                    tracing::debug!(tool.name = %call.name, error = %err, "tool call refused");
                    self.emit(call, ToolCallState::Error, &title, Some(err.to_string()));
                    results[index] = Some(Err(err));
                }
                Ok((tool, args)) => {
                    self.emit(call, ToolCallState::Running, &title, None);
                    let ctx = self.ctx;
                    running.push(async move { (index, tool.execute(args, ctx).await) });
                }
            }
            titles.push(title);
        }

        let mut cancelled = false;
        while !running.is_empty() {
            tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    cancelled = true;
                    break;
                }
                Some((index, result)) = running.next() => {
                    let call = &calls[index];
                    match &result {
                        Ok(output) => self.emit(call, ToolCallState::Completed, &output.title, None),
                        Err(err) => {
                            let error = Some(err.to_string());
                            self.emit(call, ToolCallState::Error, &titles[index], error);
                        }
                    }
                    results[index] = Some(result);
                }
            }
        }
        // Dropping the futures stops waiting; blocking work already handed to the
        // pool stops at its next cancellation check.
        drop(running);

        let mut turn = TurnResults {
            messages: Vec::with_capacity(calls.len()),
            summaries: Vec::with_capacity(calls.len()),
            cancelled,
        };
        for ((call, result), title) in calls.iter().zip(results).zip(titles) {
            let (content, title, ok) = match result {
                Some(Ok(output)) => (output.output, output.title, true),
                Some(Err(err)) => (format!("error: {err}"), title, false),
                None => {
                    let err = ToolError::Cancelled.to_string();
                    self.emit(call, ToolCallState::Error, &title, Some(err.clone()));
                    (format!("error: {err}"), title, false)
                }
            };
            turn.messages.push(Message::tool_result(&call.id, content));
            turn.summaries.push(ToolCallSummary {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                title,
                ok,
            });
        }
        turn
    }

    /// Decides whether `call` may run: the tool must be offered, its arguments must be
    /// JSON, and the agent's rules must allow its subject. Returns the progress title
    /// alongside, since even a refused call is reported.
    fn prepare(&self, call: &ToolCall) -> (String, Result<(&'a dyn Tool, Value), ToolError>) {
        let Some(tool) = self
            .offered
            .iter()
            .copied()
            .find(|tool| tool.name() == call.name)
        else {
            let err = if self.registry.get(&call.name).is_some() {
                ToolError::NotOffered {
                    tool: call.name.clone(),
                    agent: self.agent.name.to_string(),
                }
            } else {
                ToolError::UnknownTool {
                    name: call.name.clone(),
                }
            };
            return (call.name.clone(), Err(err));
        };
        let args = match parse_arguments(tool.name(), &call.arguments) {
            Ok(args) => args,
            Err(err) => return (call.name.clone(), Err(err)),
        };
        let title = tool.title(&args);
        let permission = tool.permission();
        let subject = tool.subject(&args, &self.ctx.workspace);
        let verdict = match deciding_rule(&self.agent.permission, permission, &subject) {
            Some(rule) if rule.action == PermissionAction::Deny => Err(ToolError::Denied {
                permission: permission.to_owned(),
                subject,
                rule: rule.to_string(),
            }),
            // Approval is not wired yet; refusing is the safe reading of `ask`.
            Some(rule) if rule.action == PermissionAction::Ask => {
                Err(ToolError::ApprovalRequired {
                    permission: permission.to_owned(),
                    subject,
                    rule: rule.to_string(),
                })
            }
            _ => Ok((tool, args)),
        };
        (title, verdict)
    }

    fn emit(&self, call: &ToolCall, state: ToolCallState, title: &str, error: Option<String>) {
        self.observer.on_event(SessionEvent::ToolCall {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            state,
            title: title.to_owned(),
            error,
        });
    }
}

/// Parses the model's raw argument text. Some models send an empty string for a call
/// without arguments; that is read as `{}`.
fn parse_arguments(tool: &str, raw: &str) -> Result<Value, ToolError> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_str(raw).map_err(|err| {
        ToolError::invalid_arguments(tool, format!("arguments are not valid json: {err}"))
    })
}
