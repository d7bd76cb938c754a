//! Slash commands: `.taskwire/commands/*.md`, a template and the agent to run it.
//!
//! ```markdown
//! ---
//! description: Review a file
//! agent: build
//! subtask: true
//! ---
//! Review the changes in $1 and report problems. Focus: $ARGUMENTS
//! ```
//!
//! The file name is the command (`review.md` is `/review`); the body is the template,
//! rendered with [`render`]. [`command_mode`] decides, without asking a model,
//! whether a command runs as a subtask (a child task whose result returns to the
//! session; the agent crate runs it) or as a plain prompt of the session (seed 000).
//! The worker runs the template's !`cmd` before the session starts (the agent crate's
//! `command::shell`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::agent::{AgentMode, AgentName, AgentSpec};
use crate::error::LoadError;
use crate::frontmatter::{self, FieldError};
use crate::shell::split_words;

/// A slash command's delegation to a subagent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubtaskPart {
    pub agent: String,
    /// Short, for progress and listings.
    pub description: String,
    /// The rendered command template.
    pub prompt: String,
    /// The command that made it, e.g. `/review`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

const KEYS: &str = "agent, subtask, description, model";

/// One slash command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    /// Without the slash.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The agent to run it; `None` means the session's current (or default) agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentName>,
    /// `Some(true)` forces a subtask, `Some(false)` forbids one, `None` follows the
    /// agent's mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtask: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub template: String,
}

/// How a command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandMode {
    /// A child task, started directly without a model deciding; its result comes back
    /// into the session as a `task` call (seed 000's SubtaskPart).
    Subtask,
    /// The rendered template becomes the session's next user prompt.
    Prompt,
}

/// Seed 000's rule: a subtask when the agent is a pure subagent and the command does
/// not forbid it, or when the command asks for one whatever the agent.
pub fn command_mode(command: &Command, agent: &AgentSpec) -> CommandMode {
    let subagent = agent.mode == AgentMode::Subagent && command.subtask != Some(false);
    if subagent || command.subtask == Some(true) {
        CommandMode::Subtask
    } else {
        CommandMode::Prompt
    }
}

/// Fills a template: `$ARGUMENTS` is the whole argument text (trimmed), `$1` to `$9`
/// the n-th word of it (split like a shell: quotes group, backslash escapes), empty
/// when missing. The highest-numbered placeholder the template uses takes the rest of
/// the words too, joined with spaces, so `/explore TypeScript files` with "Find all
/// $1 in the codebase" reads "Find all TypeScript files in the codebase" (seed 000);
/// a quoted argument stays one word. A template with no placeholder gets the
/// arguments appended after a blank line, so `/cmd extra words` is never silently
/// dropped (OpenCode does the same).
///
/// Commands in the template (!`cmd`) are left for the worker, which runs them in the
/// task's workspace (see [`shell`]).
pub fn render(template: &str, arguments: &str) -> String {
    let arguments = arguments.trim();
    let words = split_words(arguments);
    let last = highest_position(template);
    let mut out = String::with_capacity(template.len() + arguments.len());
    let mut placeholders = 0;
    let mut rest = template;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(arguments);
            placeholders += 1;
            rest = tail;
        } else if let Some(digit) = after.chars().next().filter(|c| ('1'..='9').contains(c)) {
            let index = digit as usize - '1' as usize;
            if Some(index) == last {
                out.push_str(&words.get(index..).unwrap_or_default().join(" "));
            } else {
                out.push_str(words.get(index).map_or("", String::as_str));
            }
            placeholders += 1;
            rest = &after[1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    if placeholders == 0 && !arguments.is_empty() {
        out.push_str("\n\n");
        out.push_str(arguments);
    }
    out
}

/// The index (0 for `$1`) of the highest-numbered `$1`..`$9` in `template`.
fn highest_position(template: &str) -> Option<usize> {
    template
        .split('$')
        .skip(1)
        .filter_map(|after| after.chars().next())
        .filter(|c| ('1'..='9').contains(c))
        .map(|digit| digit as usize - '1' as usize)
        .max()
}

impl Command {
    /// The subtask part for `/name arguments` run by `agent`. Its description is the
    /// command's `description`, else empty (seed 000: `command.description ?? ""`).
    pub fn subtask_part(&self, agent: &AgentSpec, arguments: &str) -> SubtaskPart {
        SubtaskPart {
            agent: agent.name.to_string(),
            description: self.description.clone().unwrap_or_default(),
            prompt: render(&self.template, arguments),
            command: Some(format!("/{}", self.name)),
        }
    }
}

/// Commands by name.
#[derive(Debug, Clone, Default)]
pub struct CommandRegistry {
    commands: BTreeMap<String, Command>,
}

const INIT_TEMPLATE: &str = include_str!("prompt/init.txt");
const REVIEW_TEMPLATE: &str = include_str!("prompt/review.txt");

/// `/init`: writes or updates the workspace's `AGENTS.md` from what the repository
/// shows, run by the session's agent (seed 003, §1.4.1).
pub fn init() -> Command {
    Command {
        name: "init".into(),
        description: Some("create or update AGENTS.md for this repository".into()),
        agent: None,
        subtask: None,
        model: None,
        template: INIT_TEMPLATE.into(),
    }
}

/// `/review`: reviews the uncommitted changes in a subtask, so the review stays out of
/// the session's context (seed 003, §1.4.1).
pub fn review() -> Command {
    Command {
        name: "review".into(),
        description: Some("review the uncommitted changes".into()),
        agent: None,
        subtask: Some(true),
        model: None,
        template: REVIEW_TEMPLATE.into(),
    }
}

impl CommandRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in commands, `/init` and `/review`: a command file of the same name
    /// replaces one.
    pub fn builtin() -> Self {
        let mut registry = Self::new();
        registry.insert(init());
        registry.insert(review());
        registry
    }

    /// Adds `command`, returning the one it replaced.
    pub fn insert(&mut self, command: Command) -> Option<Command> {
        self.commands.insert(command.name.clone(), command)
    }

    /// By name, with or without the leading slash.
    pub fn get(&self, name: &str) -> Option<&Command> {
        self.commands.get(name.strip_prefix('/').unwrap_or(name))
    }

    /// All commands in name order.
    pub fn list(&self) -> Vec<&Command> {
        self.commands.values().collect()
    }
}

/// Loads every `*.md` in `dir`. A missing directory is no commands; each bad file is
/// one [`LoadError`], and the files after it still load.
pub fn load_commands(dir: &Path) -> (CommandRegistry, Vec<LoadError>) {
    let mut registry = CommandRegistry::new();
    let (sources, mut errors) = frontmatter::read_sources(dir, "command");
    for source in sources {
        match parse_command(&source.file, &source.stem, &source.text) {
            Ok(command) => {
                registry.insert(command);
            }
            Err(err) => {
                tracing::warn!(file = %err.file, error = %err, "skipping invalid command file");
                errors.push(err);
            }
        }
    }
    (registry, errors)
}

/// Parses one command file; `name` is the command name (the file stem).
pub fn parse_command(file: &str, name: &str, text: &str) -> Result<Command, LoadError> {
    let load_error = |message: String| LoadError {
        file: file.to_owned(),
        key: None,
        message,
    };
    // The same alphabet as agent names: commands end up in subjects and URLs too.
    if let Err(err) = name.parse::<AgentName>() {
        return Err(load_error(format!(
            "invalid command name {name:?}: {}",
            err.reason
        )));
    }
    let document = frontmatter::parse(text).map_err(load_error)?;
    let mut command = Command {
        name: name.to_owned(),
        description: None,
        agent: None,
        subtask: None,
        model: None,
        template: document.body,
    };
    let read = |command: &mut Command| -> Result<(), FieldError> {
        for (key, value) in &document.fields {
            let key = key.as_str();
            match key {
                "agent" => {
                    let agent = frontmatter::string(key, value)?;
                    let agent = agent
                        .parse()
                        .map_err(|err| FieldError::new(key, format!("{err}")))?;
                    command.agent = Some(agent);
                }
                "subtask" => command.subtask = Some(frontmatter::boolean(key, value)?),
                "description" => command.description = Some(frontmatter::string(key, value)?),
                "model" => command.model = Some(frontmatter::string(key, value)?),
                _ => {
                    return Err(FieldError::new(
                        key,
                        format!("unknown key; expected one of {KEYS}"),
                    ));
                }
            }
        }
        Ok(())
    };
    read(&mut command).map_err(|err| err.into_load_error(file))?;
    if command.template.is_empty() {
        return Err(load_error(
            "the command has no template (the body is empty)".into(),
        ));
    }
    Ok(command)
}

#[cfg(test)]
mod tests;
