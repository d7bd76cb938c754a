//! `grep`: search file contents by regular expression, with ripgrep's engine.

use std::path::Path;
use std::sync::LazyLock;

use ::grep::regex::RegexMatcherBuilder;
use ::grep::searcher::{BinaryDetection, SearcherBuilder, sinks};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    FileGlob, Tool, ToolContext, ToolOutput, parse_args, run_blocking, schema::parameters, str_arg,
    truncate_line, walker,
};
use crate::error::ToolError;
use crate::workspace::Workspace;

const MAX_MATCHES: usize = 100;
const MAX_LINE_CHARS: usize = 2000;

/// Searches file contents.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrepTool;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    /// Regular expression to search for
    pattern: String,
    /// Directory or file to search (default: the workspace root)
    #[serde(default)]
    path: Option<String>,
    /// Only search files matching this glob, e.g. "*.rs" or "src/**/*.ts"
    #[serde(default)]
    include: Option<String>,
}

#[async_trait]
impl Tool for GrepTool {
    fn name(&self) -> &'static str {
        "grep"
    }

    fn description(&self) -> &str {
        "Searches file contents with a regular expression (Rust regex syntax, e.g. \
         `fn\\s+main`, `TODO|FIXME`). Returns matching lines as `path:line: text`, grouped \
         by file, at most 100 matches. Respects .gitignore and skips binary files. Narrow \
         the search with `path` (a directory or file) and `include` (a file glob such as \
         `*.rs`). Then read the files around the reported line numbers."
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
            Some(path) => format!("grep {pattern} in {path}"),
            None => format!("grep {pattern}"),
        }
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(self.name(), args)?;
        // Line-oriented: the matcher never matches across a newline, which lets the
        // searcher use its fast line-by-line path.
        let matcher = RegexMatcherBuilder::new()
            .line_terminator(Some(b'\n'))
            .build(&args.pattern)
            .map_err(|err| {
                ToolError::invalid_arguments(
                    self.name(),
                    format!("bad regex {}: {err}", args.pattern),
                )
            })?;
        let include = args
            .include
            .as_deref()
            .map(|glob| FileGlob::new(self.name(), glob))
            .transpose()?;
        let title = self.title(&json!({ "pattern": args.pattern, "path": args.path }));
        let workspace = ctx.workspace.clone();
        let cancel = ctx.cancel.clone();
        let path = args.path.unwrap_or_else(|| ".".to_owned());
        run_blocking(self.name(), move || {
            let found = search(&workspace, &path, &matcher, include.as_ref(), &cancel)?;
            Ok(render(&found, title))
        })
        .await
    }
}

struct FileMatches {
    path: String,
    lines: Vec<(u64, String)>,
}

struct Found {
    files: Vec<FileMatches>,
    count: usize,
    truncated: bool,
}

fn search(
    workspace: &Workspace,
    given: &str,
    matcher: &::grep::regex::RegexMatcher,
    include: Option<&FileGlob>,
    cancel: &CancellationToken,
) -> Result<Found, ToolError> {
    let root = workspace.resolve(given)?;
    let shown = workspace.relative(&root);
    std::fs::metadata(&root).map_err(|err| ToolError::io("search", &shown, err))?;

    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        // Stop at the first NUL: binary files produce noise, not answers.
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .build();
    let mut found = Found {
        files: Vec::new(),
        count: 0,
        truncated: false,
    };
    for entry in walker(&root, |_| true) {
        if cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let Ok(entry) = entry else { continue };
        // Symlinks are not followed: a link could point outside the workspace.
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if let Some(include) = include {
            let below_root = match entry.path().strip_prefix(&root) {
                Ok(rel) if !rel.as_os_str().is_empty() => rel,
                // `path` named the file itself.
                _ => Path::new(entry.file_name()),
            };
            if !include.matches(below_root) {
                continue;
            }
        }

        let mut lines = Vec::new();
        let room = MAX_MATCHES + 1 - found.count;
        // Lossy: a stray invalid byte should not hide the rest of a source file.
        let sink = sinks::Lossy(|line_number, text| {
            let text = text.trim_end_matches(['\n', '\r']);
            lines.push((
                line_number,
                truncate_line(text, MAX_LINE_CHARS).into_owned(),
            ));
            Ok(lines.len() < room)
        });
        // An unreadable file is skipped, like ripgrep does, rather than failing the
        // whole search.
        if searcher.search_path(matcher, entry.path(), sink).is_err() {
            continue;
        }
        if lines.is_empty() {
            continue;
        }
        found.count += lines.len();
        if found.count > MAX_MATCHES {
            lines.truncate(lines.len() - (found.count - MAX_MATCHES));
            found.count = MAX_MATCHES;
            found.truncated = true;
        }
        if !lines.is_empty() {
            found.files.push(FileMatches {
                path: workspace.relative(entry.path()),
                lines,
            });
        }
        if found.truncated {
            break;
        }
    }
    Ok(found)
}

fn render(found: &Found, title: String) -> ToolOutput {
    let mut output = String::new();
    if found.count == 0 {
        output.push_str("no matches found");
    } else {
        let plural = if found.count == 1 { "match" } else { "matches" };
        output.push_str(&format!("found {} {plural}\n", found.count));
        for file in &found.files {
            output.push('\n');
            for (line, text) in &file.lines {
                output.push_str(&format!("{}:{line}: {text}\n", file.path));
            }
        }
        if found.truncated {
            output.push_str(&format!(
                "\n(stopped at {MAX_MATCHES} matches; narrow the pattern, path or include)\n"
            ));
        }
    }
    ToolOutput {
        title,
        output,
        metadata: json!({ "matches": found.count, "files": found.files.len(), "truncated": found.truncated }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, ToolContext<'static>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let files = [
            ("src/lib.rs", "// TODO: docs\nfn main() {}\n// todo lower\n"),
            ("src/util.rs", "fn helper() {}\n// TODO: tests\n"),
            ("notes.md", "TODO in markdown\n"),
        ];
        for (file, text) in files {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().expect("has parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
        let workspace = Workspace::new(dir.path()).expect("workspace");
        (dir, crate::tools::test_context(workspace))
    }

    #[tokio::test]
    async fn grep_finds_matches_with_line_numbers() {
        let (_dir, ctx) = setup();
        let out = GrepTool
            .execute(json!({"pattern": "TODO"}), &ctx)
            .await
            .expect("grep");
        assert_eq!(
            out.output,
            "found 3 matches\n\nnotes.md:1: TODO in markdown\n\nsrc/lib.rs:1: // TODO: docs\n\nsrc/util.rs:2: // TODO: tests\n"
        );
        assert_eq!(out.metadata["files"], json!(3));
    }

    #[tokio::test]
    async fn grep_filters_by_path_and_include() {
        let (_dir, ctx) = setup();
        let out = GrepTool
            .execute(
                json!({"pattern": "TODO", "include": "*.rs", "path": "src"}),
                &ctx,
            )
            .await
            .expect("grep");
        assert_eq!(out.title, "grep TODO in src");
        assert!(!out.output.contains("notes.md"));
        assert!(out.output.starts_with("found 2 matches"), "{}", out.output);

        let out = GrepTool
            .execute(json!({"pattern": "fn \\w+", "path": "src/util.rs"}), &ctx)
            .await
            .expect("grep");
        assert_eq!(
            out.output,
            "found 1 match\n\nsrc/util.rs:1: fn helper() {}\n"
        );
    }

    #[tokio::test]
    async fn grep_skips_binary_files_and_reports_no_matches() {
        let (dir, ctx) = setup();
        std::fs::write(dir.path().join("blob.bin"), b"\x00\x01needle\n").expect("write");
        let out = GrepTool
            .execute(json!({"pattern": "needle"}), &ctx)
            .await
            .expect("grep");
        assert_eq!(out.output, "no matches found");
    }

    #[tokio::test]
    async fn grep_caps_matches() {
        let (dir, ctx) = setup();
        let text: String = (0..150).map(|i| format!("hit {i}\n")).collect();
        std::fs::write(dir.path().join("many.txt"), text).expect("write");
        let out = GrepTool
            .execute(json!({"pattern": "^hit"}), &ctx)
            .await
            .expect("grep");
        assert_eq!(out.metadata["matches"], json!(MAX_MATCHES));
        assert!(out.output.contains("stopped at 100 matches"));
        assert!(out.output.contains("many.txt:100: hit 99\n"));
        assert!(!out.output.contains("many.txt:101:"));
    }

    #[tokio::test]
    async fn grep_does_not_follow_symlinks_out_of_the_workspace() {
        let (dir, ctx) = setup();
        let outside = tempfile::tempdir().expect("temp dir");
        std::fs::write(outside.path().join("secret.txt"), "TOKEN=abc\n").expect("write");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).expect("symlink");
        let out = GrepTool
            .execute(json!({"pattern": "TOKEN"}), &ctx)
            .await
            .expect("grep");
        assert_eq!(out.output, "no matches found");
    }

    #[tokio::test]
    async fn grep_rejects_bad_regex() {
        let (_dir, ctx) = setup();
        let err = GrepTool
            .execute(json!({"pattern": "(unclosed"}), &ctx)
            .await
            .expect_err("bad regex");
        assert!(
            err.to_string()
                .starts_with("invalid arguments for grep: bad regex (unclosed"),
            "{err}"
        );
    }
}
