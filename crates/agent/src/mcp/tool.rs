//! An MCP server's tool as a [`Tool`]: named `SERVER_TOOL`, described and typed as the
//! server lists it, judged by the same permission rules and allow-lists as a built-in
//! tool (by its name; its subject is empty, matched by `*`), its output capped as
//! `bash`'s.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use serde_json::{Value, json};

use super::server::{ListedTool, McpServer};
use crate::error::ToolError;
use crate::tools::bash::output::CappedOutput;
use crate::tools::{Tool, ToolContext, ToolOutput};
use crate::workspace::Workspace;

/// One tool of one server.
pub struct McpTool {
    name: &'static str,
    /// The tool's own name on its server.
    remote: String,
    description: String,
    parameters: Value,
    server: Arc<McpServer>,
}

/// The name the model calls a server's tool by: `SERVER_TOOL`, with characters model
/// APIs refuse in a tool name made `_`, at most 64 long.
pub fn tool_name(server: &str, tool: &str) -> String {
    let mut name: String = format!("{server}_{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    name.truncate(64);
    name
}

/// Tool names live as long as the worker ([`Tool::name`] is `'static`); each distinct
/// one is kept once.
fn intern(name: String) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .expect("names lock");
    if let Some(known) = names.get(name.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.insert(leaked);
    leaked
}

impl McpTool {
    pub fn new(server: Arc<McpServer>, listed: &ListedTool) -> Self {
        let mut parameters = listed.input_schema.clone();
        if let Value::Object(map) = &mut parameters
            && !map.contains_key("type")
        {
            map.insert("type".into(), "object".into());
        }
        Self {
            name: intern(tool_name(&server.def().name, &listed.name)),
            remote: listed.name.clone(),
            description: if listed.description.is_empty() {
                format!("{} (MCP server {})", listed.name, server.def().name)
            } else {
                listed.description.clone()
            },
            parameters,
            server,
        }
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &'static str {
        self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn subject(&self, _args: &Value, _workspace: &Workspace) -> String {
        String::new()
    }

    fn title(&self, _args: &Value) -> String {
        self.name.to_owned()
    }

    /// A local server runs in the session's workspace and may write there.
    fn uses_files(&self) -> bool {
        self.server.def().is_local()
    }

    fn changes_files(&self) -> bool {
        self.server.def().is_local()
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => Default::default(),
            other => {
                return Err(ToolError::invalid_arguments(
                    self.name,
                    format!("arguments must be an object, not {other}"),
                ));
            }
        };
        let called = self
            .server
            .call(
                &self.remote,
                arguments,
                &ctx.workspace,
                ctx.permissions,
                &ctx.cancel,
            )
            .await;
        if self.server.def().is_local() {
            ctx.workspace.wrote_anywhere();
        }
        let result = called.map_err(|reason| ToolError::Failed {
            tool: self.name.into(),
            reason,
        })?;
        let result = serde_json::to_value(&result).unwrap_or(Value::Null);
        let (text, kinds) = render(&result);
        let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
        if is_error {
            return Err(ToolError::Failed {
                tool: self.name.into(),
                reason: if text.is_empty() {
                    "the server reported an error without a message".into()
                } else {
                    text
                },
            });
        }
        let mut capped = CappedOutput::default();
        capped.push(text.as_bytes());
        Ok(ToolOutput {
            title: self.name.to_owned(),
            output: capped.render(),
            metadata: json!({
                "mcp_server": self.server.def().name,
                "mcp_tool": self.remote,
                "content": kinds,
                "bytes": capped.total(),
                "truncated": capped.truncated(),
            }),
        })
    }
}

/// A `tools/call` result's content as text for the model: text as is, images, audio
/// and resources described (a resource's text included), the structured content when
/// there is nothing else; and the kinds of content it held.
fn render(result: &Value) -> (String, Vec<String>) {
    let mut parts = Vec::new();
    let mut kinds = Vec::new();
    for item in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        kinds.push(kind.to_owned());
        let s = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or("");
        parts.push(match kind {
            "text" => s("text").to_owned(),
            "image" | "audio" => format!(
                "[{kind}: {}, {} bytes]",
                s("mimeType"),
                s("data").len() / 4 * 3
            ),
            "resource" => {
                let resource = item.get("resource").cloned().unwrap_or(Value::Null);
                let field = |key: &str| resource.get(key).and_then(Value::as_str).unwrap_or("");
                match resource.get("text").and_then(Value::as_str) {
                    Some(text) => format!("[resource {}]\n{text}", field("uri")),
                    None => format!("[resource {}: {}, binary]", field("uri"), field("mimeType")),
                }
            }
            "resource_link" => format!("[resource link: {} {}]", s("uri"), s("name")),
            other => format!("[{other} content]"),
        });
    }
    if parts.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        parts.push(structured.to_string());
    }
    (parts.join("\n"), kinds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_opencode_and_stay_valid_for_model_apis() {
        assert_eq!(tool_name("everything", "echo"), "everything_echo");
        assert_eq!(tool_name("git-hub", "create.issue"), "git-hub_create_issue");
        assert_eq!(tool_name("s", &"x".repeat(100)).len(), 64);
    }

    #[test]
    fn content_is_text_for_the_model_with_images_and_resources_described() {
        let result = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
            {"type": "resource_link", "uri": "file:///b", "name": "b"}
        ]});
        let (text, kinds) = render(&result);
        assert_eq!(
            text,
            "hello\n[image: image/png, 3 bytes]\n[resource file:///a.txt]\ninside\n[resource link: file:///b b]"
        );
        assert_eq!(kinds, ["text", "image", "resource", "resource_link"]);
        let (text, _) = render(&json!({"content": [], "structuredContent": {"sum": 5}}));
        assert_eq!(text, r#"{"sum":5}"#);
    }
}
