//! User agents: `.taskwire/agents/*.md`, merged over the built-ins.
//!
//! ```markdown
//! ---
//! description: Reviews a change for bugs and style
//! mode: subagent
//! tools: { write: false, "mcp_*": false }
//! permission:
//!   edit: deny
//!   bash: { "git diff*": allow, "*": ask }
//! ---
//! You are a careful code reviewer. ...
//! ```
//!
//! The body is the system prompt. A file named like an existing agent overrides only
//! the keys it gives (an empty body keeps the prompt); `disable: true` removes the
//! agent. `tools` entries and `permission` rules are appended after the base's, so
//! they win; within one map the longer (more specific) pattern wins, whatever the
//! order written, as in OpenCode. A bad file is reported and skipped; the others
//! still load.

use std::collections::BTreeMap;
use std::path::Path;

use serde_norway::Value;

use crate::agent::{AgentMode, AgentName, AgentSpec, ModelTier};
use crate::builtin::{AgentRegistry, DEFAULT_MAX_STEPS};
use crate::error::LoadError;
use crate::frontmatter::{self, FieldError};
use crate::permission::{PermissionAction, PermissionRule};

const KEYS: &str = "name, description, mode, hidden, model, model_tier, small_model, temperature, top_p, \
                    reasoning_effort, thinking_budget, max_steps, tools, permission, color, hooks, disable";

/// The least thinking budget Anthropic accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

/// The values `reasoning_effort` takes.
const REASONING_EFFORTS: [&str; 4] = ["minimal", "low", "medium", "high"];

/// Loads every `*.md` in `dir` over `base`. A missing directory is no agents; each bad
/// file is one [`LoadError`], and the files after it still load.
pub fn load_agents(dir: &Path, base: AgentRegistry) -> (AgentRegistry, Vec<LoadError>) {
    let mut registry = base;
    let (sources, mut errors) = frontmatter::read_sources(dir, "agent");
    // Which file defined which user agent, to refuse a second definition.
    let mut defined: BTreeMap<AgentName, String> = BTreeMap::new();
    for source in sources {
        let file = source.file;
        let loaded = parse_agent(&file, &source.stem, &source.text, &registry);
        let change = match loaded {
            Ok(change) => change,
            Err(err) => {
                tracing::warn!(file = %err.file, error = %err, "skipping invalid agent file");
                errors.push(err);
                continue;
            }
        };
        let name = match &change {
            AgentChange::Define(spec) => spec.name.clone(),
            AgentChange::Disable(name) => name.clone(),
        };
        if let Some(first) = defined.get(&name) {
            errors.push(LoadError {
                file,
                key: Some("name".into()),
                message: format!("agent {name} is already defined in {first}"),
            });
            continue;
        }
        defined.insert(name, file);
        match change {
            AgentChange::Define(spec) => {
                registry.insert(spec);
            }
            AgentChange::Disable(name) => {
                registry.remove(&name);
            }
        }
    }
    (registry, errors)
}

/// What one agent file does to the registry.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // one value per file read, never stored in bulk
pub enum AgentChange {
    /// Adds the agent, or replaces the one of the same name with this merged spec.
    Define(AgentSpec),
    /// `disable: true`: removes the agent of this name, if there is one.
    Disable(AgentName),
}

/// Parses one agent file. `file` names it in errors; `stem` is the default name;
/// `base` supplies the agent being overridden, if one of that name exists.
pub fn parse_agent(
    file: &str,
    stem: &str,
    text: &str,
    base: &AgentRegistry,
) -> Result<AgentChange, LoadError> {
    let document = frontmatter::parse(text).map_err(|message| LoadError {
        file: file.to_owned(),
        key: None,
        message,
    })?;
    let (name, overrides) =
        Overrides::read(&document.fields, stem).map_err(|err| err.into_load_error(file))?;
    if overrides.disable {
        return Ok(AgentChange::Disable(name));
    }
    let mut spec = base.get(&name).cloned().unwrap_or_else(|| new_agent(name));
    overrides.apply(&mut spec, document.body);
    Ok(AgentChange::Define(spec))
}

/// The starting point for an agent that overrides nothing: every tool, no rules,
/// usable as primary and as subagent (OpenCode's default for config agents).
fn new_agent(name: AgentName) -> AgentSpec {
    AgentSpec {
        name,
        description: String::new(),
        mode: AgentMode::All,
        hidden: false,
        prompt: String::new(),
        tools: vec!["*".to_owned()],
        permission: Vec::new(),
        max_steps: DEFAULT_MAX_STEPS,
        model: None,
        model_tier: ModelTier::Default,
        temperature: None,
        top_p: None,
        color: None,
        reasoning_effort: None,
        small_model: None,
        thinking_budget: None,
        hooks: Vec::new(),
    }
}

/// The keys a file gave.
#[derive(Debug, Default)]
struct Overrides {
    name: Option<AgentName>,
    description: Option<String>,
    mode: Option<AgentMode>,
    hidden: Option<bool>,
    model: Option<String>,
    model_tier: Option<ModelTier>,
    small_model: Option<String>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    reasoning_effort: Option<String>,
    thinking_budget: Option<u32>,
    max_steps: Option<u32>,
    /// Allow-list entries to append (`name` or `!name`).
    tools: Vec<String>,
    permission: Vec<PermissionRule>,
    color: Option<String>,
    /// Hooks to append to the agent's.
    hooks: Vec<crate::hooks::Hook>,
    disable: bool,
}

impl Overrides {
    /// Reads the keys in file order; the first bad one is the error. Returns the
    /// agent's name (the `name` key, else the file stem) with the other keys.
    fn read(fields: &[(String, Value)], stem: &str) -> Result<(AgentName, Self), FieldError> {
        let mut o = Overrides::default();
        let mut steps_key: Option<&str> = None;
        for (key, value) in fields {
            let key = key.as_str();
            match key {
                "name" => {
                    let name = frontmatter::string(key, value)?;
                    let name = name
                        .parse()
                        .map_err(|err| FieldError::new(key, format!("{err}")))?;
                    o.name = Some(name);
                }
                "description" => o.description = Some(frontmatter::string(key, value)?),
                "mode" => o.mode = Some(mode(key, value)?),
                "hidden" => o.hidden = Some(frontmatter::boolean(key, value)?),
                "model" => o.model = Some(frontmatter::string(key, value)?),
                "model_tier" | "modelTier" => {
                    o.model_tier = Some(match frontmatter::string(key, value)?.as_str() {
                        "default" => ModelTier::Default,
                        "small" => ModelTier::Small,
                        _ => return Err(FieldError::new(key, "must be one of default, small")),
                    });
                }
                "temperature" => o.temperature = Some(frontmatter::number(key, value, 0.0..=2.0)?),
                "top_p" => o.top_p = Some(frontmatter::number(key, value, 0.0..=1.0)?),
                "small_model" | "smallModel" => {
                    o.small_model = Some(frontmatter::string(key, value)?);
                }
                "reasoning_effort" | "reasoningEffort" => {
                    let effort = frontmatter::string(key, value)?;
                    if !REASONING_EFFORTS.contains(&effort.as_str()) {
                        return Err(FieldError::new(
                            key,
                            format!("must be one of {}", REASONING_EFFORTS.join(", ")),
                        ));
                    }
                    o.reasoning_effort = Some(effort);
                }
                "thinking_budget" | "thinkingBudget" => {
                    let budget = value
                        .as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .filter(|n| *n >= MIN_THINKING_BUDGET)
                        .ok_or_else(|| {
                            FieldError::new(
                                key,
                                format!(
                                    "must be a number of tokens, at least {MIN_THINKING_BUDGET}"
                                ),
                            )
                        })?;
                    o.thinking_budget = Some(budget);
                }
                "max_steps" | "maxSteps" => {
                    if let Some(first) = steps_key {
                        return Err(FieldError::new(
                            key,
                            format!("the step limit is already given as {first}"),
                        ));
                    }
                    steps_key = Some(key);
                    o.max_steps = Some(frontmatter::positive(key, value)?);
                }
                "tools" => o.tools = tools(key, value)?,
                "permission" => o.permission = permission(key, value)?,
                "color" => o.color = Some(frontmatter::string(key, value)?),
                "hooks" => o.hooks = hooks(key, value, &o.name, stem)?,
                "disable" => o.disable = frontmatter::boolean(key, value)?,
                _ => {
                    return Err(FieldError::new(
                        key,
                        format!("unknown key; expected one of {KEYS}"),
                    ));
                }
            }
        }
        let name = match o.name.take() {
            Some(name) => name,
            None => stem.parse().map_err(|err| {
                FieldError::new(
                    "name",
                    format!(
                        "the file name does not make a valid agent name and no name is given: {err}"
                    ),
                )
            })?,
        };
        Ok((name, o))
    }

    /// Overrides the fields given; the allow-list and rules are appended.
    fn apply(self, spec: &mut AgentSpec, body: String) {
        let o = self;
        if let Some(description) = o.description {
            spec.description = description;
        }
        if let Some(mode) = o.mode {
            spec.mode = mode;
        }
        if let Some(hidden) = o.hidden {
            spec.hidden = hidden;
        }
        if o.model.is_some() {
            spec.model = o.model;
        }
        if let Some(tier) = o.model_tier {
            spec.model_tier = tier;
        }
        if o.temperature.is_some() {
            spec.temperature = o.temperature;
        }
        if o.top_p.is_some() {
            spec.top_p = o.top_p;
        }
        if o.small_model.is_some() {
            spec.small_model = o.small_model;
        }
        if o.reasoning_effort.is_some() {
            spec.reasoning_effort = o.reasoning_effort;
        }
        if o.thinking_budget.is_some() {
            spec.thinking_budget = o.thinking_budget;
        }
        if let Some(max_steps) = o.max_steps {
            spec.max_steps = max_steps;
        }
        spec.tools.extend(o.tools);
        spec.permission.extend(o.permission);
        if o.color.is_some() {
            spec.color = o.color;
        }
        spec.hooks.extend(o.hooks);
        if !body.is_empty() {
            spec.prompt = body;
        }
    }
}

/// The frontmatter `hooks`: `hooks.json`'s `hooks` value, in YAML.
fn hooks(
    key: &str,
    value: &Value,
    name: &Option<AgentName>,
    stem: &str,
) -> Result<Vec<crate::hooks::Hook>, FieldError> {
    let json = serde_json::to_value(value)
        .map_err(|e| FieldError::new(key, format!("not a map of events: {e}")))?;
    let agent = name.as_ref().map_or(stem, AgentName::as_str);
    crate::hooks::parse_hooks(&json, &format!("agent {agent}"))
        .map_err(|(key, message)| FieldError::new(key, message))
}

fn mode(key: &str, value: &Value) -> Result<AgentMode, FieldError> {
    match value.as_str() {
        Some("primary") => Ok(AgentMode::Primary),
        Some("subagent") => Ok(AgentMode::Subagent),
        Some("all") => Ok(AgentMode::All),
        _ => Err(FieldError::new(
            key,
            "expected one of primary, subagent, all",
        )),
    }
}

fn action(key: &str, value: &Value) -> Result<PermissionAction, FieldError> {
    match value.as_str() {
        Some("allow") => Ok(PermissionAction::Allow),
        Some("ask") => Ok(PermissionAction::Ask),
        Some("deny") => Ok(PermissionAction::Deny),
        _ => Err(FieldError::new(key, "expected one of allow, ask, deny")),
    }
}

/// Sorted so that longer (more specific) keys come later and win; the sort is stable,
/// so equal lengths keep file order.
fn by_specificity<T>(mut entries: Vec<(&str, T)>) -> Vec<(&str, T)> {
    entries.sort_by_key(|(key, _)| key.chars().count());
    entries
}

/// `tools: {name-or-wildcard: bool}` as allow-list entries to append.
fn tools(key: &str, value: &Value) -> Result<Vec<String>, FieldError> {
    let mut entries = Vec::new();
    for (tool, enabled) in by_specificity(frontmatter::mapping(key, value)?) {
        let tool_key = format!("{key}.{tool}");
        if tool.is_empty() || tool.starts_with('!') {
            return Err(FieldError::new(
                tool_key,
                "expected a tool name or wildcard; disable a tool with `name: false`",
            ));
        }
        let enabled = frontmatter::boolean(&tool_key, enabled)?;
        entries.push(if enabled {
            tool.to_owned()
        } else {
            format!("!{tool}")
        });
    }
    Ok(entries)
}

/// `permission: {key: action}` or `{key: {pattern: action}}` as rules to append.
fn permission(key: &str, value: &Value) -> Result<Vec<PermissionRule>, FieldError> {
    let mut rules = Vec::new();
    for (permission, setting) in by_specificity(frontmatter::mapping(key, value)?) {
        let permission_key = format!("{key}.{permission}");
        if permission == "write" {
            return Err(FieldError::new(
                permission_key,
                "writing is covered by the `edit` permission; set `edit` instead",
            ));
        }
        match setting {
            Value::Mapping(_) => {
                let patterns = frontmatter::mapping(&permission_key, setting)?;
                for (pattern, verdict) in by_specificity(patterns) {
                    let verdict = action(&format!("{permission_key}.{pattern:?}"), verdict)?;
                    rules.push(PermissionRule::new(permission, pattern, verdict));
                }
            }
            Value::String(_) => {
                rules.push(PermissionRule::new(
                    permission,
                    "*",
                    action(&permission_key, setting)?,
                ));
            }
            other => {
                return Err(FieldError::new(
                    permission_key,
                    format!(
                        "expected allow, ask, deny or a mapping of patterns to them, found {}",
                        frontmatter::describe(other)
                    ),
                ));
            }
        }
    }
    Ok(rules)
}

#[cfg(test)]
mod tests;
