//! `write`: create or overwrite a whole file.

use std::path::Path;
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

/// Writes a file, creating parent directories.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteTool;

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct Args {
    /// Path of the file, relative to the workspace root or absolute inside it
    file_path: String,
    /// The complete content of the file
    content: String,
}

#[async_trait]
impl Tool for WriteTool {
    fn name(&self) -> &'static str {
        "write"
    }

    /// Changes files: its own writes.
    fn changes_files(&self) -> bool {
        true
    }

    fn description(&self) -> &str {
        "Writes a file in the workspace, replacing it if it exists and creating missing \
         parent directories. Prefer the edit tool for changing part of an existing file; \
         use write for new files or complete rewrites."
    }

    fn parameters(&self) -> Value {
        static PARAMETERS: LazyLock<Value> = LazyLock::new(parameters::<Args>);
        PARAMETERS.clone()
    }

    /// Writing is editing, for the rules: one `edit` rule covers both tools.
    fn permission(&self) -> &'static str {
        "edit"
    }

    fn subject(&self, args: &Value, workspace: &Workspace) -> String {
        file_subject(args, workspace)
    }

    fn title(&self, args: &Value) -> String {
        format!("write {}", str_arg(args, "filePath").unwrap_or("?"))
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(self.name(), args)?;
        let workspace = ctx.workspace.clone();
        run_blocking(self.name(), move || write(&workspace, &args)).await
    }
}

fn write(workspace: &Workspace, args: &Args) -> Result<ToolOutput, ToolError> {
    let path = workspace.resolve(&args.file_path)?;
    let shown = workspace.relative(&path);
    let existed = match std::fs::metadata(&path) {
        Ok(meta) if meta.is_dir() => {
            return Err(ToolError::Refused {
                action: "write",
                path: shown,
                reason: "it is a directory".into(),
            });
        }
        Ok(_) => true,
        Err(_) => false,
    };
    create_parents(&path, &shown)?;
    workspace.wrote(&path);
    if existed {
        replace_file(&path, args.content.as_bytes(), &shown)?;
    } else {
        std::fs::write(&path, &args.content).map_err(|err| ToolError::io("write", &shown, err))?;
    }
    let bytes = args.content.len();
    let verb = if existed { "overwrote" } else { "created" };
    Ok(ToolOutput {
        title: format!("write {shown}"),
        output: format!("{verb} {shown} ({bytes} bytes)"),
        metadata: json!({ "path": shown, "created": !existed, "bytes": bytes }),
    })
}

/// Replaces the text of the existing file at `path` in one step: `bytes` go to a new
/// file beside it, with its permissions, which is then renamed over it. The calls of
/// one turn run at once, so a `read` of the file may run while it is written: it sees
/// the old text or the new one, never a truncated file. (`path` is canonical, so no
/// symlink is replaced; the owner is the worker's user either way.)
pub(super) fn replace_file(path: &Path, bytes: &[u8], shown: &str) -> Result<(), ToolError> {
    use std::io::Write as _;
    let failed = |err| ToolError::io("write", shown, err);
    let permissions = std::fs::metadata(path).map_err(failed)?.permissions();
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let mut next = tempfile::Builder::new()
        .prefix(".taskwire-write-")
        .tempfile_in(dir)
        .map_err(failed)?;
    next.write_all(bytes).map_err(failed)?;
    next.as_file()
        .set_permissions(permissions)
        .map_err(failed)?;
    next.persist(path).map_err(|e| failed(e.error))?;
    Ok(())
}

/// Creates the missing parent directories of `path`, which [`Workspace::resolve`]
/// already confined (a missing tail has no symlinks to lead out).
pub(super) fn create_parents(path: &Path, shown: &str) -> Result<(), ToolError> {
    match path.parent() {
        Some(parent) => std::fs::create_dir_all(parent)
            .map_err(|err| ToolError::io("create directories for", shown, err)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ReadTool;

    fn setup() -> (tempfile::TempDir, ToolContext<'static>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let workspace = Workspace::new(dir.path()).expect("workspace");
        (dir, crate::tools::test_context(workspace))
    }

    #[tokio::test]
    async fn write_then_read_round_trips() {
        let (_dir, ctx) = setup();
        let out = WriteTool
            .execute(
                json!({"filePath": "deep/new/a.txt", "content": "alpha\nbeta\n"}),
                &ctx,
            )
            .await
            .expect("write");
        assert_eq!(out.output, "created deep/new/a.txt (11 bytes)");
        let read = ReadTool
            .execute(json!({"filePath": "deep/new/a.txt"}), &ctx)
            .await
            .expect("read");
        assert_eq!(read.output, "     1\talpha\n     2\tbeta\n");

        let out = WriteTool
            .execute(json!({"filePath": "deep/new/a.txt", "content": "x"}), &ctx)
            .await
            .expect("overwrite");
        assert_eq!(out.output, "overwrote deep/new/a.txt (1 bytes)");
    }

    #[tokio::test]
    async fn write_refuses_paths_outside_and_directories() {
        let (dir, ctx) = setup();
        let err = WriteTool
            .execute(json!({"filePath": "../escape.txt", "content": "x"}), &ctx)
            .await
            .expect_err("outside");
        assert_eq!(
            err.to_string(),
            "path ../escape.txt is outside the workspace"
        );
        assert!(!dir.path().join("../escape.txt").exists());
        let err = WriteTool
            .execute(json!({"filePath": "/tmp/escape.txt", "content": "x"}), &ctx)
            .await
            .expect_err("absolute outside");
        assert!(err.to_string().contains("outside the workspace"), "{err}");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        let err = WriteTool
            .execute(json!({"filePath": "sub", "content": "x"}), &ctx)
            .await
            .expect_err("directory");
        assert_eq!(err.to_string(), "refusing to write sub: it is a directory");
    }

    /// A file read over and over while it is replaced, as a `read` and an `edit` of one
    /// turn may run: every read sees one whole text or the other, and the file keeps its
    /// permissions.
    #[test]
    fn a_replaced_file_is_never_seen_truncated_and_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt as _;
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("big.txt");
        let texts = ["a".repeat(1 << 20), "b".repeat(1 << 20)];
        std::fs::write(&path, &texts[0]).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).expect("chmod");
        let stop = AtomicBool::new(false);
        let torn = std::thread::scope(|scope| {
            let reader = scope.spawn(|| {
                let mut torn = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let seen = std::fs::read_to_string(&path).expect("read");
                    if !texts.contains(&seen) {
                        torn.push(seen.len());
                    }
                }
                torn
            });
            for i in 0..200 {
                replace_file(&path, texts[(i + 1) % 2].as_bytes(), "big.txt").expect("replace");
            }
            stop.store(true, Ordering::Relaxed);
            reader.join().expect("reader")
        });
        assert!(
            torn.is_empty(),
            "reads of a partly written file, of these lengths: {torn:?}"
        );
        assert_eq!(std::fs::read_to_string(&path).expect("read"), texts[0]);
        let mode = std::fs::metadata(&path)
            .expect("metadata")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o750);
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("list").collect();
        assert_eq!(left.len(), 1, "no temporary file is left beside it");
    }
}
