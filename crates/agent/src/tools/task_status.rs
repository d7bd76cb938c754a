//! `task_status`: how the session's background children (`task` with
//! `background: true`) are doing, with the results of those that finished; with
//! `wait: true` it first waits until the named children are all finished.
//!
//! Offered with `task` and to the same agents (an agent that lists `task` gets it);
//! its own permission key, `task_status`, is checked like any tool's (subject: the
//! task ids asked about). A result it shows counts as delivered: the child's changes
//! are brought into the workspace then, and the result is not given again at the
//! next step.

use std::sync::LazyLock;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput, parse_args, schema::parameters};
use crate::error::ToolError;
use crate::host::SessionHost;
use crate::workspace::Workspace;

const DESCRIPTION: &str = "Reports the status of the subagents you started with `task` and `background: true`, with the results of those that finished. \
`task_ids` names the ones to report (default: all of them); with `wait: true` the call returns only once they have all finished. \
Use it to collect results you need before going on; results not collected this way are given to you when the subagents finish.";

/// Reports on, and waits for, background children.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskStatusTool;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    /// The background tasks to report on (default: all of this session's)
    #[serde(default)]
    task_ids: Option<Vec<String>>,
    /// Wait until they have all finished
    #[serde(default)]
    wait: bool,
}

#[async_trait]
impl Tool for TaskStatusTool {
    fn name(&self) -> &'static str {
        "task_status"
    }

    /// Works on no file: it reports on children.
    fn uses_files(&self) -> bool {
        false
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> Value {
        static PARAMETERS: LazyLock<Value> = LazyLock::new(parameters::<Args>);
        PARAMETERS.clone()
    }

    /// Rules match the task ids asked about, space-separated (`*` for all).
    fn subject(&self, args: &Value, _workspace: &Workspace) -> String {
        match args.get("task_ids").and_then(Value::as_array) {
            Some(ids) => ids
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
            None => "*".to_owned(),
        }
    }

    fn title(&self, args: &Value) -> String {
        if args.get("wait").and_then(Value::as_bool) == Some(true) {
            "waiting for background tasks".to_owned()
        } else {
            "background tasks".to_owned()
        }
    }

    /// Listed for the agents that list `task`.
    fn listed_with(&self) -> Option<&'static str> {
        Some("task")
    }

    /// Offered where `task` is: with subagents to start.
    fn available(&self, host: &dyn SessionHost) -> bool {
        !host.subagents().is_empty()
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(self.name(), args)?;
        let background = &ctx.state.background;
        let known = background.task_ids();
        if let Some(ids) = &args.task_ids
            && let Some(unknown) = ids.iter().find(|id| !known.contains(id))
        {
            return Err(ToolError::invalid_arguments(
                self.name(),
                format!("task_ids: {unknown} is not a background task of this session"),
            ));
        }
        let ids = args.task_ids.as_deref();
        if known.is_empty() {
            return Ok(ToolOutput {
                title: self.title(&json!({})),
                output: "no background tasks were started in this session".to_owned(),
                metadata: json!({ "tasks": [] }),
            });
        }
        if args.wait {
            tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
                () = background.wait(ids) => {}
            }
        }
        let statuses = background.status(ids, ctx.host).await;
        let output = statuses
            .iter()
            .map(|s| match &s.result {
                Some(result) => result.clone(),
                None => format!(
                    "background task {} ({}: {}) {}",
                    s.task_id, s.agent, s.description, s.status
                ),
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        let tasks: Vec<Value> = statuses
            .iter()
            .map(|s| json!({ "task_id": s.task_id, "agent": s.agent, "status": s.status }))
            .collect();
        Ok(ToolOutput {
            title: format!("{} background tasks", statuses.len()),
            output,
            metadata: json!({ "tasks": tasks }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unknown_task_ids_are_refused_naming_the_field() {
        let dir = tempfile::tempdir().expect("temp dir");
        let workspace = Workspace::new(dir.path()).expect("workspace");
        let ctx = super::super::test_context(workspace);
        let err = TaskStatusTool
            .execute(json!({"task_ids": ["nope"]}), &ctx)
            .await
            .expect_err("unknown id");
        let message = err.to_string();
        assert!(
            message.contains("task_ids: nope is not a background task"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_session_without_background_tasks_says_so() {
        let dir = tempfile::tempdir().expect("temp dir");
        let workspace = Workspace::new(dir.path()).expect("workspace");
        let ctx = super::super::test_context(workspace);
        let out = TaskStatusTool
            .execute(json!({"wait": true}), &ctx)
            .await
            .expect("nothing to wait for");
        assert_eq!(
            out.output,
            "no background tasks were started in this session"
        );
    }

    #[test]
    fn the_subject_is_the_task_ids_asked_about() {
        let dir = tempfile::tempdir().expect("temp dir");
        let workspace = Workspace::new(dir.path()).expect("workspace");
        assert_eq!(
            TaskStatusTool.subject(&json!({"task_ids": ["a", "b"]}), &workspace),
            "a b"
        );
        assert_eq!(TaskStatusTool.subject(&json!({}), &workspace), "*");
    }
}
