//! `todowrite`: replace the session's todo list, the model's plan for a multi-step
//! task. The list lives in the session state, and survives a resume because the
//! transcript keeps the last `todowrite` call (see `Transcript::todos`).

use std::sync::LazyLock;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput, parse_args, schema::parameters};
use crate::error::ToolError;
use crate::workspace::Workspace;

/// One item of the todo list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
// The doc above is for readers of the code; the model's schema has none for an item.
#[schemars(description = "")]
pub struct Todo {
    /// Unique id of the item
    pub id: String,
    /// What to do
    pub content: String,
    pub status: TodoStatus,
    pub priority: TodoPriority,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TodoPriority {
    High,
    Medium,
    Low,
}

impl Todo {
    /// Still to do: neither completed nor cancelled.
    pub fn is_open(&self) -> bool {
        matches!(self.status, TodoStatus::Pending | TodoStatus::InProgress)
    }
}

/// Replaces the todo list.
#[derive(Debug, Clone, Copy, Default)]
pub struct TodoWriteTool;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    /// The complete, updated todo list
    todos: Vec<Todo>,
}

/// The list as the model reads it, and the title both todo tools use.
pub(super) fn render(todos: &[Todo]) -> (String, String) {
    let open = todos.iter().filter(|todo| todo.is_open()).count();
    let output = serde_json::to_string_pretty(todos).unwrap_or_else(|_| "[]".to_owned());
    (format!("{open} open todos"), output)
}

#[async_trait]
impl Tool for TodoWriteTool {
    fn name(&self) -> &'static str {
        "todowrite"
    }

    /// Works on no file: the list is the session's.
    fn uses_files(&self) -> bool {
        false
    }

    fn description(&self) -> &str {
        "Replaces your todo list for this session with `todos` (always send the whole \
         list). Use it to plan tasks with three or more steps and to track progress: \
         mark an item in_progress when you start it (one at a time) and completed as \
         soon as it is done; cancel items that no longer apply."
    }

    fn parameters(&self) -> Value {
        static PARAMETERS: LazyLock<Value> = LazyLock::new(parameters::<Args>);
        PARAMETERS.clone()
    }

    fn subject(&self, _args: &Value, _workspace: &Workspace) -> String {
        String::new()
    }

    fn title(&self, args: &Value) -> String {
        let count = args
            .get("todos")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        format!("update {count} todos")
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(self.name(), args)?;
        for (index, todo) in args.todos.iter().enumerate() {
            if args.todos[..index].iter().any(|other| other.id == todo.id) {
                return Err(ToolError::invalid_arguments(
                    self.name(),
                    format!("todo id {} is used twice", todo.id),
                ));
            }
        }
        let (title, output) = render(&args.todos);
        let metadata = json!({ "todos": &args.todos });
        ctx.state.set_todos(args.todos);
        Ok(ToolOutput {
            title,
            output,
            metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{TodoReadTool, test_context};

    #[tokio::test]
    async fn todowrite_replaces_the_list_and_todoread_returns_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let ctx = test_context(Workspace::new(dir.path()).expect("workspace"));
        let todos = json!([
            {"id": "1", "content": "write tests", "status": "completed", "priority": "high"},
            {"id": "2", "content": "fix bug", "status": "in_progress", "priority": "medium"},
        ]);
        let out = TodoWriteTool
            .execute(json!({ "todos": todos }), &ctx)
            .await
            .expect("written");
        assert_eq!(out.title, "1 open todos");
        assert_eq!(ctx.state.todos().len(), 2);
        assert_eq!(ctx.state.todos()[1].status, TodoStatus::InProgress);

        let read = TodoReadTool.execute(json!({}), &ctx).await.expect("read");
        assert_eq!(read.output, out.output);
        let back: Vec<Todo> = serde_json::from_str(&read.output).expect("json list");
        assert_eq!(back, ctx.state.todos());
    }

    #[tokio::test]
    async fn bad_todo_lists_are_refused_and_keep_the_old_list() {
        let dir = tempfile::tempdir().expect("temp dir");
        let ctx = test_context(Workspace::new(dir.path()).expect("workspace"));
        let item = json!({"id": "1", "content": "x", "status": "pending", "priority": "low"});
        let err = TodoWriteTool
            .execute(json!({ "todos": [item.clone(), item] }), &ctx)
            .await
            .expect_err("duplicate");
        assert!(err.to_string().contains("todo id 1 is used twice"), "{err}");
        let err = TodoWriteTool
            .execute(
                json!({ "todos": [{"id": "1", "content": "x", "status": "done", "priority": "low"}] }),
                &ctx,
            )
            .await
            .expect_err("bad status");
        assert!(
            err.to_string()
                .starts_with("invalid arguments for todowrite"),
            "{err}"
        );
        assert!(ctx.state.todos().is_empty());
    }
}
