//! `todoread`: the session's current todo list.

use std::sync::LazyLock;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput, schema::parameters, todowrite};
use crate::error::ToolError;
use crate::workspace::Workspace;

/// Reads the todo list.
#[derive(Debug, Clone, Copy, Default)]
pub struct TodoReadTool;

// No arguments. Only the schema is made from it: the tool ignores what a call sends.
// schemars leaves out an empty `properties`; the schema offered has always had one.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("properties" = {}))]
pub(super) struct Args {}

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
        static PARAMETERS: LazyLock<Value> = LazyLock::new(parameters::<Args>);
        PARAMETERS.clone()
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
