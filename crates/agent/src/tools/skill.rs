//! `skill`: loads a skill's instructions into the conversation (OpenCode's skill tool,
//! in the `SKILL.md` format OpenCode, Claude Code and Codex share).
//!
//! Progressive disclosure: the tool's description lists the skills the session may
//! load, by name and description only; a call with `name` returns the skill's body,
//! with the directory its files are read from (`.taskwire/skills/NAME/`, served by
//! `read` from the shipped skill) and the list of those files. Rules on `skill` match
//! the skill's name (`permission: { skill: { "internal-*": deny } }`); a denied skill
//! is neither listed nor loaded.

use std::fmt::Write as _;
use std::sync::LazyLock;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use taskwire_definitions::skill::SKILLS_DIR;

use super::{Tool, ToolContext, ToolOutput, parse_args, schema::parameters, str_arg};
use crate::error::ToolError;
use crate::host::SessionHost;
use crate::workspace::Workspace;

const DESCRIPTION: &str = "Loads a skill: instructions (and files) for a kind of task, written \
for this project. When a task matches a skill's description below, load the skill before \
you start and follow its instructions. Its files are read with `read` under the skill's \
base directory.";

/// Loads skills by name.
#[derive(Debug, Clone, Copy, Default)]
pub struct SkillTool;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    /// The name of the skill to load, as listed in this tool's description
    name: String,
}

/// The description listing `skills` (name and description of each).
fn described(skills: &[taskwire_definitions::skill::Skill]) -> String {
    let mut text = format!("{DESCRIPTION}\n\n<available_skills>\n");
    for skill in skills {
        let _ = writeln!(
            text,
            "  <skill>\n    <name>{}</name>\n    <description>{}</description>\n  </skill>",
            skill.name, skill.description
        );
    }
    text.push_str("</available_skills>");
    text
}

#[async_trait]
impl Tool for SkillTool {
    fn name(&self) -> &'static str {
        "skill"
    }

    /// Works on no file of the workspace: the skill travels with the task.
    fn uses_files(&self) -> bool {
        false
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> Value {
        static PARAMETERS: LazyLock<Value> = LazyLock::new(parameters::<Args>);
        PARAMETERS.clone()
    }

    /// Rules match the skill's name.
    fn subject(&self, args: &Value, _workspace: &Workspace) -> String {
        str_arg(args, "name").unwrap_or_default().to_owned()
    }

    fn title(&self, args: &Value) -> String {
        format!("skill {}", str_arg(args, "name").unwrap_or("?"))
    }

    /// Without skills there is nothing to offer.
    fn available(&self, host: &dyn SessionHost) -> bool {
        !host.skills().is_empty()
    }

    fn definition_for(
        &self,
        definition: &taskwire_llm::ToolDef,
        host: &dyn SessionHost,
    ) -> taskwire_llm::ToolDef {
        taskwire_llm::ToolDef {
            description: described(&host.skills()).into(),
            ..definition.clone()
        }
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(self.name(), args)?;
        let skills = ctx.host.skills();
        let Some(skill) = skills.iter().find(|s| s.name == args.name) else {
            let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
            return Err(ToolError::invalid_arguments(
                self.name(),
                format!(
                    "no skill `{}`; the skills are: {}",
                    args.name,
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        };
        let base = format!("{SKILLS_DIR}/{}", skill.name);
        let mut output = format!(
            "## Skill: {}\n\n**Base directory**: {base}\n\n{}\n",
            skill.name, skill.body
        );
        if !skill.files.is_empty() {
            output.push_str("\nFiles of this skill (read them with `read`):\n");
            for file in &skill.files {
                let _ = writeln!(output, "- {base}/{}", file.path);
            }
        }
        Ok(ToolOutput {
            title: format!("skill {}", skill.name),
            output,
            metadata: json!({ "name": skill.name, "files": skill.files.len() }),
        })
    }
}

/// The content of the skill file a workspace-relative `path` names
/// (`.taskwire/skills/NAME/FILE`), if it names one of `host`'s skills' files.
pub(crate) fn skill_file(host: &dyn SessionHost, path: &str) -> Option<(String, String)> {
    let rest = path
        .strip_prefix("./")
        .unwrap_or(path)
        .strip_prefix(SKILLS_DIR)?
        .strip_prefix('/')?;
    let (name, file) = rest.split_once('/')?;
    let skills = host.skills();
    let skill = skills.iter().find(|s| s.name == name)?;
    let found = skill.files.iter().find(|f| f.path == file)?;
    Some((format!("{SKILLS_DIR}/{name}/{file}"), found.content.clone()))
}
