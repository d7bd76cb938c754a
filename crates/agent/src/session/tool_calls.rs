//! Running the tool calls of one assistant turn: refuse what the agent may not do,
//! ask the host about what needs approval, execute the rest concurrently, and turn
//! every outcome into a tool-result message and a transcript part.
//!
//! A tool failure is never a session failure: errors become results (`error: ...`)
//! that the model reads and can recover from. Checks run in this order, cheapest and
//! least bothersome first: offered, arguments, doom loop, rules, `PreToolUse` hooks,
//! approval; `PostToolUse` hooks run after a call that succeeded.

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::Value;
use taskwire_llm::{Message, ToolCall};
use tokio_util::sync::CancellationToken;

use super::events::{SessionEvent, ToolCallState, ToolCallSummary};
use crate::error::ToolError;
use crate::hooks::{HookEvent, SessionHooks};
use crate::host::{ApprovalAnswer, ApprovalRequest};
use crate::tools::{Tool, ToolContext, ToolOutput, ToolRegistry};
use crate::transcript::Part;
use taskwire_definitions::agent::AgentSpec;
use taskwire_definitions::permission::{Decision, PermissionRule, Permissions};

/// What a turn's tool calls run against.
pub(super) struct Turn<'a> {
    pub agent: &'a AgentSpec,
    /// The agent's rules bounded by the inherited ones.
    pub permissions: Permissions<'a>,
    /// The tools offered to the model this session; the only ones that may execute.
    pub offered: &'a [&'a dyn Tool],
    /// All tools, to tell "not offered" from "does not exist" in the error.
    pub registry: &'a ToolRegistry,
    pub ctx: &'a ToolContext<'a>,
    /// The session's hooks: `PreToolUse` and `PostToolUse` run around each call.
    pub hooks: &'a SessionHooks<'a>,
}

/// The results of a turn, in call order.
pub(super) struct TurnResults {
    pub messages: Vec<Message>,
    pub summaries: Vec<ToolCallSummary>,
    /// One finished `ToolCall` part per call, for the transcript.
    pub parts: Vec<Part>,
    /// The session was cancelled while tools ran; unfinished calls got an
    /// `error: tool call was cancelled` result so the transcript stays well-formed.
    pub cancelled: bool,
}

/// Put before what `PostToolUse` hooks add to a result.
const POST_TOOL_USE_CONTEXT: &str = "PostToolUse hook context:";
/// Put before a `PostToolUse` hook's block reason.
const POST_TOOL_USE_FEEDBACK: &str = "PostToolUse hook feedback:";

/// What a call needs approved, if anything.
type Approval = Option<Ask>;

/// An `ask`: the subjects to approve and the rule, as the model reads it.
struct Ask {
    patterns: Vec<String>,
    rule: String,
    /// Asked by a `PreToolUse` hook, not by a rule: asked whatever the session's
    /// `always` answers lifted.
    by_hook: bool,
}

/// A call that passed the checks that need no answer from anyone.
struct Ready<'a> {
    tool: &'a dyn Tool,
    args: Value,
    /// Set when a rule says `ask` for some of the call's subjects: those subjects and
    /// the rule, as the model reads it.
    approval: Approval,
}

/// One call after the synchronous checks.
struct Prepared<'a> {
    title: String,
    /// The parsed arguments, or the raw text when they were not JSON.
    input: Value,
    verdict: Result<Ready<'a>, ToolError>,
}

impl<'a> Turn<'a> {
    pub(super) async fn run(&self, calls: &[ToolCall], cancel: &CancellationToken) -> TurnResults {
        let mut titles = Vec::with_capacity(calls.len());
        let mut inputs = Vec::with_capacity(calls.len());
        let mut results: Vec<Option<Result<ToolOutput, ToolError>>> =
            calls.iter().map(|_| None).collect();
        let mut running = FuturesUnordered::new();

        for (index, call) in calls.iter().enumerate() {
            let Prepared {
                title,
                input,
                verdict,
            } = self.prepare(call);
            self.emit(call, ToolCallState::Pending, &title, None);
            match verdict {
                Err(err) => {
                    tracing::debug!(tool.name = %call.name, error = %err, "tool call refused");
                    self.emit(call, ToolCallState::Error, &title, Some(err.to_string()));
                    results[index] = Some(Err(err));
                }
                Ok(ready) => {
                    let approved = ready.approval.is_none();
                    if approved {
                        self.emit(call, ToolCallState::Running, &title, None);
                    }
                    let title = title.clone();
                    let span = crate::spans::execute_tool(&call.name, &call.id);
                    let traced = span.trace.clone();
                    running.push(span.instrument(async move {
                        let ctx = ToolContext {
                            call_id: call.id.clone(),
                            ..self.ctx.clone()
                        };
                        let Ready {
                            tool,
                            mut args,
                            mut approval,
                        } = ready;
                        if self.hooks.any(HookEvent::PreToolUse, tool.name()) {
                            match self.before(call, tool, args, approval, &ctx).await {
                                Ok((checked, asked)) => (args, approval) = (checked, asked),
                                Err(err) => {
                                    crate::spans::tool_failed(&traced, &err);
                                    return (index, Err(err));
                                }
                            }
                        }
                        if let Some(ask) = approval {
                            if let Err(err) = self.approve(call, tool, &title, ask).await {
                                return (index, Err(err));
                            }
                            // A call a hook sent for approval is already running.
                            if !approved {
                                self.emit(call, ToolCallState::Running, &title, None);
                            }
                        }
                        let hooked_args = self
                            .hooks
                            .any(HookEvent::PostToolUse, tool.name())
                            .then(|| args.clone());
                        let mut result = tool.execute(args, &ctx).await;
                        if let (Some(args), Ok(output)) = (hooked_args, &mut result) {
                            self.after(call, tool, args, output, &ctx).await;
                        }
                        if let Err(err) = &result {
                            crate::spans::tool_failed(&traced, err);
                        }
                        (index, result)
                    }));
                }
            }
            titles.push(title);
            inputs.push(input);
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
                        Ok(output) => self.emit_completed(call, output),
                        Err(err) => {
                            let error = Some(err.to_string());
                            self.emit(call, ToolCallState::Error, &titles[index], error);
                        }
                    }
                    results[index] = Some(result);
                }
            }
        }
        // Dropping the futures stops waiting (and kills commands still running);
        // blocking work already handed to the pool stops at its next cancellation
        // check.
        drop(running);

        let mut turn = TurnResults {
            messages: Vec::with_capacity(calls.len()),
            summaries: Vec::with_capacity(calls.len()),
            parts: Vec::with_capacity(calls.len()),
            cancelled,
        };
        let finished = calls.iter().zip(results).zip(titles).zip(inputs);
        for (((call, result), title), input) in finished {
            let (result, title) = match result {
                Some(Ok(output)) => (Ok(output.output), output.title),
                Some(Err(err)) => (Err(err.to_string()), title),
                None => {
                    let err = ToolError::Cancelled.to_string();
                    self.emit(call, ToolCallState::Error, &title, Some(err.clone()));
                    (Err(err), title)
                }
            };
            let content = match &result {
                Ok(output) => output.clone(),
                Err(err) => format!("error: {err}"),
            };
            turn.messages.push(Message::tool_result(&call.id, content));
            turn.summaries.push(ToolCallSummary {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                title: title.clone(),
                ok: result.is_ok(),
            });
            turn.parts
                .push(Part::tool_call(&call.id, &call.name, input, title, result));
        }
        turn
    }

    /// The checks that need no answer: the tool must be offered, its arguments must
    /// be JSON, it must not repeat itself in a loop, and no rule may deny it. A rule
    /// that says `ask` leaves the call ready but waiting for approval.
    fn prepare(&self, call: &ToolCall) -> Prepared<'a> {
        let input = parse_arguments(&call.arguments);
        let refused = |title: String, input: Value, err| Prepared {
            title,
            input,
            verdict: Err(err),
        };
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
            } else if let Some(reason) = self.registry.unavailable(&call.name) {
                ToolError::Failed {
                    tool: call.name.clone(),
                    reason: reason.to_owned(),
                }
            } else {
                ToolError::UnknownTool {
                    name: call.name.clone(),
                }
            };
            let input = input.unwrap_or_else(|_| Value::String(call.arguments.clone()));
            return refused(call.name.clone(), input, err);
        };
        let args = match input {
            Ok(args) => args,
            Err(reason) => {
                let err = ToolError::invalid_arguments(
                    tool.name(),
                    format!("arguments are not valid json: {reason}"),
                );
                return refused(
                    call.name.clone(),
                    Value::String(call.arguments.clone()),
                    err,
                );
            }
        };
        let title = tool.title(&args);
        if self.ctx.state.record_call(tool.name(), &args) {
            let err = ToolError::DoomLoop {
                tool: tool.name().to_owned(),
            };
            return refused(title, args, err);
        }
        let approval = match self.judge(tool, &args) {
            Ok(approval) => approval,
            Err(err) => return refused(title, args, err),
        };
        Prepared {
            title,
            input: args.clone(),
            verdict: Ok(Ready {
                tool,
                args,
                approval,
            }),
        }
    }

    /// The permission rules' verdict on `args`: `Err` a deny, `Some` the subjects and
    /// the rule of an `ask`.
    fn judge(&self, tool: &dyn Tool, args: &Value) -> Result<Approval, ToolError> {
        let permission = tool.permission();
        let patterns = tool.patterns(args, &self.ctx.workspace);
        let decision = self
            .permissions
            .decide(&self.ctx.state.approvals(), permission, &patterns);
        match decision {
            Decision::Deny {
                subject,
                rule,
                inherited_from,
            } => Err(ToolError::Denied {
                permission: permission.to_owned(),
                subject,
                rule: rule_text(&rule, inherited_from.as_deref()),
            }),
            Decision::Ask {
                patterns,
                rule,
                inherited_from,
            } => Ok(Some(Ask {
                patterns,
                rule: rule_text(&rule, inherited_from.as_deref()),
                by_hook: false,
            })),
            Decision::Allow => Ok(None),
        }
    }

    /// Runs the `PreToolUse` hooks of a call the rules allow: `Err` when one blocked
    /// or failed; else the input to run (rewritten by a hook, and then judged by the
    /// rules again) and the approval it needs (a hook may ask for one).
    async fn before(
        &self,
        call: &ToolCall,
        tool: &dyn Tool,
        args: Value,
        approval: Approval,
        ctx: &ToolContext<'_>,
    ) -> Result<(Value, Approval), ToolError> {
        let mut fields = serde_json::Map::new();
        fields.insert("tool_name".into(), tool.name().into());
        fields.insert("tool_input".into(), args.clone());
        fields.insert("tool_use_id".into(), call.id.clone().into());
        let verdict = self
            .hooks
            .run(HookEvent::PreToolUse, tool.name(), fields, &call.id, ctx)
            .await;
        if let Some((hook, reason)) = verdict.blocked {
            return Err(ToolError::HookBlocked {
                event: HookEvent::PreToolUse.as_str(),
                hook,
                reason,
            });
        }
        if let Some((hook, reason)) = verdict.failed {
            return Err(ToolError::HookFailed {
                event: HookEvent::PreToolUse.as_str(),
                hook,
                reason,
            });
        }
        let (args, mut approval) = match verdict.updated_input {
            Some(updated) => {
                let approval = self.judge(tool, &updated)?;
                (updated, approval)
            }
            None => (args, approval),
        };
        if let Some((hook, reason)) = verdict.ask
            && approval.is_none()
        {
            let patterns = tool.patterns(&args, &ctx.workspace);
            approval = Some(Ask {
                patterns,
                rule: format!("PreToolUse hook `{hook}`: {reason}"),
                by_hook: true,
            });
        }
        Ok((args, approval))
    }

    /// Runs the `PostToolUse` hooks of a call that succeeded: what they add (context, or
    /// a block's reason) is appended to the result the model reads.
    async fn after(
        &self,
        call: &ToolCall,
        tool: &dyn Tool,
        args: Value,
        output: &mut ToolOutput,
        ctx: &ToolContext<'_>,
    ) {
        let mut fields = serde_json::Map::new();
        fields.insert("tool_name".into(), tool.name().into());
        fields.insert("tool_input".into(), args);
        fields.insert(
            "tool_response".into(),
            serde_json::json!({
                "output": output.output,
                "title": output.title,
                "metadata": output.metadata,
            }),
        );
        fields.insert("tool_use_id".into(), call.id.clone().into());
        let verdict = self
            .hooks
            .run(HookEvent::PostToolUse, tool.name(), fields, &call.id, ctx)
            .await;
        for context in verdict.context {
            output.output.push_str("\n\n");
            output.output.push_str(POST_TOOL_USE_CONTEXT);
            output.output.push('\n');
            output.output.push_str(&context);
        }
        if let Some((_, reason)) = verdict.blocked {
            output.output.push_str("\n\n");
            output.output.push_str(POST_TOOL_USE_FEEDBACK);
            output.output.push('\n');
            output.output.push_str(&reason);
        }
    }

    /// Asks the host about `patterns`, one question at a time per session so that an
    /// `Always` answer spares the calls queued behind it.
    async fn approve(
        &self,
        call: &ToolCall,
        tool: &dyn Tool,
        title: &str,
        ask: Ask,
    ) -> Result<(), ToolError> {
        let Ask {
            patterns,
            rule,
            by_hook,
        } = ask;
        let state = self.ctx.state;
        let permission = tool.permission();
        let _one_at_a_time = state.approval_turn.lock().await;
        // Judged again: an `Always` answered while this call waited may have lifted
        // some asks (never an inherited one, nor a hook's).
        let decision = self
            .permissions
            .decide(&state.approvals(), permission, &patterns);
        let patterns = match decision {
            _ if by_hook => patterns,
            Decision::Allow => return Ok(()),
            Decision::Ask { patterns, .. } => patterns,
            // The rules do not change within a session; refuse rather than run if
            // they somehow did.
            Decision::Deny {
                subject,
                rule,
                inherited_from,
            } => {
                return Err(ToolError::Denied {
                    permission: permission.to_owned(),
                    subject,
                    rule: rule_text(&rule, inherited_from.as_deref()),
                });
            }
        };
        let request_id = state.next_approval_id(&call.id);
        let request = ApprovalRequest {
            request_id: request_id.clone(),
            permission: permission.to_owned(),
            patterns: patterns.clone(),
            title: title.to_owned(),
        };
        // Announced once the host has recorded the request, so that whoever sees the
        // event can answer it at once.
        let announce = || {
            self.ctx.observer.on_event(SessionEvent::ApprovalRequired {
                request_id: request_id.clone(),
                permission: permission.to_owned(),
                patterns: patterns.clone(),
            });
        };
        let answer = crate::spans::await_approval(permission, &request_id)
            .instrument(self.ctx.host.approve(request, &announce))
            .await;
        tracing::debug!(tool.name = %call.name, ?answer, "approval answered");
        match answer {
            ApprovalAnswer::Once => Ok(()),
            ApprovalAnswer::Always => {
                state.approvals().grant(permission, &patterns);
                Ok(())
            }
            ApprovalAnswer::Reject { message } => Err(ToolError::Rejected {
                permission: permission.to_owned(),
                subject: patterns.join(", "),
                rule,
                message,
            }),
            ApprovalAnswer::TimedOut => Err(ToolError::ApprovalTimedOut {
                permission: permission.to_owned(),
                subject: patterns.join(", "),
                rule,
            }),
        }
    }

    fn emit(&self, call: &ToolCall, state: ToolCallState, title: &str, error: Option<String>) {
        self.ctx.observer.on_event(SessionEvent::ToolCall {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            state,
            title: title.to_owned(),
            error,
            metadata: None,
        });
    }

    /// `completed`, with what the tool reports beside its output (none when it is
    /// `null`).
    fn emit_completed(&self, call: &ToolCall, output: &ToolOutput) {
        self.ctx.observer.on_event(SessionEvent::ToolCall {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            state: ToolCallState::Completed,
            title: output.title.clone(),
            error: None,
            metadata: (!output.metadata.is_null()).then(|| output.metadata.clone()),
        });
    }
}

/// A rule as the model reads it, naming the ancestor whose rule it is when it was
/// inherited.
fn rule_text(rule: &PermissionRule, inherited_from: Option<&str>) -> String {
    match inherited_from {
        Some(agent) => format!("{rule} (inherited from {agent})"),
        None => rule.to_string(),
    }
}

/// Parses the model's raw argument text. Some models send an empty string for a call
/// without arguments; that is read as `{}`.
fn parse_arguments(raw: &str) -> Result<Value, serde_json::Error> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_str(raw)
}
