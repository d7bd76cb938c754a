//! `glob`: find files by name pattern, most recently modified first.

use std::sync::LazyLock;
use std::time::SystemTime;

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

const MAX_RESULTS: usize = 100;

/// Finds files whose path matches a glob.
#[derive(Debug, Clone, Copy, Default)]
pub struct GlobTool;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    /// Glob pattern, e.g. "**/*.rs" or "*config*"
    pattern: String,
    /// Directory to search in (default: the workspace root)
    #[serde(default)]
    path: Option<String>,
}

#[async_trait]
impl Tool for GlobTool {
    fn name(&self) -> &'static str {
        "glob"
    }

    fn description(&self) -> &str {
        "Finds files by glob pattern, e.g. `*.rs` (a pattern without `/` matches file \
         names at any depth) or `src/**/*.ts` (matched against the path below `path`). \
         Returns workspace-relative paths, most recently modified first, at most 100. \
         Respects .gitignore. Use it to locate files by name; use grep to search contents."
    }

    fn parameters(&self) -> Value {
        static PARAMETERS: LazyLock<Value> = LazyLock::new(parameters::<Args>);
        PARAMETERS.clone()
    }

    fn subject(&self, args: &Value, _workspace: &Workspace) -> String {
        str_arg(args, "pattern").unwrap_or_default().to_owned()
    }

    fn title(&self, args: &Value) -> String {
        let pattern = str_arg(args, "pattern").unwrap_or("?");
        match str_arg(args, "path") {
            Some(path) => format!("glob {pattern} in {path}"),
            None => format!("glob {pattern}"),
        }
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(self.name(), args)?;
        let glob = FileGlob::new(self.name(), &args.pattern)?;
        let workspace = ctx.workspace.clone();
        let cancel = ctx.cancel.clone();
        let title = self.title(&json!({ "pattern": args.pattern, "path": args.path }));
        let path = args.path.unwrap_or_else(|| ".".to_owned());
        run_blocking(self.name(), move || {
            let found = find_files(&workspace, &path, &glob, &cancel)?;
            Ok(render(found, title))
        })
        .await
    }
}

struct Found {
    paths: Vec<String>,
    total: usize,
}

fn find_files(
    workspace: &Workspace,
    given: &str,
    glob: &FileGlob,
    cancel: &CancellationToken,
) -> Result<Found, ToolError> {
    let root = workspace.resolve(given)?;
    let shown = workspace.relative(&root);
    std::fs::metadata(&root).map_err(|err| ToolError::io("search", &shown, err))?;

    let mut matches: Vec<(SystemTime, String)> = Vec::new();
    for entry in walker(&root, |_| true) {
        if cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let Ok(entry) = entry else { continue };
        // Symlinks are not followed (see `walker`), so only regular files count.
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let below_root = entry.path().strip_prefix(&root).unwrap_or(entry.path());
        if !glob.matches(below_root) {
            continue;
        }
        let modified = entry
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        matches.push((modified, workspace.relative(entry.path())));
    }
    // Newest first: the file the model is looking for is usually the one being worked
    // on. Path order breaks ties so output is deterministic.
    matches.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = matches.len();
    let paths = matches
        .into_iter()
        .take(MAX_RESULTS)
        .map(|(_, path)| path)
        .collect();
    Ok(Found { paths, total })
}

fn render(found: Found, title: String) -> ToolOutput {
    let mut output = found.paths.join("\n");
    if found.total == 0 {
        output.push_str("no files found");
    } else if found.total > found.paths.len() {
        output.push_str(&format!(
            "\n\n(showing {} of {} files; use a more specific pattern or path)",
            found.paths.len(),
            found.total
        ));
    }
    ToolOutput {
        title,
        output,
        metadata: json!({ "count": found.total, "truncated": found.total > found.paths.len() }),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn setup() -> (tempfile::TempDir, ToolContext<'static>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let workspace = Workspace::new(dir.path()).expect("workspace");
        (dir, crate::tools::test_context(workspace))
    }

    fn write_aged(dir: &std::path::Path, file: &str, age_secs: u64) {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().expect("has parent")).expect("mkdir");
        std::fs::write(&path, "x").expect("write");
        let mtime = SystemTime::now() - Duration::from_secs(age_secs);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(mtime))
            .expect("set mtime");
    }

    #[tokio::test]
    async fn glob_returns_matches_newest_first() {
        let (dir, ctx) = setup();
        write_aged(dir.path(), "old.rs", 300);
        write_aged(dir.path(), "src/new.rs", 10);
        write_aged(dir.path(), "src/mid.rs", 100);
        write_aged(dir.path(), "src/notes.md", 1);
        let out = GlobTool
            .execute(json!({"pattern": "*.rs"}), &ctx)
            .await
            .expect("glob");
        assert_eq!(out.output, "src/new.rs\nsrc/mid.rs\nold.rs");
        assert_eq!(out.title, "glob *.rs");

        let out = GlobTool
            .execute(json!({"pattern": "*.rs", "path": "src"}), &ctx)
            .await
            .expect("glob");
        assert_eq!(out.output, "src/new.rs\nsrc/mid.rs");
    }

    #[tokio::test]
    async fn glob_with_slash_matches_paths_below_the_search_root() {
        let (dir, ctx) = setup();
        write_aged(dir.path(), "src/a/b.rs", 5);
        write_aged(dir.path(), "b.rs", 5);
        let out = GlobTool
            .execute(json!({"pattern": "src/**/*.rs"}), &ctx)
            .await
            .expect("glob");
        assert_eq!(out.output, "src/a/b.rs");
        let out = GlobTool
            .execute(json!({"pattern": "*.txt"}), &ctx)
            .await
            .expect("glob");
        assert_eq!(out.output, "no files found");
    }

    #[tokio::test]
    async fn glob_caps_results_and_respects_gitignore() {
        let (dir, ctx) = setup();
        for i in 0..120 {
            write_aged(dir.path(), &format!("f{i:03}.txt"), 5);
        }
        write_aged(dir.path(), "skipped/x.txt", 5);
        std::fs::write(dir.path().join(".gitignore"), "skipped/\n").expect("write");
        let out = GlobTool
            .execute(json!({"pattern": "*.txt"}), &ctx)
            .await
            .expect("glob");
        assert_eq!(out.metadata["count"], json!(120));
        assert!(out.output.contains("(showing 100 of 120 files"));
        assert!(!out.output.contains("skipped"));
    }

    #[tokio::test]
    async fn glob_rejects_bad_patterns_and_outside_paths() {
        let (_dir, ctx) = setup();
        let err = GlobTool
            .execute(json!({"pattern": "a["}), &ctx)
            .await
            .expect_err("bad glob");
        assert!(
            err.to_string()
                .starts_with("invalid arguments for glob: bad glob a["),
            "{err}"
        );
        let err = GlobTool
            .execute(json!({"pattern": "*", "path": "/"}), &ctx)
            .await
            .expect_err("outside");
        assert_eq!(err.to_string(), "path / is outside the workspace");
    }
}
