//! Running the hooks a session's spec carries (`taskwire_definitions::hooks`): the
//! operator's and the agent author's own checks around the agent, as Claude Code runs
//! its hooks.
//!
//! A hook is given the event as JSON (Claude Code's fields: `session_id`, `cwd`,
//! `hook_event_name`, `tool_name`, `tool_input`, `tool_use_id`, `tool_response`,
//! `source`, `trigger`, `stop_hook_active`, `last_assistant_message`; and taskwire's
//! `task_id` and `agent`) and answers:
//!
//! - **a command** (`bash -c` in the workspace, under the sandbox of `bash`, the
//!   event on stdin): exit 0 passes, and its stdout may be a JSON answer; exit 2
//!   blocks, with its stderr as the reason; any other exit, a timeout or a command
//!   that cannot start is a failure;
//! - **an HTTP hook** (a POST of the event to a URL the worker allows): a 2xx response
//!   passes, and its body may be a JSON answer; anything else is a failure.
//!
//! A JSON answer may hold `{"decision": "block", "reason": "..."}`, and in
//! `hookSpecificOutput`: `permissionDecision` (`allow`, `ask`, `deny`) with
//! `permissionDecisionReason`, `updatedInput` and `additionalContext`.
//!
//! What each event does with the answers ([`HookEvent`]): `PreToolUse` blocks the call
//! (the model reads the reason), sends it for approval (`ask`), or runs it with the
//! rewritten input (judged by the permission rules again); a failing `PreToolUse` hook
//! refuses the call, since a check that could not run has not passed. `PostToolUse`
//! adds its context, or a block's reason, to the result the model reads. `SessionStart`
//! adds its context (or a command's plain stdout) to the system prompt. `Stop` and
//! `SubagentStop` may block the answer once: the session goes on with the reason as a
//! user message. Every run is a [`SessionEvent::Hook`] and an `execute_hook` span; a
//! failure is reported there and logged, never passed silently.

mod command;
mod http;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::session::{SessionEvent, SessionObserver};
use crate::tools::{CommandSandbox, ToolContext};
pub use taskwire_definitions::hooks::{Hook, HookAction, HookEvent};

/// The most of a hook's stdout or stderr that is read.
const MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// What a `Stop` or `SubagentStop` hook's block tells the model, before its reason.
pub const STOP_FEEDBACK: &str = "Stop hook feedback:";

/// How a worker runs hooks: the sandbox of its commands, the HTTP client and the URLs
/// HTTP hooks may reach. Cheap to clone.
#[derive(Clone)]
pub struct HookRunner {
    inner: Arc<Inner>,
}

struct Inner {
    sandbox: CommandSandbox,
    /// Built at the first HTTP hook: a worker without any never builds one.
    http: std::sync::OnceLock<reqwest::Client>,
    /// URL prefixes an HTTP hook's URL must start with.
    allowed_urls: Vec<String>,
    env: crate::mcp::EnvLookup,
}

impl std::fmt::Debug for HookRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookRunner")
            .field("allowed_urls", &self.inner.allowed_urls)
            .finish_non_exhaustive()
    }
}

impl Default for HookRunner {
    /// Commands in the probed sandbox; no HTTP hook allowed.
    fn default() -> Self {
        Self::new(CommandSandbox::probed(), Vec::new())
    }
}

impl HookRunner {
    /// Commands confined by `sandbox`; HTTP hooks only to URLs starting with one of
    /// `allowed_urls`; `{env:VAR}` in their headers read from the process environment.
    pub fn new(sandbox: CommandSandbox, allowed_urls: Vec<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                sandbox,
                http: std::sync::OnceLock::new(),
                allowed_urls,
                env: Arc::new(|name: &str| std::env::var(name).ok()),
            }),
        }
    }

    /// Whether an HTTP hook may POST to `url`.
    pub fn allows_url(&self, url: &str) -> bool {
        self.inner
            .allowed_urls
            .iter()
            .any(|prefix| !prefix.is_empty() && url.starts_with(prefix.as_str()))
    }
}

/// What a session's hooks need besides its spec: where they run and who runs them.
#[derive(Debug, Clone, Default)]
pub struct HookContext {
    pub runner: HookRunner,
    /// The task the session runs for (`task_id` in the event).
    pub task_id: String,
    /// A child task's session: its end is `SubagentStop`, not `Stop`.
    pub subagent: bool,
}

/// One hook's answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    Pass {
        context: Option<String>,
        updated_input: Option<Value>,
        /// `permissionDecision: ask`, with its reason.
        ask: Option<String>,
    },
    Block {
        reason: String,
    },
    Failed {
        reason: String,
    },
}

/// What a session's hooks for one event came to.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    /// The hook that blocked (its label) and why; the first block stops the rest.
    pub blocked: Option<(String, String)>,
    /// A hook that failed (its label) and why. For `PreToolUse` the first failure
    /// stops the rest; other events go on.
    pub failed: Option<(String, String)>,
    /// Context the hooks added, in order.
    pub context: Vec<String>,
    /// The input as the last hook that rewrote it left it.
    pub updated_input: Option<Value>,
    /// A hook asked for approval: its label and reason.
    pub ask: Option<(String, String)>,
}

/// A session's hooks, bound to the session.
pub(crate) struct SessionHooks<'a> {
    pub hooks: &'a [Hook],
    pub context: &'a HookContext,
    pub session_id: &'a str,
    pub agent: &'a str,
}

impl SessionHooks<'_> {
    /// Whether any hook of `event` matches `subject`.
    pub fn any(&self, event: HookEvent, subject: &str) -> bool {
        self.hooks
            .iter()
            .any(|h| h.event == event && h.matches(subject))
    }

    /// The end of the session's run: `Stop` for a root task, `SubagentStop` for a child.
    pub fn stop_event(&self) -> HookEvent {
        if self.context.subagent {
            HookEvent::SubagentStop
        } else {
            HookEvent::Stop
        }
    }

    /// Runs the hooks of `event` matching `subject`, in order, with `fields` added to
    /// the event's common ones; `call_id` names the tool call they run for.
    pub async fn run(
        &self,
        event: HookEvent,
        subject: &str,
        fields: Map<String, Value>,
        call_id: &str,
        ctx: &ToolContext<'_>,
    ) -> Verdict {
        let mut verdict = Verdict::default();
        let mut input = self.input(event, fields, ctx);
        for hook in self
            .hooks
            .iter()
            .filter(|h| h.event == event && h.matches(subject))
        {
            let started = Instant::now();
            let span = crate::spans::execute_hook(hook, call_id);
            let answer = span.instrument(self.run_one(hook, &input, ctx)).await;
            let label = hook.label().to_owned();
            let (outcome, message) = match &answer {
                Answer::Pass { context, .. } => ("ok", context.clone()),
                Answer::Block { reason } => ("blocked", Some(reason.clone())),
                Answer::Failed { reason } => {
                    span.trace.fail("hook_failed");
                    tracing::warn!(hook.event = %event, hook = %label, source = %hook.source, %reason, "hook failed");
                    ("failed", Some(reason.clone()))
                }
            };
            report(
                ctx.observer,
                event,
                hook,
                subject,
                call_id,
                outcome,
                message,
                started.elapsed(),
            );
            match answer {
                Answer::Pass {
                    context,
                    updated_input,
                    ask,
                } => {
                    verdict.context.extend(context);
                    if let Some(reason) = ask {
                        verdict.ask.get_or_insert((label, reason));
                    }
                    if let Some(updated) = updated_input {
                        // The next hook sees the input as rewritten.
                        input.insert("tool_input".into(), updated.clone());
                        verdict.updated_input = Some(updated);
                    }
                }
                Answer::Block { reason } => {
                    verdict.blocked = Some((label, reason));
                    break;
                }
                Answer::Failed { reason } => {
                    verdict.failed.get_or_insert((label, reason));
                    if event == HookEvent::PreToolUse {
                        break;
                    }
                }
            }
        }
        verdict
    }

    /// The event's JSON: the common fields, then `fields`.
    fn input(
        &self,
        event: HookEvent,
        fields: Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Map<String, Value> {
        let mut input = Map::new();
        input.insert("session_id".into(), json!(self.session_id));
        input.insert("task_id".into(), json!(self.context.task_id));
        input.insert("agent".into(), json!(self.agent));
        input.insert(
            "cwd".into(),
            json!(ctx.workspace.root().display().to_string()),
        );
        input.insert("hook_event_name".into(), json!(event.as_str()));
        input.extend(fields);
        input
    }

    async fn run_one(
        &self,
        hook: &Hook,
        input: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Answer {
        let timeout = Duration::from_secs(u64::from(hook.timeout_secs()));
        let body = Value::Object(input.clone()).to_string();
        let runner = &self.context.runner.inner;
        let raw = match &hook.action {
            HookAction::Command { command } => {
                // The command runs in the session's files: make them first.
                if let Err(err) = ctx.host.ensure_workspace().await {
                    return Answer::Failed {
                        reason: format!("the workspace could not be made ready: {}", err.message),
                    };
                }
                command::run(command, &body, timeout, &runner.sandbox, ctx).await
            }
            HookAction::Http { url, headers } => {
                if !self.context.runner.allows_url(url) {
                    return Answer::Failed {
                        reason: format!(
                            "{url} is not among the worker's allowed hook URLs (hook_urls)"
                        ),
                    };
                }
                let client = runner.http.get_or_init(|| {
                    reqwest::Client::builder()
                        // An allowed URL must not hand the event on to one that is not.
                        .redirect(reqwest::redirect::Policy::none())
                        .build()
                        .unwrap_or_default()
                });
                http::post(client, url, headers, &runner.env, body, timeout).await
            }
        };
        match raw {
            Raw::Exited {
                code: 0, stdout, ..
            } => parse_answer(event_of(input), &stdout),
            Raw::Exited {
                code: 2, stderr, ..
            } => Answer::Block {
                reason: non_empty(stderr.trim(), "(the hook gave no reason)"),
            },
            Raw::Exited { code, stderr, .. } => Answer::Failed {
                reason: format!(
                    "exited with code {code}{}",
                    if stderr.trim().is_empty() {
                        String::new()
                    } else {
                        format!(": {}", stderr.trim())
                    }
                ),
            },
            Raw::Failed(reason) => Answer::Failed { reason },
        }
    }
}

/// What running a hook gave, before it is read as an answer. An HTTP hook's 2xx is
/// exit 0 with the body as stdout.
#[derive(Debug)]
pub(crate) enum Raw {
    Exited {
        code: i32,
        stdout: String,
        stderr: String,
    },
    Failed(String),
}

fn event_of(input: &Map<String, Value>) -> Option<HookEvent> {
    input
        .get("hook_event_name")
        .and_then(Value::as_str)
        .and_then(HookEvent::parse)
}

fn non_empty(text: &str, otherwise: &str) -> String {
    if text.is_empty() {
        otherwise.to_owned()
    } else {
        text.to_owned()
    }
}

/// Reads a passing hook's output: JSON when it is an object, else plain text (context
/// for `SessionStart`, ignored otherwise).
pub(crate) fn parse_answer(event: Option<HookEvent>, stdout: &str) -> Answer {
    let text = stdout.trim();
    let plain = || Answer::Pass {
        context: (event == Some(HookEvent::SessionStart) && !text.is_empty())
            .then(|| text.to_owned()),
        updated_input: None,
        ask: None,
    };
    if !text.starts_with('{') {
        return plain();
    }
    let Ok(Value::Object(answer)) = serde_json::from_str::<Value>(text) else {
        return Answer::Failed {
            reason: format!("answered with invalid JSON: {}", truncate(text, 200)),
        };
    };
    let specific = answer.get("hookSpecificOutput").and_then(Value::as_object);
    let str_of = |map: Option<&Map<String, Value>>, key: &str| {
        map.and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let reason = str_of(Some(&answer), "reason")
        .or_else(|| str_of(specific, "permissionDecisionReason"))
        .unwrap_or_default();
    let decision = str_of(specific, "permissionDecision")
        .or_else(|| str_of(Some(&answer), "decision"))
        .unwrap_or_default();
    match decision.as_str() {
        "block" | "deny" => {
            return Answer::Block {
                reason: non_empty(reason.trim(), "(the hook gave no reason)"),
            };
        }
        "" | "allow" | "approve" | "ask" => {}
        other => {
            return Answer::Failed {
                reason: format!("answered with an unknown decision `{other}`"),
            };
        }
    }
    let context = str_of(specific, "additionalContext").filter(|c| !c.trim().is_empty());
    let updated_input = specific.and_then(|m| m.get("updatedInput")).cloned();
    if let Some(updated) = &updated_input
        && !updated.is_object()
    {
        return Answer::Failed {
            reason: "answered with an updatedInput that is not an object".into(),
        };
    }
    Answer::Pass {
        context,
        updated_input,
        ask: (decision == "ask").then(|| non_empty(reason.trim(), "a hook asked for approval")),
    }
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

#[allow(clippy::too_many_arguments)]
fn report(
    observer: &dyn SessionObserver,
    event: HookEvent,
    hook: &Hook,
    subject: &str,
    call_id: &str,
    outcome: &str,
    message: Option<String>,
    took: Duration,
) {
    observer.on_event(SessionEvent::Hook {
        event: event.as_str().to_owned(),
        hook: truncate(hook.label(), 200),
        source: hook.source.clone(),
        subject: subject.to_owned(),
        call_id: call_id.to_owned(),
        outcome: outcome.to_owned(),
        message: message.map(|m| truncate(&m, 2000)),
        duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
    });
}

#[cfg(test)]
mod tests;
