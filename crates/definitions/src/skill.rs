//! Skills: `skills/NAME/SKILL.md` in a definitions directory, in the format OpenCode,
//! Claude Code and Codex share. The frontmatter gives `name` (the directory's name)
//! and `description`; the body is the instructions the `skill` tool loads into a
//! conversation when a model asks for the skill (progressive disclosure: sessions see
//! only names and descriptions until then). The other files of the directory travel
//! with it, readable by the session under [`SKILLS_DIR`]`/NAME/`.
//!
//! Skills layer like agents: a later directory's skill replaces an earlier one of the
//! same name. A bad skill is one [`LoadError`] naming its file; the others still load.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::LoadError;
use crate::frontmatter::{self, FieldError};

/// Where a session reads a skill's files: `.taskwire/skills/NAME/FILE`, relative to its
/// workspace root (served from the shipped skill, never written into the workspace).
pub const SKILLS_DIR: &str = ".taskwire/skills";
/// The largest file a skill may carry.
pub const MAX_SKILL_FILE_BYTES: usize = 64 * 1024;
/// The most a skill's files may hold together, its `SKILL.md` included.
pub const MAX_SKILL_BYTES: usize = 256 * 1024;

const KEYS: &str = "name, description, license, allowed-tools, metadata";

/// One skill, as loaded and as shipped to workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skill {
    /// Lowercase letters, digits and hyphens: the directory's name.
    pub name: String,
    /// When to use it: what a model reads to decide.
    pub description: String,
    /// The instructions (the body of `SKILL.md`).
    pub body: String,
    /// The directory's other files, by path relative to it (`/`-separated), in path
    /// order.
    pub files: Vec<SkillFile>,
}

/// A file a skill carries beside its `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillFile {
    pub path: String,
    pub content: String,
}

/// Skills by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skills {
    skills: BTreeMap<String, Skill>,
}

impl Skills {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `skill`, returning the one of the same name it replaced.
    pub fn insert(&mut self, skill: Skill) -> Option<Skill> {
        self.skills.insert(skill.name.clone(), skill)
    }

    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    /// In name order.
    pub fn list(&self) -> impl Iterator<Item = &Skill> {
        self.skills.values()
    }

    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }
}

/// Whether `name` is a valid skill name: 1 to 64 lowercase letters, digits and
/// hyphens, not starting or ending with a hyphen.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Loads `dir/skills/*/SKILL.md` over `base`.
pub fn load_skills(dir: &Path, base: Skills) -> (Skills, Vec<LoadError>) {
    let mut skills = base;
    let mut errors = Vec::new();
    let root = dir.join("skills");
    let entries = match std::fs::read_dir(&root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (skills, errors),
        Err(e) => {
            errors.push(LoadError {
                file: "skills".into(),
                key: None,
                message: format!("failed to read: {e}"),
            });
            return (skills, errors);
        }
    };
    let mut dirs: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for skill_dir in dirs {
        let Some(stem) = skill_dir.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let file = format!("skills/{stem}/SKILL.md");
        match load_skill(&skill_dir, stem, &file) {
            Ok(Some(skill)) => {
                skills.insert(skill);
            }
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(file = %error.file, error = %error, "skipping invalid skill");
                errors.push(error);
            }
        }
    }
    (skills, errors)
}

/// One skill directory; `Ok(None)` when it has no `SKILL.md` (not a skill).
fn load_skill(dir: &Path, stem: &str, file: &str) -> Result<Option<Skill>, LoadError> {
    let fail = |key: Option<&str>, message: String| LoadError {
        file: file.to_owned(),
        key: key.map(str::to_owned),
        message,
    };
    let text = match std::fs::read_to_string(dir.join("SKILL.md")) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(fail(None, format!("failed to read: {e}"))),
    };
    let document = frontmatter::parse(&text).map_err(|m| fail(None, m))?;
    let (mut name, mut description) = (None, None);
    for (key, value) in &document.fields {
        let read = |key: &str| frontmatter::string(key, value);
        match key.as_str() {
            "name" => name = Some(read(key).map_err(|e| field(file, e))?),
            "description" => description = Some(read(key).map_err(|e| field(file, e))?),
            // Known to the shared format; not used here.
            "license" | "allowed-tools" | "metadata" => {}
            other => {
                return Err(fail(
                    Some(other),
                    format!("unknown key; expected one of {KEYS}"),
                ));
            }
        }
    }
    let name = name.ok_or_else(|| fail(Some("name"), "is required".into()))?;
    if !valid_name(&name) {
        return Err(fail(
            Some("name"),
            format!("`{name}` must be 1 to 64 lowercase letters, digits and hyphens"),
        ));
    }
    if name != stem {
        return Err(fail(
            Some("name"),
            format!("`{name}` must be the name of its directory, `{stem}`"),
        ));
    }
    let description = description
        .filter(|d| !d.trim().is_empty())
        .ok_or_else(|| fail(Some("description"), "is required".into()))?;
    if document.body.is_empty() {
        return Err(fail(
            None,
            "has no instructions after its frontmatter".into(),
        ));
    }
    let mut files = Vec::new();
    let mut total = text.len();
    collect_files(dir, dir, &mut files, &mut total).map_err(|m| fail(None, m))?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Some(Skill {
        name,
        description,
        body: document.body,
        files,
    }))
}

fn field(file: &str, e: FieldError) -> LoadError {
    e.into_load_error(file)
}

/// The text files under `dir` but `SKILL.md`, each and all within the limits.
fn collect_files(
    root: &Path,
    dir: &Path,
    out: &mut Vec<SkillFile>,
    total: &mut usize,
) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("failed to read: {e}"))?;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| format!("failed to read: {e}"))?;
        let relative = path
            .strip_prefix(root)
            .map_err(|e| e.to_string())?
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        if kind.is_dir() {
            collect_files(root, &path, out, total)?;
            continue;
        }
        if !kind.is_file() || relative == "SKILL.md" {
            continue; // links are not followed
        }
        let bytes = std::fs::read(&path).map_err(|e| format!("{relative}: failed to read: {e}"))?;
        if bytes.len() > MAX_SKILL_FILE_BYTES {
            return Err(format!(
                "{relative} is {} bytes, more than the {MAX_SKILL_FILE_BYTES} a skill's file may hold",
                bytes.len()
            ));
        }
        *total += bytes.len();
        if *total > MAX_SKILL_BYTES {
            return Err(format!(
                "its files hold more than the {MAX_SKILL_BYTES} bytes a skill may carry"
            ));
        }
        let content = String::from_utf8(bytes)
            .map_err(|_| format!("{relative} is not UTF-8 text; a skill carries text files"))?;
        out.push(SkillFile {
            path: relative,
            content,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
