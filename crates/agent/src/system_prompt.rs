//! The system prompt a session runs under: the agent's prompt, an environment block
//! (workspace root, platform, date, whether the workspace is a git repository), and the
//! project's instructions — `AGENTS.md` at the workspace root (or `CLAUDE.md` when there
//! is none), then any instruction files the worker is configured with.
//!
//! Instruction files are read through the workspace, so a configured path outside it
//! is refused (and logged), never read. Each file is capped at
//! [`MAX_INSTRUCTION_BYTES`]; a longer one is cut and says so.

use std::path::Path;

use crate::error::ToolError;
use crate::workspace::Workspace;
use taskwire_definitions::agent::AgentSpec;

/// Project instruction files looked for at the workspace root, first found wins.
pub const PROJECT_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];
/// Most bytes of one instruction file put into the prompt.
pub const MAX_INSTRUCTION_BYTES: usize = 32 * 1024;

/// What the environment block and the project instructions depend on in the workspace's
/// files: a few `stat`s, which a caller that knows them already (a workspace not made
/// yet, whose files will be its base's) passes instead of having them looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkspaceFacts {
    /// The workspace is a git repository (`.git` at its root).
    pub git: bool,
    /// The project instruction file at its root, the first of [`PROJECT_FILES`] found.
    pub project_file: Option<&'static str>,
}

impl WorkspaceFacts {
    /// The facts of the directory at `root` (blocking: up to three `stat`s).
    pub fn of(root: &Path) -> Self {
        Self {
            git: root.join(".git").exists(),
            project_file: PROJECT_FILES
                .iter()
                .copied()
                .find(|name| root.join(name).is_file()),
        }
    }
}

/// The whole system prompt for `agent` in `workspace`, whose files are as `facts` say,
/// with `extra` instruction files (paths relative to the workspace root) and today's
/// date as `YYYY-MM-DD`.
pub fn build(
    agent: &AgentSpec,
    workspace: &Workspace,
    facts: WorkspaceFacts,
    extra: &[String],
    today: &str,
) -> String {
    let root = workspace.root();
    let mut prompt = format!(
        "{}\n\n<env>\nworkspace root: {}\nplatform: {}\ntoday's date: {today}\n\
         is the workspace a git repository: {}\nTool paths are relative to the workspace \
         root; paths outside it are refused.\n</env>",
        agent.prompt.trim_end(),
        root.display(),
        std::env::consts::OS,
        if facts.git { "yes" } else { "no" },
    );
    let project = facts.project_file.map(str::to_owned);
    for name in project.iter().chain(extra) {
        match read_instructions(workspace, name) {
            Ok(text) => {
                prompt.push_str(&format!(
                    "\n\n<instructions file=\"{name}\">\n{}\n</instructions>",
                    text.trim_end()
                ));
            }
            Err(reason) => {
                tracing::warn!(file = %name, error = %reason, "instruction file skipped");
            }
        }
    }
    prompt
}

/// One instruction file's text, confined to the workspace and capped.
fn read_instructions(workspace: &Workspace, name: &str) -> Result<String, ToolError> {
    let path = workspace.resolve(name)?;
    let bytes = std::fs::read(&path).map_err(|source| ToolError::Io {
        action: "read",
        path: name.to_owned(),
        source,
    })?;
    Ok(capped(&bytes, &path))
}

fn capped(bytes: &[u8], path: &Path) -> String {
    if bytes.len() <= MAX_INSTRUCTION_BYTES {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut end = MAX_INSTRUCTION_BYTES;
    while end > 0 && (bytes[end] & 0xC0) == 0x80 {
        end -= 1; // never cut a UTF-8 character in two
    }
    format!(
        "{}\n[{} cut at {MAX_INSTRUCTION_BYTES} of {} bytes]",
        String::from_utf8_lossy(&bytes[..end]),
        path.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        bytes.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prompt in `ws`, its files looked up as a session's would be.
    fn prompt_in(ws: &Workspace, extra: &[String], today: &str) -> String {
        build(&agent(), ws, WorkspaceFacts::of(ws.root()), extra, today)
    }

    fn agent() -> AgentSpec {
        let mut spec = taskwire_definitions::builtin::AgentRegistry::builtin()
            .get(&"general".parse().expect("valid name"))
            .expect("general exists")
            .clone();
        spec.prompt = "You are general.".into();
        spec
    }

    fn workspace() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::new(dir.path()).expect("workspace");
        (dir, ws)
    }

    #[test]
    fn the_environment_block_names_root_platform_date_and_git() {
        let (dir, ws) = workspace();
        let prompt = prompt_in(&ws, &[], "2026-11-24");
        assert!(prompt.starts_with("You are general.\n\n<env>"), "{prompt}");
        assert!(prompt.contains(&format!("workspace root: {}", ws.root().display())));
        assert!(prompt.contains(&format!("platform: {}", std::env::consts::OS)));
        assert!(prompt.contains("today's date: 2026-11-24"));
        assert!(prompt.contains("git repository: no"));
        std::fs::create_dir(dir.path().join(".git")).expect("mkdir");
        assert!(prompt_in(&ws, &[], "d").contains("git repository: yes"));
    }

    #[test]
    fn agents_md_is_included_and_claude_md_only_without_it() {
        let (dir, ws) = workspace();
        std::fs::write(dir.path().join("CLAUDE.md"), "claude rules").expect("write");
        let prompt = prompt_in(&ws, &[], "d");
        assert!(
            prompt.contains("<instructions file=\"CLAUDE.md\">\nclaude rules\n</instructions>"),
            "{prompt}"
        );
        std::fs::write(dir.path().join("AGENTS.md"), "agents rules").expect("write");
        let prompt = prompt_in(&ws, &[], "d");
        assert!(prompt.contains("agents rules"));
        assert!(!prompt.contains("claude rules"), "{prompt}");
    }

    #[test]
    fn configured_files_are_added_and_paths_outside_the_workspace_refused() {
        let (dir, ws) = workspace();
        std::fs::create_dir(dir.path().join("docs")).expect("mkdir");
        std::fs::write(dir.path().join("docs/style.md"), "use tabs").expect("write");
        let outside = tempfile::NamedTempFile::new().expect("outside");
        std::fs::write(outside.path(), "secret outside").expect("write");
        let extra = vec![
            "docs/style.md".to_owned(),
            outside.path().display().to_string(),
            "../escape.md".to_owned(),
            "missing.md".to_owned(),
        ];
        let prompt = prompt_in(&ws, &extra, "d");
        assert!(prompt.contains("<instructions file=\"docs/style.md\">\nuse tabs"));
        assert!(!prompt.contains("secret outside"), "{prompt}");
        assert_eq!(prompt.matches("<instructions").count(), 1, "{prompt}");
    }

    #[test]
    fn long_instruction_files_are_cut_on_a_character_boundary() {
        let (dir, ws) = workspace();
        let text = "é".repeat(MAX_INSTRUCTION_BYTES); // two bytes each
        std::fs::write(dir.path().join("AGENTS.md"), &text).expect("write");
        let prompt = prompt_in(&ws, &[], "d");
        assert!(prompt.contains(&format!(
            "[AGENTS.md cut at {MAX_INSTRUCTION_BYTES} of {} bytes]",
            text.len()
        )));
        assert!(!prompt.contains('\u{FFFD}'), "no broken character");
    }
}
