//! `read`: a window of a text file, with line numbers.

use std::io::{BufRead, BufReader};
use std::sync::LazyLock;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Tool, ToolContext, ToolOutput, file_subject, parse_args, run_blocking, schema::parameters,
    str_arg, truncate_line,
};
use crate::error::ToolError;
use crate::workspace::Workspace;

const DEFAULT_LIMIT: usize = 2000;
const MAX_LINE_CHARS: usize = 2000;
/// Cap on the numbered text returned by one call; the model pages with `offset`.
const MAX_OUTPUT_BYTES: usize = 256 * 1024;
/// How much of the file start is sniffed for a NUL byte (git uses the same size).
const SNIFF_BYTES: usize = 8 * 1024;

/// Reads a file as numbered lines.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadTool;

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct Args {
    /// Path of the file, relative to the workspace root or absolute inside it
    file_path: String,
    /// 1-based line number to start from
    #[serde(default)]
    #[schemars(range(min = 1))]
    offset: Option<usize>,
    /// Number of lines to read (default 2000)
    #[serde(default)]
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

#[async_trait]
impl Tool for ReadTool {
    fn name(&self) -> &'static str {
        "read"
    }

    fn description(&self) -> &str {
        "Reads a text file from the workspace. Returns lines numbered like `cat -n` \
         (line number, tab, text). By default reads up to 2000 lines from the start; use \
         `offset` (1-based line) and `limit` to page through long files. Lines longer than \
         2000 characters are truncated. Binary files are refused. Prefer reading the \
         relevant part of a file found with grep over reading whole large files."
    }

    fn parameters(&self) -> Value {
        static PARAMETERS: LazyLock<Value> = LazyLock::new(parameters::<Args>);
        PARAMETERS.clone()
    }

    fn subject(&self, args: &Value, workspace: &Workspace) -> String {
        file_subject(args, workspace)
    }

    fn title(&self, args: &Value) -> String {
        format!("read {}", str_arg(args, "filePath").unwrap_or("?"))
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(self.name(), args)?;
        let start = args.offset.unwrap_or(1);
        if start == 0 {
            return Err(ToolError::invalid_arguments(
                self.name(),
                "offset is 1-based",
            ));
        }
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 {
            return Err(ToolError::invalid_arguments(
                self.name(),
                "limit must be at least 1",
            ));
        }
        // A skill's file (`.taskwire/skills/NAME/FILE`) is served from the skill the
        // task carries, never from the workspace.
        if let Some((shown, content)) = skill_path(&ctx.workspace, &args.file_path)
            .and_then(|path| super::skill::skill_file(ctx.host, &path))
        {
            let reader = std::io::Cursor::new(content.into_bytes());
            return number_lines(reader, shown, start, limit);
        }
        let workspace = ctx.workspace.clone();
        run_blocking(self.name(), move || {
            read_window(&workspace, &args.file_path, start, limit)
        })
        .await
    }
}

fn read_window(
    workspace: &Workspace,
    given: &str,
    start: usize,
    limit: usize,
) -> Result<ToolOutput, ToolError> {
    let path = workspace.resolve(given)?;
    let shown = workspace.relative(&path);
    let file = std::fs::File::open(&path).map_err(|err| ToolError::io("read", &shown, err))?;
    let metadata = file
        .metadata()
        .map_err(|err| ToolError::io("read", &shown, err))?;
    if metadata.is_dir() {
        let reason = "it is a directory; use the list tool".to_owned();
        return Err(ToolError::Refused {
            action: "read",
            path: shown,
            reason,
        });
    }

    let mut reader = BufReader::new(file);
    let head = reader
        .fill_buf()
        .map_err(|err| ToolError::io("read", &shown, err))?;
    if head[..head.len().min(SNIFF_BYTES)].contains(&0) {
        let reason = "it is a binary file".to_owned();
        return Err(ToolError::Refused {
            action: "read",
            path: shown,
            reason,
        });
    }
    number_lines(reader, shown, start, limit)
}

/// `given` relative to the workspace root when it names something under the skills
/// directory (`.taskwire/skills/...`, relative or absolute inside the root).
fn skill_path(workspace: &Workspace, given: &str) -> Option<String> {
    let relative = match std::path::Path::new(given).strip_prefix(workspace.root()) {
        Ok(inside) => inside.to_string_lossy().into_owned(),
        Err(_) => given.to_owned(),
    };
    let relative = relative.strip_prefix("./").unwrap_or(&relative).to_owned();
    relative
        .starts_with(taskwire_definitions::skill::SKILLS_DIR)
        .then_some(relative)
}

/// The window of `reader`'s lines from `start`, at most `limit`, numbered.
fn number_lines(
    mut reader: impl BufRead,
    shown: String,
    start: usize,
    limit: usize,
) -> Result<ToolOutput, ToolError> {
    let mut output = String::new();
    let mut line_no = 0usize;
    let mut last_shown = 0usize;
    let mut byte_capped = false;
    let mut more_lines = false;
    let mut raw = Vec::new();
    loop {
        raw.clear();
        // Bounded per line so a multi-gigabyte single-line file cannot exhaust memory:
        // only the first MAX_LINE_CHARS * 4 bytes are kept, the rest is skipped.
        let read = read_line_capped(&mut reader, &mut raw, MAX_LINE_CHARS * 4)
            .map_err(|err| ToolError::io("read", &shown, err))?;
        if read == 0 {
            break;
        }
        line_no += 1;
        if line_no < start {
            continue;
        }
        if line_no >= start + limit {
            more_lines = true;
            break;
        }
        let text = String::from_utf8_lossy(&raw);
        let text = text.trim_end_matches(['\n', '\r']);
        let numbered = format!("{line_no:>6}\t{}\n", truncate_line(text, MAX_LINE_CHARS));
        if output.len() + numbered.len() > MAX_OUTPUT_BYTES {
            byte_capped = true;
            more_lines = true;
            break;
        }
        output.push_str(&numbered);
        last_shown = line_no;
    }

    if line_no == 0 {
        output.push_str("(file is empty)\n");
    } else if line_no < start {
        let reason = format!("offset {start} is past the end of the file ({line_no} lines)");
        return Err(ToolError::invalid_arguments("read", reason));
    }
    if more_lines {
        let why = if byte_capped {
            "output reached 256 KiB"
        } else {
            "line limit reached"
        };
        output.push_str(&format!(
            "\n({why}; the file has more lines: use offset={} to continue)\n",
            last_shown + 1
        ));
    }
    Ok(ToolOutput {
        title: format!("read {shown}"),
        output,
        metadata: json!({ "path": shown, "first_line": start, "last_line": last_shown, "truncated": more_lines }),
    })
}

/// Reads one line (through `\n`) into `buf`, keeping at most `cap` bytes of it.
/// Returns the number of bytes consumed, 0 at end of file.
fn read_line_capped(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<usize> {
    let mut consumed = 0;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(consumed);
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = cap.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..take.min(room)]);
        reader.consume(take);
        consumed += take;
        if done {
            return Ok(consumed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, ToolContext<'static>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let workspace = Workspace::new(dir.path()).expect("workspace");
        (dir, crate::tools::test_context(workspace))
    }

    async fn read(ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        ReadTool.execute(args, ctx).await
    }

    #[tokio::test]
    async fn read_numbers_lines_like_cat_n() {
        let (dir, ctx) = setup();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\r\nthree").expect("write");
        let out = read(&ctx, json!({"filePath": "a.txt"}))
            .await
            .expect("read");
        assert_eq!(out.output, "     1\tone\n     2\ttwo\n     3\tthree\n");
        assert_eq!(out.title, "read a.txt");
    }

    #[tokio::test]
    async fn read_pages_with_offset_and_limit() {
        let (dir, ctx) = setup();
        let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.path().join("a.txt"), text).expect("write");
        let out = read(&ctx, json!({"filePath": "a.txt", "offset": 4, "limit": 2}))
            .await
            .expect("read");
        assert!(
            out.output.starts_with("     4\tline 4\n     5\tline 5\n"),
            "{}",
            out.output
        );
        assert!(
            out.output.contains("use offset=6 to continue"),
            "{}",
            out.output
        );
        assert_eq!(out.metadata["truncated"], json!(true));

        let err = read(&ctx, json!({"filePath": "a.txt", "offset": 11}))
            .await
            .expect_err("past end");
        assert!(
            err.to_string()
                .contains("past the end of the file (10 lines)"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn read_refuses_binary_files() {
        let (dir, ctx) = setup();
        std::fs::write(dir.path().join("a.bin"), b"\x7fELF\x00\x01").expect("write");
        let err = read(&ctx, json!({"filePath": "a.bin"}))
            .await
            .expect_err("binary");
        assert_eq!(
            err.to_string(),
            "refusing to read a.bin: it is a binary file"
        );
    }

    #[tokio::test]
    async fn read_truncates_long_lines_and_caps_output() {
        let (dir, ctx) = setup();
        let long = "x".repeat(5000);
        let text: String = (0..200).map(|_| format!("{long}\n")).collect();
        std::fs::write(dir.path().join("big.txt"), text).expect("write");
        let out = read(&ctx, json!({"filePath": "big.txt"}))
            .await
            .expect("read");
        assert!(out.output.contains("(line truncated)"));
        assert!(out.output.len() <= MAX_OUTPUT_BYTES + 200);
        assert!(
            out.output.contains("output reached 256 KiB"),
            "cap note present"
        );
    }

    #[tokio::test]
    async fn read_reports_missing_files_directories_and_bad_arguments() {
        let (dir, ctx) = setup();
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        let err = read(&ctx, json!({"filePath": "nope.txt"}))
            .await
            .expect_err("missing");
        assert_eq!(err.to_string(), "path nope.txt does not exist");
        let err = read(&ctx, json!({"filePath": "sub"}))
            .await
            .expect_err("dir");
        assert!(err.to_string().contains("it is a directory"), "{err}");
        let err = read(&ctx, json!({"path": "a"}))
            .await
            .expect_err("bad args");
        assert!(
            err.to_string().starts_with("invalid arguments for read"),
            "{err}"
        );
        let err = read(&ctx, json!({"filePath": "../x"}))
            .await
            .expect_err("outside");
        assert_eq!(err.to_string(), "path ../x is outside the workspace");
    }

    #[tokio::test]
    async fn read_of_empty_file_says_so() {
        let (dir, ctx) = setup();
        std::fs::write(dir.path().join("e.txt"), "").expect("write");
        let out = read(&ctx, json!({"filePath": "e.txt"}))
            .await
            .expect("read");
        assert_eq!(out.output, "(file is empty)\n");
    }
}
