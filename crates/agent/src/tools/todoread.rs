//! `todoread`: the session's current todo list.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput, todowrite};
use crate::error::ToolError;
use crate::workspace::Workspace;

/// Reads the todo list.
#[derive(Debug, Clone, Copy, Default)]
pub struct TodoReadTool;

#[async_trait]
impl Tool for TodoReadTool {
    fn name(&self) -> &'static str {
        "todoread"
    }

    /// Works on no file: the list is the session's.
    fn uses_files(&self) -> bool {
        false
    }

    fn description(&self) -> &str {
        "Returns your todo list for this session (as last written with todowrite). Use \
         it to check what is still open before continuing or finishing."
    }

    fn parameters(&self) -> Value {
        json!({ "type": "object", "properties": {}, "additionalProperties": false })
    }

    fn subject(&self, _args: &Value, _workspace: &Workspace) -> String {
        String::new()
    }

    fn title(&self, _args: &Value) -> String {
        "read todos".to_owned()
    }

    async fn execute(&self, _args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let todos = ctx.state.todos();
        let (title, output) = todowrite::render(&todos);
        Ok(ToolOutput {
            title,
            output,
            metadata: json!({ "todos": todos }),
        })
    }
}
