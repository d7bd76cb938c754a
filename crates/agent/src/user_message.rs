//! The first user message of a run: the prompt, then what the task brought along —
//! workspace files the prompt mentions with `@path`, the structured `input`, the
//! `context_refs` and the `attachments` — each in a tagged block the model can tell
//! apart, each capped.
//!
//! A `file` context ref is read through the workspace: one outside it is an error
//! (the task cannot run as asked), never read. `@path` mentions that name no file of
//! the workspace are left as they are (`@someone` in prose is not a path). URL refs
//! are listed, not fetched: fetching is the `webfetch` tool's, under its permissions.

use crate::workspace::Workspace;

/// Most bytes of one included file, input or attachment.
pub const MAX_PART_BYTES: usize = 64 * 1024;
/// Most bytes of everything added to the prompt.
pub const MAX_TOTAL_BYTES: usize = 256 * 1024;

/// A reference to context, as the task names it (`type`, `id`, `uri`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputRef {
    pub kind: String,
    pub id: String,
    pub uri: String,
}

/// An artifact passed in: inline `data`, or a workspace file named by `uri`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputAttachment {
    pub name: String,
    pub media_type: String,
    pub uri: String,
    pub data: Vec<u8>,
}

/// What a task brings besides its prompt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskInputs {
    pub input: Option<serde_json::Value>,
    pub context_refs: Vec<InputRef>,
    pub attachments: Vec<InputAttachment>,
}

/// Why the inputs cannot be given to the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("context ref `{0}` is outside the workspace")]
    OutsideWorkspace(String),
    #[error("context ref `{path}` cannot be read: {reason}")]
    Unreadable { path: String, reason: String },
}

/// The prompt with the task's inputs rendered after it.
pub fn render(
    prompt: &str,
    inputs: &TaskInputs,
    workspace: &Workspace,
) -> Result<String, InputError> {
    let mut blocks = Vec::new();
    for path in mentions(prompt) {
        if let Ok(resolved) = workspace.resolve(&path)
            && resolved.is_file()
            && let Ok(bytes) = std::fs::read(&resolved)
        {
            blocks.push(format!("<file path=\"{path}\">\n{}\n</file>", text(&bytes)));
        }
    }
    if let Some(input) = &inputs.input {
        let json = serde_json::to_string_pretty(input).unwrap_or_else(|_| input.to_string());
        blocks.push(format!("<input>\n{}\n</input>", text(json.as_bytes())));
    }
    for r in &inputs.context_refs {
        blocks.push(context_ref(r, workspace)?);
    }
    for a in &inputs.attachments {
        blocks.push(attachment(a, workspace)?);
    }
    let mut out = prompt.to_owned();
    let mut added = 0;
    for block in blocks {
        if added + block.len() > MAX_TOTAL_BYTES {
            out.push_str(&format!(
                "\n\n[further inputs left out: more than {MAX_TOTAL_BYTES} bytes in all]"
            ));
            break;
        }
        added += block.len();
        out.push_str("\n\n");
        out.push_str(&block);
    }
    Ok(out)
}

/// The workspace files [`render`] puts in the message: `@path` mentions that name a
/// file, file context refs and attachments given by path, in that order (for the
/// result's provenance).
pub fn included_files(prompt: &str, inputs: &TaskInputs, workspace: &Workspace) -> Vec<String> {
    let mentioned = mentions(prompt).into_iter().filter(|path| {
        workspace
            .resolve(path)
            .is_ok_and(|resolved| resolved.is_file())
    });
    let refs = inputs
        .context_refs
        .iter()
        .filter(|r| r.kind == "file")
        .map(|r| {
            let target = if r.id.is_empty() { &r.uri } else { &r.id };
            target.strip_prefix("file://").unwrap_or(target).to_owned()
        });
    let attached = inputs
        .attachments
        .iter()
        .filter(|a| a.data.is_empty() && !a.uri.is_empty())
        .map(|a| a.uri.strip_prefix("file://").unwrap_or(&a.uri).to_owned());
    mentioned.chain(refs).chain(attached).collect()
}

/// `@path` words of the prompt, in order, each once.
fn mentions(prompt: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in prompt.split_whitespace() {
        if let Some(path) = word.strip_prefix('@') {
            let path = path.trim_end_matches([',', '.', ';', ':', ')', '!', '?']);
            if !path.is_empty() && !out.iter().any(|p| p == path) {
                out.push(path.to_owned());
            }
        }
    }
    out
}

fn context_ref(r: &InputRef, workspace: &Workspace) -> Result<String, InputError> {
    let target = if r.id.is_empty() { &r.uri } else { &r.id };
    match r.kind.as_str() {
        "file" => {
            let path = target.strip_prefix("file://").unwrap_or(target);
            let bytes = read_workspace_file(path, workspace)?;
            Ok(format!(
                "<context type=\"file\" path=\"{path}\">\n{}\n</context>",
                text(&bytes)
            ))
        }
        kind => Ok(format!(
            "<context type=\"{kind}\" id=\"{}\" uri=\"{}\" />",
            r.id, r.uri
        )),
    }
}

fn attachment(a: &InputAttachment, workspace: &Workspace) -> Result<String, InputError> {
    let bytes = if a.data.is_empty() && !a.uri.is_empty() {
        let path = a.uri.strip_prefix("file://").unwrap_or(&a.uri);
        read_workspace_file(path, workspace)?
    } else {
        a.data.clone()
    };
    let head = format!(
        "<attachment name=\"{}\" media_type=\"{}\">",
        a.name, a.media_type
    );
    if std::str::from_utf8(&bytes).is_err() {
        return Ok(format!(
            "{head}[binary, {} bytes, not shown]</attachment>",
            bytes.len()
        ));
    }
    Ok(format!("{head}\n{}\n</attachment>", text(&bytes)))
}

fn read_workspace_file(path: &str, workspace: &Workspace) -> Result<Vec<u8>, InputError> {
    let resolved = workspace
        .resolve(path)
        .map_err(|_| InputError::OutsideWorkspace(path.to_owned()))?;
    std::fs::read(&resolved).map_err(|e| InputError::Unreadable {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// UTF-8 text of `bytes`, cut at [`MAX_PART_BYTES`] on a character boundary.
fn text(bytes: &[u8]) -> String {
    if bytes.len() <= MAX_PART_BYTES {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut end = MAX_PART_BYTES;
    while end > 0 && (bytes[end] & 0xC0) == 0x80 {
        end -= 1;
    }
    format!(
        "{}\n[cut at {MAX_PART_BYTES} of {} bytes]",
        String::from_utf8_lossy(&bytes[..end]),
        bytes.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("src")).expect("mkdir");
        std::fs::write(dir.path().join("src/lib.rs"), "pub fn f() {}\n").expect("write");
        let ws = Workspace::new(dir.path()).expect("workspace");
        (dir, ws)
    }

    fn file_ref(path: &str) -> InputRef {
        InputRef {
            kind: "file".into(),
            id: path.into(),
            uri: String::new(),
        }
    }

    #[test]
    fn a_prompt_without_inputs_is_unchanged() {
        let (_dir, ws) = workspace();
        let out = render("fix it", &TaskInputs::default(), &ws).expect("renders");
        assert_eq!(out, "fix it");
    }

    #[test]
    fn mentioned_workspace_files_are_included_and_other_mentions_left_alone() {
        let (_dir, ws) = workspace();
        let out = render(
            "look at @src/lib.rs, then ask @alice",
            &TaskInputs::default(),
            &ws,
        )
        .expect("renders");
        assert!(out.starts_with("look at @src/lib.rs, then ask @alice\n\n"));
        assert!(
            out.contains("<file path=\"src/lib.rs\">\npub fn f() {}\n\n</file>"),
            "{out}"
        );
        assert_eq!(out.matches("<file").count(), 1);
    }

    #[test]
    fn input_refs_and_attachments_are_rendered_in_tagged_blocks() {
        let (_dir, ws) = workspace();
        let inputs = TaskInputs {
            input: Some(serde_json::json!({"ticket": 42})),
            context_refs: vec![
                file_ref("src/lib.rs"),
                InputRef {
                    kind: "url".into(),
                    id: String::new(),
                    uri: "https://example.com/spec".into(),
                },
            ],
            attachments: vec![
                InputAttachment {
                    name: "notes.txt".into(),
                    media_type: "text/plain".into(),
                    uri: String::new(),
                    data: b"remember the edge case".to_vec(),
                },
                InputAttachment {
                    name: "logo.png".into(),
                    media_type: "image/png".into(),
                    uri: String::new(),
                    data: vec![0x89, 0x50, 0xff, 0xfe],
                },
            ],
        };
        let out = render("go", &inputs, &ws).expect("renders");
        assert!(
            out.contains("<input>\n{\n  \"ticket\": 42\n}\n</input>"),
            "{out}"
        );
        assert!(out.contains("<context type=\"file\" path=\"src/lib.rs\">\npub fn f() {}"));
        assert!(out.contains("uri=\"https://example.com/spec\" />"));
        assert!(out.contains("media_type=\"text/plain\">\nremember the edge case\n</attachment>"));
        assert!(out.contains("[binary, 4 bytes, not shown]"));
    }

    #[test]
    fn a_file_ref_outside_the_workspace_is_refused() {
        let (_dir, ws) = workspace();
        for path in ["../secret", "/etc/passwd"] {
            let inputs = TaskInputs {
                context_refs: vec![file_ref(path)],
                ..TaskInputs::default()
            };
            assert_eq!(
                render("go", &inputs, &ws),
                Err(InputError::OutsideWorkspace(path.into()))
            );
        }
    }

    #[test]
    fn large_parts_are_capped() {
        let (dir, ws) = workspace();
        std::fs::write(dir.path().join("big.txt"), "x".repeat(MAX_PART_BYTES * 2)).expect("write");
        let inputs = TaskInputs {
            context_refs: (0..6).map(|_| file_ref("big.txt")).collect(),
            ..TaskInputs::default()
        };
        let out = render("go", &inputs, &ws).expect("renders");
        assert!(out.contains(&format!(
            "[cut at {MAX_PART_BYTES} of {} bytes]",
            MAX_PART_BYTES * 2
        )));
        assert!(out.contains("[further inputs left out"));
        assert!(out.len() < MAX_TOTAL_BYTES + 1024);
    }
}
