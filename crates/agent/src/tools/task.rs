//! `task`: delegate to a subagent that runs as a child task anywhere in the fleet
//! (OpenCode's Task tool, seed 001).
//!
//! The host starts the child and waits for it; this tool forwards the child's tool
//! calls as progress (`ChildTask` once per child, when it is submitted, then
//! `ChildToolCall`s with the child's own call ids, and the child's summary as the
//! call's metadata; see [`Progress`]), adds the
//! child's usage to the session, and returns the child's last text followed by a
//! `<task_metadata>` block with its session id (step 13), which the model passes back
//! as `session_id` to continue the child.
//!
//! The description lists the host's subagents, but the list is not the authority on
//! which names exist: hidden subagents are callable by name without being listed, so
//! the host (the coordinator's registry) decides, and an unknown name comes back as a
//! refused child. Permission rules on `task` (subject: the agent name) are checked by
//! the session before this tool runs.
//!
//! With `background: true` the call returns the child's task id as soon as it is
//! submitted, and the child runs on while the session does (see
//! [`crate::session::background`]); its result reaches the model at its next step,
//! or through `task_status`.

use std::sync::{LazyLock, Mutex, PoisonError};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput, parse_args, schema::parameters, str_arg};
use crate::error::ToolError;
use crate::host::{ChildProgress, ChildTaskRequest, ChildTaskResult, SessionHost};
use crate::session::{SessionEvent, SessionObserver, ToolCallState};
use crate::workspace::Workspace;

const DESCRIPTION: &str = include_str!("../prompt/task_tool.txt");

/// Starts child tasks through the session host.
#[derive(Debug, Default)]
pub struct TaskTool {
    /// The last description built, with the subagents it lists. Sessions offered the
    /// same subagents (in a fleet, nearly all of them) share one copy of it, which each
    /// would otherwise hold for as long as it runs, and compare their list with it
    /// instead of formatting it again.
    described: Mutex<Option<Described>>,
}

/// A description of the `task` tool and the subagents, `(name, description)`, it lists.
type Described = (Vec<(String, String)>, taskwire_llm::ToolDescription);

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    /// A short (3-5 words) description of the task
    description: String,
    /// The task for the agent to perform
    prompt: String,
    /// The type of specialized agent to use for this task
    subagent_type: String,
    /// Existing task session to continue
    #[serde(default)]
    session_id: Option<String>,
    /// The command that triggered this task
    #[serde(default)]
    command: Option<String>,
    /// Run the subagent in the background: returns its task id at once, and its result
    /// is given to you when it finishes (see task_status)
    #[serde(default)]
    background: bool,
    /// The model to run the subagent on: yours or a cheaper one (leave it out for the
    /// subagent's own model, else yours)
    #[serde(default)]
    model: Option<String>,
    /// Start the subagent from this conversation so far (yours, up to this call)
    /// instead of from its prompt alone; it then continues your thinking. Not with
    /// session_id
    #[serde(default)]
    fork: bool,
}

/// What the parent model reads from a finished child: its last text, then the
/// session id to continue it with.
pub fn task_output(text: &str, session_id: &str) -> String {
    format!("{text}\n\n<task_metadata>\nsession_id: {session_id}\n</task_metadata>")
}

impl TaskTool {
    /// The description listing `agents`, shared while the list stays the same.
    fn described(&self, agents: &[(String, String)]) -> taskwire_llm::ToolDescription {
        let mut last = self
            .described
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match &*last {
            Some((listed, description)) if listed[..] == *agents => description.clone(),
            _ => {
                let listing: Vec<String> = agents
                    .iter()
                    .map(|(name, description)| format!("- {name}: {description}"))
                    .collect();
                let description = taskwire_llm::ToolDescription::new(
                    &DESCRIPTION.replace("{agents}", &listing.join("\n")),
                );
                *last = Some((agents.to_vec(), description.clone()));
                description
            }
        }
    }
}

#[async_trait]
impl Tool for TaskTool {
    fn name(&self) -> &'static str {
        "task"
    }

    /// Works on no file: a child works in files of its own; what it hands over is made when needed.
    fn uses_files(&self) -> bool {
        false
    }

    /// Changes files: a child's changes, brought back.
    fn changes_files(&self) -> bool {
        true
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> Value {
        static PARAMETERS: LazyLock<Value> = LazyLock::new(parameters::<Args>);
        PARAMETERS.clone()
    }

    /// Rules match the agent name: `task explore allow`, `task * ask`.
    fn subject(&self, args: &Value, _workspace: &Workspace) -> String {
        str_arg(args, "subagent_type")
            .unwrap_or_default()
            .to_owned()
    }

    fn title(&self, args: &Value) -> String {
        str_arg(args, "description").unwrap_or("task").to_owned()
    }

    /// Without subagents to start there is nothing to offer.
    fn available(&self, host: &dyn SessionHost) -> bool {
        !host.subagents().is_empty()
    }

    fn definition_for(
        &self,
        definition: &taskwire_llm::ToolDef,
        host: &dyn SessionHost,
    ) -> taskwire_llm::ToolDef {
        taskwire_llm::ToolDef {
            description: self.described(host.subagents()),
            ..definition.clone()
        }
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(self.name(), args)?;
        let fork = match (args.fork, &args.session_id) {
            (false, _) => None,
            (true, Some(_)) => {
                return Err(ToolError::invalid_arguments(
                    self.name(),
                    "fork starts a new subagent from this conversation; it cannot continue session_id",
                ));
            }
            (true, None) => Some(ctx.state.fork().ok_or_else(|| ToolError::Failed {
                tool: self.name().into(),
                reason: "this conversation could not be handed to the subagent".into(),
            })?),
        };
        let request = ChildTaskRequest {
            call_id: ctx.call_id.clone(),
            description: args.description.clone(),
            prompt: args.prompt,
            subagent_type: args.subagent_type.clone(),
            session_id: args.session_id,
            command: args.command,
            background: args.background,
            model: args.model.filter(|m| !m.trim().is_empty()),
            fork,
        };
        if args.background {
            return start_in_background(request, ctx).await;
        }
        let progress = Progress::new(
            ctx.observer,
            &ctx.call_id,
            &args.subagent_type,
            &args.description,
        );
        let on_progress = |update: ChildProgress| progress.child_update(update);
        let result = ctx
            .host
            .run_child(request, &on_progress, ctx.cancel.clone())
            .await
            .map_err(|reason| ToolError::ChildFailed {
                agent: args.subagent_type.clone(),
                reason: with_listed_agents(reason, &args.subagent_type, ctx.host),
            })?;
        progress.announce(&result.task_id, &result.session_id);
        ctx.state.add_child_usage(result.usage);
        let mut output = finish(
            &args.subagent_type,
            &args.description,
            result,
            progress.calls(),
        )?;
        output.metadata["summary"] = progress.metadata()["summary"].take();
        Ok(output)
    }
}

/// Starts the child in the background and returns its task id as soon as the host
/// has submitted it.
async fn start_in_background(
    request: ChildTaskRequest,
    ctx: &ToolContext<'_>,
) -> Result<ToolOutput, ToolError> {
    let agent = request.subagent_type.clone();
    let description = request.description.clone();
    let task_id = ctx
        .state
        .background
        .start(request)
        .await
        .map_err(|reason| ToolError::ChildFailed {
            agent: agent.clone(),
            reason: with_listed_agents(reason, &agent, ctx.host),
        })?;
    Ok(ToolOutput {
        title: description,
        output: crate::session::background::started_text(&agent, &task_id),
        metadata: json!({ "task_id": task_id, "background": true }),
    })
}

/// A refusal of an agent the description does not list (a mistyped or unknown name,
/// most likely) also names the listed ones, so the model can pick a valid one.
fn with_listed_agents(reason: String, agent: &str, host: &dyn SessionHost) -> String {
    let listed = host.subagents();
    if listed.iter().any(|(name, _)| name == agent) {
        return reason;
    }
    let names: Vec<&str> = listed.iter().map(|(name, _)| name.as_str()).collect();
    format!("{reason}; the listed subagents are: {}", names.join(", "))
}

/// Turns a finished child into the tool's result: its text with the task metadata,
/// or an error naming its status when it did not succeed.
pub(crate) fn finish(
    agent: &str,
    description: &str,
    result: ChildTaskResult,
    calls: usize,
) -> Result<ToolOutput, ToolError> {
    let metadata = json!({
        "task_id": result.task_id,
        "session_id": result.session_id,
        "status": result.status,
        "tool_calls": calls,
    });
    if !result.succeeded() {
        let said = if result.text.is_empty() {
            String::new()
        } else {
            format!(": {}", result.text)
        };
        return Err(ToolError::ChildFailed {
            agent: agent.to_owned(),
            reason: task_output(
                &format!("the task ended with status {}{said}", result.status),
                &result.session_id,
            ),
        });
    }
    if let Some(reason) = result.changes_not_applied {
        // The child's answer still reaches the model, with the session to continue it.
        return Err(ToolError::ChildChangesNotApplied {
            agent: agent.to_owned(),
            reason: format!(
                "{reason}\n\nthe subagent said:\n{}",
                task_output(&result.text, &result.session_id)
            ),
        });
    }
    let mut text = result.text;
    if result.status == "max_steps" {
        text.push_str(
            "\n\n(the subagent stopped at its step limit before finishing; call task again \
             with this session_id to let it continue)",
        );
    } else if result.status == "budget_exceeded" {
        text.push_str(
            "\n\n(the subagent stopped because the task tree spent its budget; it can be \
             continued with this session_id once there is budget again)",
        );
    }
    Ok(ToolOutput {
        title: description.to_owned(),
        output: task_output(&text, &result.session_id),
        metadata,
    })
}

/// Forwards a child's progress as session events: `ChildTask` once it is submitted,
/// its tool calls with their own ids, and, as each of them ends, a `running` update of
/// the parent's call whose metadata holds the child's task and session and a summary
/// of its calls (seed 001, step 5), so that watchers see the child at work.
pub(crate) struct Progress<'c> {
    observer: &'c dyn SessionObserver,
    /// The parent's call (the `task` call, or a command's subtask) the child runs for.
    call_id: &'c str,
    agent: &'c str,
    description: &'c str,
    /// Children already announced with `ChildTask`. The host reports the submitted
    /// child first; a host that does not is covered by announcing on the first tool
    /// call, or when the child finishes.
    announced: Mutex<Vec<String>>,
    /// The announced child's task and session ids.
    child: Mutex<(String, String)>,
    /// One entry per child call, in the order first seen, updated in place.
    summary: Mutex<Vec<Value>>,
    /// The parent's call already returned (a background child): its state is not
    /// updated again, the child's own events still flow.
    background: bool,
}

impl<'c> Progress<'c> {
    pub(crate) fn new(
        observer: &'c dyn SessionObserver,
        call_id: &'c str,
        agent: &'c str,
        description: &'c str,
    ) -> Self {
        Self {
            observer,
            call_id,
            agent,
            description,
            announced: Mutex::default(),
            child: Mutex::default(),
            summary: Mutex::default(),
            background: false,
        }
    }

    /// For a background child, whose parent call has already completed.
    pub(crate) fn in_background(mut self) -> Self {
        self.background = true;
        self
    }

    /// Sends `ChildTask` for `task_id` unless it was sent already.
    pub(crate) fn announce(&self, task_id: &str, session_id: &str) {
        let mut announced = self
            .announced
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if announced.iter().any(|id| id == task_id) {
            return;
        }
        announced.push(task_id.to_owned());
        drop(announced);
        *self.child.lock().unwrap_or_else(PoisonError::into_inner) =
            (task_id.to_owned(), session_id.to_owned());
        self.observer.on_event(SessionEvent::ChildTask {
            task_id: task_id.to_owned(),
            agent: self.agent.to_owned(),
            description: self.description.to_owned(),
            session_id: session_id.to_owned(),
            call_id: self.call_id.to_owned(),
        });
    }

    /// Forwards one child update. An approval may come from a grandchild, which this
    /// session does not announce.
    pub(crate) fn child_update(&self, update: ChildProgress) {
        match update {
            ChildProgress::Started {
                task_id,
                session_id,
            } => {
                self.announce(&task_id, &session_id);
                self.report();
            }
            ChildProgress::ToolCall {
                task_id,
                call_id,
                tool,
                title,
                state,
            } => {
                if self
                    .announced
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .is_empty()
                {
                    self.announce(&task_id, "");
                }
                let entry = json!({
                    "id": call_id,
                    "task_id": task_id,
                    "tool": tool,
                    "status": state,
                    "title": title,
                });
                {
                    let mut summary = self.summary.lock().unwrap_or_else(PoisonError::into_inner);
                    match summary
                        .iter_mut()
                        .find(|e| e["id"] == entry["id"] && e["task_id"] == entry["task_id"])
                    {
                        Some(existing) => *existing = entry,
                        None => summary.push(entry),
                    }
                }
                let ended = matches!(state, ToolCallState::Completed | ToolCallState::Error);
                self.observer.on_event(SessionEvent::ChildToolCall {
                    task_id,
                    call_id,
                    tool,
                    title,
                    state,
                });
                if ended {
                    self.report();
                }
            }
            ChildProgress::ApprovalRequired {
                task_id,
                request_id,
                permission,
                patterns,
            } => self.observer.on_event(SessionEvent::ChildApprovalRequired {
                task_id,
                request_id,
                permission,
                patterns,
            }),
        }
    }

    /// The child's task and session and its calls so far, as the call's metadata.
    pub(crate) fn metadata(&self) -> Value {
        let (task_id, session_id) = self
            .child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let summary = self
            .summary
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        json!({ "task_id": task_id, "session_id": session_id, "summary": summary })
    }

    /// A `running` update of the parent's call carrying [`Self::metadata`].
    fn report(&self) {
        if self.background {
            return;
        }
        self.observer.on_event(SessionEvent::ToolCall {
            call_id: self.call_id.to_owned(),
            tool: "task".to_owned(),
            state: ToolCallState::Running,
            title: self.description.to_owned(),
            error: None,
            metadata: Some(self.metadata()),
        });
    }

    /// Child tool calls seen so far.
    pub(crate) fn calls(&self) -> usize {
        self.summary
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_offered_the_same_subagents_share_one_description() {
        let tool = TaskTool::default();
        let listed =
            |name: &str, description: &str| vec![(name.to_owned(), description.to_owned())];
        let first = tool.described(&listed("explore", "reads code"));
        let again = tool.described(&listed("explore", "reads code"));
        assert!(first.contains("- explore: reads code"), "{first}");
        assert!(first.ptr_eq(&again));
        let other = tool.described(&listed("general", "does anything"));
        assert!(other.contains("- general: does anything"), "{other}");
        assert!(!other.contains("explore"), "{other}");
        assert!(!first.ptr_eq(&other));
    }

    #[test]
    fn output_ends_with_the_task_metadata_block() {
        assert_eq!(
            task_output("found 3 files", "ses_1"),
            "found 3 files\n\n<task_metadata>\nsession_id: ses_1\n</task_metadata>"
        );
    }

    #[test]
    fn failed_children_are_errors_that_still_name_the_session() {
        let result = ChildTaskResult {
            task_id: "t1".into(),
            session_id: "s1".into(),
            status: "error".into(),
            text: "model unavailable".into(),
            usage: Default::default(),
            changes_not_applied: None,
            deferred_patch: None,
        };
        let err = finish("explore", "look", result, 0).expect_err("failed child");
        let message = err.to_string();
        assert!(
            message.starts_with(
                "subagent explore failed: the task ended with status error: model unavailable"
            ),
            "{message}"
        );
        assert!(message.contains("session_id: s1"), "{message}");
    }

    #[test]
    fn a_child_whose_changes_were_not_applied_is_an_error_with_its_answer() {
        let result = ChildTaskResult {
            task_id: "t1".into(),
            session_id: "s1".into(),
            status: "completed".into(),
            text: "edited a.txt".into(),
            usage: Default::default(),
            changes_not_applied: Some("conflict in a.txt:\n<<<<<<< your workspace".into()),
            deferred_patch: None,
        };
        let message = finish("general", "edit", result, 1)
            .expect_err("not applied")
            .to_string();
        assert!(
            message.starts_with(
                "subagent general finished, but its changes were not applied to your workspace: conflict in a.txt:"
            ),
            "{message}"
        );
        assert!(
            message.contains("edited a.txt") && message.contains("session_id: s1"),
            "{message}"
        );
    }

    #[test]
    fn max_steps_children_return_their_partial_report() {
        let result = ChildTaskResult {
            task_id: "t1".into(),
            session_id: "s1".into(),
            status: "max_steps".into(),
            text: "half done".into(),
            usage: Default::default(),
            changes_not_applied: None,
            deferred_patch: None,
        };
        let out = finish("general", "work", result, 2).expect("partial result");
        assert!(out.output.starts_with("half done\n\n(the subagent stopped"));
        assert!(out.output.ends_with("session_id: s1\n</task_metadata>"));
        assert_eq!(out.title, "work");
    }
}
