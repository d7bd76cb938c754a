//! `edit`: exact string replacement in a file.
//!
//! Exact on purpose: the model quotes the text it wants to change, and a quote that
//! matches nowhere, or in several places, is an error it must fix with more context,
//! never a guess about which place it meant.

use std::sync::LazyLock;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Tool, ToolContext, ToolOutput, file_subject, parse_args, run_blocking, schema::parameters,
    str_arg,
};
use crate::error::ToolError;
use crate::workspace::Workspace;

/// Replaces text in a file, or creates a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditTool;

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct Args {
    /// Path of the file, relative to the workspace root or absolute inside it
    file_path: String,
    /// The exact text to replace (empty to create a new file)
    old_string: String,
    /// The text to replace it with
    new_string: String,
    /// Replace every occurrence instead of exactly one (default false)
    #[serde(default)]
    replace_all: bool,
}

#[async_trait]
impl Tool for EditTool {
    fn name(&self) -> &'static str {
        "edit"
    }

    /// Changes files: its own writes.
    fn changes_files(&self) -> bool {
        true
    }

    fn description(&self) -> &str {
        "Replaces exact text in a file. `oldString` must match the file's text exactly \
         (including whitespace and indentation) and exactly once; include enough \
         surrounding lines to make it unique, or set `replaceAll` to replace every \
         occurrence. With an empty `oldString` and a file that does not exist yet, \
         creates the file with `newString` as its content. Read the file first so the \
         quote is exact."
    }

    fn parameters(&self) -> Value {
        static PARAMETERS: LazyLock<Value> = LazyLock::new(parameters::<Args>);
        PARAMETERS.clone()
    }

    fn permission(&self) -> &'static str {
        "edit"
    }

    fn subject(&self, args: &Value, workspace: &Workspace) -> String {
        file_subject(args, workspace)
    }

    fn title(&self, args: &Value) -> String {
        format!("edit {}", str_arg(args, "filePath").unwrap_or("?"))
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(self.name(), args)?;
        if args.old_string == args.new_string {
            return Err(ToolError::invalid_arguments(
                self.name(),
                "oldString and newString are the same; there is nothing to change",
            ));
        }
        let workspace = ctx.workspace.clone();
        run_blocking(self.name(), move || edit(&workspace, &args)).await
    }
}

fn edit(workspace: &Workspace, args: &Args) -> Result<ToolOutput, ToolError> {
    let path = workspace.resolve(&args.file_path)?;
    let shown = workspace.relative(&path);
    let refused = |reason: String| ToolError::Refused {
        action: "edit",
        path: shown.clone(),
        reason,
    };

    if args.old_string.is_empty() {
        if std::fs::symlink_metadata(&path).is_ok() {
            return Err(refused(
                "the file exists and oldString is empty; quote the text to replace, or use \
                 the write tool to replace the whole file"
                    .into(),
            ));
        }
        super::write::create_parents(&path, &shown)?;
        workspace.wrote(&path);
        std::fs::write(&path, &args.new_string)
            .map_err(|err| ToolError::io("create", &shown, err))?;
        return Ok(ToolOutput {
            title: format!("edit {shown}"),
            output: format!("created {shown}"),
            metadata: json!({ "path": shown, "created": true, "replacements": 0 }),
        });
    }

    let bytes = std::fs::read(&path).map_err(|err| ToolError::io("read", &shown, err))?;
    let text =
        String::from_utf8(bytes).map_err(|_| refused("it is not a utf-8 text file".into()))?;
    let count = text.matches(args.old_string.as_str()).count();
    match count {
        0 => {
            return Err(refused(
                "oldString was not found in the file; read the file and quote its text \
                 exactly, including whitespace"
                    .into(),
            ));
        }
        1 => {}
        n if !args.replace_all => {
            return Err(refused(format!(
                "oldString matches {n} places; add surrounding lines to make it unique, \
                 or set replaceAll to replace all of them"
            )));
        }
        _ => {}
    }
    let edited = if args.replace_all {
        text.replace(&args.old_string, &args.new_string)
    } else {
        text.replacen(&args.old_string, &args.new_string, 1)
    };
    workspace.wrote(&path);
    super::write::replace_file(&path, edited.as_bytes(), &shown)?;
    let output = if count == 1 {
        format!("edited {shown}: replaced 1 occurrence")
    } else {
        format!("edited {shown}: replaced {count} occurrences")
    };
    Ok(ToolOutput {
        title: format!("edit {shown}"),
        output,
        metadata: json!({ "path": shown, "created": false, "replacements": count }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, ToolContext<'static>) {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("a.txt"), "one two\ntwo three\n").expect("write");
        let workspace = Workspace::new(dir.path()).expect("workspace");
        (dir, crate::tools::test_context(workspace))
    }

    async fn edit(ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        EditTool.execute(args, ctx).await
    }

    fn content(dir: &tempfile::TempDir, file: &str) -> String {
        std::fs::read_to_string(dir.path().join(file)).expect("read back")
    }

    #[tokio::test]
    async fn edit_replaces_a_unique_match() {
        let (dir, ctx) = setup();
        let out = edit(
            &ctx,
            json!({"filePath": "a.txt", "oldString": "one", "newString": "1"}),
        )
        .await
        .expect("edit");
        assert_eq!(out.output, "edited a.txt: replaced 1 occurrence");
        assert_eq!(content(&dir, "a.txt"), "1 two\ntwo three\n");
    }

    #[tokio::test]
    async fn edit_refuses_ambiguous_and_missing_matches_and_leaves_the_file() {
        let (dir, ctx) = setup();
        let err = edit(
            &ctx,
            json!({"filePath": "a.txt", "oldString": "two", "newString": "2"}),
        )
        .await
        .expect_err("two matches");
        assert!(err.to_string().contains("matches 2 places"), "{err}");
        let err = edit(
            &ctx,
            json!({"filePath": "a.txt", "oldString": "four", "newString": "4"}),
        )
        .await
        .expect_err("no match");
        assert!(err.to_string().contains("was not found"), "{err}");
        assert_eq!(content(&dir, "a.txt"), "one two\ntwo three\n");
    }

    #[tokio::test]
    async fn replace_all_replaces_every_match() {
        let (dir, ctx) = setup();
        let out = edit(
            &ctx,
            json!({"filePath": "a.txt", "oldString": "two", "newString": "2", "replaceAll": true}),
        )
        .await
        .expect("edit");
        assert_eq!(out.metadata["replacements"], json!(2));
        assert_eq!(content(&dir, "a.txt"), "one 2\n2 three\n");
    }

    #[tokio::test]
    async fn empty_old_string_creates_a_missing_file_only() {
        let (dir, ctx) = setup();
        edit(
            &ctx,
            json!({"filePath": "new/b.txt", "oldString": "", "newString": "hello\n"}),
        )
        .await
        .expect("create");
        assert_eq!(content(&dir, "new/b.txt"), "hello\n");
        let err = edit(
            &ctx,
            json!({"filePath": "a.txt", "oldString": "", "newString": "x"}),
        )
        .await
        .expect_err("exists");
        assert!(err.to_string().contains("the file exists"), "{err}");
    }

    #[tokio::test]
    async fn edit_refuses_paths_outside_and_no_op_edits() {
        let (_dir, ctx) = setup();
        let err = edit(
            &ctx,
            json!({"filePath": "../x.txt", "oldString": "", "newString": "x"}),
        )
        .await
        .expect_err("outside");
        assert_eq!(err.to_string(), "path ../x.txt is outside the workspace");
        let err = edit(
            &ctx,
            json!({"filePath": "a.txt", "oldString": "one", "newString": "one"}),
        )
        .await
        .expect_err("same");
        assert!(err.to_string().contains("the same"), "{err}");
        let err = edit(
            &ctx,
            json!({"filePath": "missing.txt", "oldString": "a", "newString": "b"}),
        )
        .await
        .expect_err("missing");
        assert_eq!(err.to_string(), "path missing.txt does not exist");
    }
}
