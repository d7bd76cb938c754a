//! `list`: a directory tree, the model's first look at an unknown workspace.

use std::path::PathBuf;
use std::sync::LazyLock;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    FileGlob, Tool, ToolContext, ToolOutput, parse_args, run_blocking, schema::parameters, str_arg,
    walker,
};
use crate::error::ToolError;
use crate::workspace::Workspace;

/// Entries (files and directories) shown before the tree is cut.
const MAX_ENTRIES: usize = 200;

/// Directories that are noise for a model even where no `.gitignore` says so.
/// Only skipped below the listed directory: listing `target` itself still works.
const NOISE_DIRS: &[&str] = &[
    "node_modules",
    "target",
    "dist",
    "build",
    "vendor",
    "__pycache__",
    ".venv",
    "venv",
    ".cache",
    ".idea",
    ".vscode",
    ".zig-cache",
    "zig-out",
    "coverage",
];

/// Lists a directory tree.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListTool;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    /// Directory to list, relative to the workspace root (default: the root)
    #[serde(default)]
    path: Option<String>,
    /// Glob patterns to skip, e.g. ["*.lock", "docs/**"]
    #[serde(default)]
    ignore: Vec<String>,
}

#[async_trait]
impl Tool for ListTool {
    fn name(&self) -> &'static str {
        "list"
    }

    fn description(&self) -> &str {
        "Lists files and directories under a path (default: the workspace root) as an \
         indented tree, directories ending in `/`. Respects .gitignore and skips common \
         build and dependency directories. Shows at most 200 entries; list a subdirectory \
         or use glob to narrow down. Use `ignore` for extra glob patterns to skip."
    }

    fn parameters(&self) -> Value {
        static PARAMETERS: LazyLock<Value> = LazyLock::new(parameters::<Args>);
        PARAMETERS.clone()
    }

    fn subject(&self, args: &Value, workspace: &Workspace) -> String {
        workspace.subject(str_arg(args, "path").unwrap_or("."))
    }

    fn title(&self, args: &Value) -> String {
        format!("list {}", str_arg(args, "path").unwrap_or("."))
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(self.name(), args)?;
        let ignore = args
            .ignore
            .iter()
            .map(|pattern| FileGlob::new(self.name(), pattern))
            .collect::<Result<Vec<_>, _>>()?;
        let workspace = ctx.workspace.clone();
        let cancel = ctx.cancel.clone();
        let path = args.path.unwrap_or_else(|| ".".to_owned());
        run_blocking(self.name(), move || {
            list_tree(&workspace, &path, ignore, &cancel)
        })
        .await
    }
}

fn list_tree(
    workspace: &Workspace,
    given: &str,
    ignore: Vec<FileGlob>,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let root = workspace.resolve(given)?;
    let shown = workspace.relative(&root);
    let metadata = std::fs::metadata(&root).map_err(|err| ToolError::io("list", &shown, err))?;
    if !metadata.is_dir() {
        let reason = "it is a file; use the read tool".to_owned();
        return Err(ToolError::Refused {
            action: "list",
            path: shown,
            reason,
        });
    }

    let filter_root: PathBuf = root.clone();
    let walk = walker(&root, move |entry| {
        if entry.depth() == 0 {
            return true;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        if is_dir && NOISE_DIRS.iter().any(|noise| entry.file_name() == *noise) {
            return false;
        }
        let relative = entry
            .path()
            .strip_prefix(&filter_root)
            .unwrap_or(entry.path());
        !ignore.iter().any(|glob| glob.matches(relative))
    });

    let mut output = format!("{}/\n", shown.trim_end_matches('/'));
    let mut entries = 0usize;
    let mut truncated = false;
    for entry in walk {
        if cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        // Unreadable entries (permissions, races) are skipped rather than failing the
        // whole listing.
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        if entries == MAX_ENTRIES {
            truncated = true;
            break;
        }
        entries += 1;
        let indent = "  ".repeat(entry.depth());
        let name = entry.file_name().to_string_lossy();
        let slash = if entry.file_type().is_some_and(|t| t.is_dir()) {
            "/"
        } else {
            ""
        };
        output.push_str(&format!("{indent}{name}{slash}\n"));
    }
    if entries == 0 {
        output.push_str("  (empty)\n");
    }
    if truncated {
        output.push_str(&format!(
            "\n(showing the first {MAX_ENTRIES} entries; list a subdirectory or use glob to see more)\n"
        ));
    }
    Ok(ToolOutput {
        title: format!("list {shown}"),
        output,
        metadata: json!({ "path": shown, "entries": entries, "truncated": truncated }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, ToolContext<'static>) {
        let dir = tempfile::tempdir().expect("temp dir");
        for file in [
            "src/lib.rs",
            "src/tools/read.rs",
            "README.md",
            "target/debug/x",
            "gen/out.txt",
            ".github/ci.yml",
        ] {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().expect("has parent")).expect("mkdir");
            std::fs::write(path, "x").expect("write");
        }
        std::fs::write(dir.path().join(".gitignore"), "gen/\n").expect("write");
        let workspace = Workspace::new(dir.path()).expect("workspace");
        (dir, crate::tools::test_context(workspace))
    }

    #[tokio::test]
    async fn list_shows_an_indented_tree_respecting_gitignore() {
        let (_dir, ctx) = setup();
        let out = ListTool.execute(json!({}), &ctx).await.expect("list");
        assert_eq!(
            out.output,
            "./\n  .github/\n    ci.yml\n  .gitignore\n  README.md\n  src/\n    lib.rs\n    tools/\n      read.rs\n"
        );
    }

    #[tokio::test]
    async fn list_of_a_subdirectory_and_extra_ignores() {
        let (_dir, ctx) = setup();
        let out = ListTool
            .execute(json!({"path": "src", "ignore": ["tools"]}), &ctx)
            .await
            .expect("list");
        assert_eq!(out.output, "src/\n  lib.rs\n");
        let out = ListTool
            .execute(json!({"path": "target"}), &ctx)
            .await
            .expect("list");
        assert_eq!(out.output, "target/\n  debug/\n    x\n");
    }

    #[tokio::test]
    async fn list_caps_entries() {
        let (dir, ctx) = setup();
        std::fs::create_dir(dir.path().join("many")).expect("mkdir");
        for i in 0..250 {
            std::fs::write(dir.path().join(format!("many/f{i:03}")), "").expect("write");
        }
        let out = ListTool
            .execute(json!({"path": "many"}), &ctx)
            .await
            .expect("list");
        assert_eq!(out.metadata["entries"], json!(MAX_ENTRIES));
        assert!(out.output.contains("showing the first 200 entries"));
    }

    #[tokio::test]
    async fn list_refuses_files_and_outside_paths() {
        let (_dir, ctx) = setup();
        let err = ListTool
            .execute(json!({"path": "README.md"}), &ctx)
            .await
            .expect_err("file");
        assert!(err.to_string().contains("use the read tool"), "{err}");
        let err = ListTool
            .execute(json!({"path": ".."}), &ctx)
            .await
            .expect_err("outside");
        assert_eq!(err.to_string(), "path .. is outside the workspace");
    }
}
