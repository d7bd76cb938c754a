//! The resolved agent definition and the inherited permission layers, to and from the
//! wire.

use taskwire_definitions::agent::{AgentMode, AgentName, AgentSpec, ModelTier};
use taskwire_definitions::hooks::{Hook, HookAction, HookEvent};
use taskwire_definitions::mcp::{McpServerDef, McpTransport};
use taskwire_definitions::permission::{PermissionAction, PermissionLayer, PermissionRule};

use crate::{ProtocolError, pb};

impl From<&AgentSpec> for pb::AgentSpec {
    fn from(a: &AgentSpec) -> Self {
        Self {
            name: a.name.as_str().to_owned(),
            description: a.description.clone(),
            mode: match a.mode {
                AgentMode::Primary => pb::AgentMode::Primary,
                AgentMode::Subagent => pb::AgentMode::Subagent,
                AgentMode::All => pb::AgentMode::All,
            } as i32,
            hidden: a.hidden,
            prompt: a.prompt.clone(),
            tools: a.tools.clone(),
            permission: a.permission.iter().map(rule_to_wire).collect(),
            max_steps: a.max_steps,
            model: a.model.clone(),
            temperature: a.temperature,
            top_p: a.top_p,
            color: a.color.clone(),
            mcp: Vec::new(),
            small_model: a.small_model.clone(),
            reasoning_effort: a.reasoning_effort.clone(),
            thinking_budget: a.thinking_budget,
            internal_agents: Vec::new(),
            disabled_internal_agents: Vec::new(),
            model_tier: match a.model_tier {
                ModelTier::Default => String::new(),
                ModelTier::Small => "small".to_owned(),
            },
            skills: Vec::new(),
            hooks: a.hooks.iter().map(hook_to_wire).collect(),
        }
    }
}

/// A hook as a spec carries it.
pub fn hook_to_wire(h: &Hook) -> pb::Hook {
    pb::Hook {
        event: h.event.as_str().to_owned(),
        matcher: h.matcher.clone(),
        action: Some(match &h.action {
            HookAction::Command { command } => pb::hook::Action::Command(command.clone()),
            HookAction::Http { url, headers } => pb::hook::Action::Http(pb::HookHttp {
                url: url.clone(),
                headers: headers
                    .iter()
                    .map(|(key, value)| pb::KeyValue {
                        key: key.clone(),
                        value: value.clone(),
                    })
                    .collect(),
            }),
        }),
        timeout_secs: h.timeout_secs.unwrap_or(0),
        source: h.source.clone(),
    }
}

fn hook_from_wire(h: &pb::Hook) -> Result<Hook, ProtocolError> {
    let event = HookEvent::parse(&h.event).ok_or_else(|| {
        ProtocolError::invalid(
            "agent_spec.hooks.event",
            format!("unknown event {:?}", h.event),
        )
    })?;
    let action = match &h.action {
        Some(pb::hook::Action::Command(command)) if !command.trim().is_empty() => {
            HookAction::Command {
                command: command.clone(),
            }
        }
        Some(pb::hook::Action::Http(http)) if !http.url.is_empty() => HookAction::Http {
            url: http.url.clone(),
            headers: http
                .headers
                .iter()
                .map(|kv| (kv.key.clone(), kv.value.clone()))
                .collect(),
        },
        _ => {
            return Err(ProtocolError::invalid(
                "agent_spec.hooks.action",
                "a hook needs a command or a url",
            ));
        }
    };
    Ok(Hook {
        event,
        matcher: h.matcher.clone(),
        action,
        timeout_secs: (h.timeout_secs > 0).then_some(h.timeout_secs),
        source: h.source.clone(),
    })
}

/// The skills as a spec carries them.
pub fn skills_to_wire(skills: &taskwire_definitions::skill::Skills) -> Vec<pb::Skill> {
    skills
        .list()
        .map(|s| pb::Skill {
            name: s.name.clone(),
            description: s.description.clone(),
            body: s.body.clone(),
            files: s
                .files
                .iter()
                .map(|f| pb::SkillFile {
                    path: f.path.clone(),
                    content: f.content.clone(),
                })
                .collect(),
        })
        .collect()
}

/// The skills a spec carries; one whose name is not a skill's is left out.
pub fn skills_from_wire(spec: &pb::AgentSpec) -> Vec<taskwire_definitions::skill::Skill> {
    spec.skills
        .iter()
        .filter(|s| taskwire_definitions::skill::valid_name(&s.name))
        .map(|s| taskwire_definitions::skill::Skill {
            name: s.name.clone(),
            description: s.description.clone(),
            body: s.body.clone(),
            files: s
                .files
                .iter()
                .map(|f| taskwire_definitions::skill::SkillFile {
                    path: f.path.clone(),
                    content: f.content.clone(),
                })
                .collect(),
        })
        .collect()
}

/// What the definitions directories made of the internal agents (`compaction`,
/// `title`), as a spec carries it: each overridden one, and the names of those a
/// directory disabled. A built-in left as it is is not shipped.
pub fn internal_agents_to_wire(
    registry: &taskwire_definitions::builtin::AgentRegistry,
) -> (Vec<pb::AgentSpec>, Vec<String>) {
    // Built once: this runs for every submit.
    static BUILTINS: std::sync::LazyLock<[AgentSpec; 2]> = std::sync::LazyLock::new(|| {
        [
            taskwire_definitions::builtin::compaction(),
            taskwire_definitions::builtin::title(),
        ]
    });
    let mut overridden = Vec::new();
    let mut disabled = Vec::new();
    for builtin in BUILTINS.iter() {
        match registry.get(&builtin.name) {
            None => disabled.push(builtin.name.to_string()),
            Some(spec) if spec != builtin => overridden.push(pb::AgentSpec::from(spec)),
            Some(_) => {}
        }
    }
    (overridden, disabled)
}

/// The internal agent `name` a spec's sessions use: its override, else the built-in;
/// `None` when a definitions directory disabled it. An override that does not decode
/// is left out (the built-in runs), never a reason to fail the task.
pub fn internal_agent(spec: &pb::AgentSpec, builtin: AgentSpec) -> Option<AgentSpec> {
    let name = builtin.name.as_str();
    if spec.disabled_internal_agents.iter().any(|d| d == name) {
        return None;
    }
    Some(
        spec.internal_agents
            .iter()
            .find(|a| a.name == name)
            .and_then(|a| AgentSpec::try_from(a).ok())
            .unwrap_or(builtin),
    )
}

/// An MCP server as shipped with an agent spec.
pub fn mcp_to_wire(def: &McpServerDef) -> pb::McpServer {
    let pairs = |pairs: &[(String, String)]| {
        pairs
            .iter()
            .map(|(key, value)| pb::KeyValue {
                key: key.clone(),
                value: value.clone(),
            })
            .collect()
    };
    pb::McpServer {
        name: def.name.clone(),
        transport: Some(match &def.transport {
            McpTransport::Local { command } => pb::mcp_server::Transport::Local(pb::McpLocal {
                command: command.clone(),
            }),
            McpTransport::Remote { url, headers } => {
                pb::mcp_server::Transport::Remote(pb::McpRemote {
                    url: url.clone(),
                    headers: pairs(headers),
                })
            }
        }),
        environment: pairs(&def.environment),
        timeout_ms: def.timeout.map_or(0, |t| t.as_millis() as u64),
        hosts: def.hosts.clone(),
    }
}

/// The MCP servers an agent spec ships.
pub fn mcp_from_wire(spec: &pb::AgentSpec) -> Result<Vec<McpServerDef>, ProtocolError> {
    let pairs = |pairs: &[pb::KeyValue]| {
        pairs
            .iter()
            .map(|p| (p.key.clone(), p.value.clone()))
            .collect()
    };
    spec.mcp
        .iter()
        .map(|s| {
            let transport = match &s.transport {
                Some(pb::mcp_server::Transport::Local(l)) if !l.command.is_empty() => {
                    McpTransport::Local {
                        command: l.command.clone(),
                    }
                }
                Some(pb::mcp_server::Transport::Remote(r)) => McpTransport::Remote {
                    url: r.url.clone(),
                    headers: pairs(&r.headers),
                },
                _ => return Err(ProtocolError::Missing("agent_spec.mcp.transport")),
            };
            Ok(McpServerDef {
                name: s.name.clone(),
                transport,
                environment: pairs(&s.environment),
                timeout: (s.timeout_ms > 0).then(|| std::time::Duration::from_millis(s.timeout_ms)),
                hosts: s.hosts.clone(),
            })
        })
        .collect()
}

impl TryFrom<&pb::AgentSpec> for AgentSpec {
    type Error = ProtocolError;

    fn try_from(a: &pb::AgentSpec) -> Result<Self, Self::Error> {
        let name: AgentName = a
            .name
            .parse()
            .map_err(|e| ProtocolError::invalid("agent_spec.name", format!("{e}")))?;
        let mode = match pb::AgentMode::try_from(a.mode) {
            Ok(pb::AgentMode::Primary) => AgentMode::Primary,
            Ok(pb::AgentMode::Subagent) => AgentMode::Subagent,
            Ok(pb::AgentMode::All) => AgentMode::All,
            _ => return Err(ProtocolError::UnknownEnum("agent_spec.mode")),
        };
        let permission = a
            .permission
            .iter()
            .map(|r| rule_from_wire(r, "agent_spec.permission.action"))
            .collect::<Result<Vec<_>, _>>()?;
        if a.max_steps == 0 {
            return Err(ProtocolError::invalid(
                "agent_spec.max_steps",
                "must be at least 1",
            ));
        }
        // An unknown tier (a newer coordinator's) runs as the default: the parent's model.
        let model_tier = match a.model_tier.as_str() {
            "small" => ModelTier::Small,
            _ => ModelTier::Default,
        };
        Ok(AgentSpec {
            name,
            description: a.description.clone(),
            mode,
            hidden: a.hidden,
            prompt: a.prompt.clone(),
            tools: a.tools.clone(),
            permission,
            max_steps: a.max_steps,
            model: a.model.clone(),
            model_tier,
            temperature: a.temperature,
            top_p: a.top_p,
            small_model: a.small_model.clone(),
            reasoning_effort: a.reasoning_effort.clone(),
            thinking_budget: a.thinking_budget,
            color: a.color.clone(),
            hooks: a
                .hooks
                .iter()
                .map(hook_from_wire)
                .collect::<Result<_, _>>()?,
        })
    }
}

impl From<&PermissionLayer> for pb::PermissionLayer {
    fn from(l: &PermissionLayer) -> Self {
        Self {
            agent: l.agent.clone(),
            rules: l.rules.iter().map(rule_to_wire).collect(),
        }
    }
}

/// An unknown action is refused, never read as a default: a rule that cannot be read
/// must not leave a child with more power than its parent.
impl TryFrom<&pb::PermissionLayer> for PermissionLayer {
    type Error = ProtocolError;

    fn try_from(l: &pb::PermissionLayer) -> Result<Self, Self::Error> {
        Ok(Self {
            agent: l.agent.clone(),
            rules: l
                .rules
                .iter()
                .map(|r| rule_from_wire(r, "inherited_permission.rules.action"))
                .collect::<Result<_, _>>()?,
        })
    }
}

fn rule_to_wire(r: &PermissionRule) -> pb::PermissionRule {
    pb::PermissionRule {
        permission: r.permission.clone(),
        pattern: r.pattern.clone(),
        action: match r.action {
            PermissionAction::Allow => pb::PermissionAction::Allow,
            PermissionAction::Ask => pb::PermissionAction::Ask,
            PermissionAction::Deny => pb::PermissionAction::Deny,
        } as i32,
    }
}

/// `field` names the action in the error.
fn rule_from_wire(
    r: &pb::PermissionRule,
    field: &'static str,
) -> Result<PermissionRule, ProtocolError> {
    let action = match pb::PermissionAction::try_from(r.action) {
        Ok(pb::PermissionAction::Allow) => PermissionAction::Allow,
        Ok(pb::PermissionAction::Ask) => PermissionAction::Ask,
        Ok(pb::PermissionAction::Deny) => PermissionAction::Deny,
        _ => return Err(ProtocolError::UnknownEnum(field)),
    };
    Ok(PermissionRule {
        permission: r.permission.clone(),
        pattern: r.pattern.clone(),
        action,
    })
}

#[cfg(test)]
mod tests {
    use taskwire_definitions::builtin::{self, AgentRegistry};

    use super::*;

    #[test]
    fn only_overridden_or_disabled_internal_agents_travel_and_the_rest_are_built_in() {
        let untouched = AgentRegistry::builtin();
        assert_eq!(
            internal_agents_to_wire(&untouched),
            (Vec::new(), Vec::new())
        );
        let spec = pb::AgentSpec::default();
        assert_eq!(
            internal_agent(&spec, builtin::compaction()),
            Some(builtin::compaction())
        );

        let mut registry = AgentRegistry::builtin();
        let mut compaction = builtin::compaction();
        compaction.prompt = "Summarise in the team's template.".into();
        compaction.model = Some("summariser".into());
        registry.insert(compaction.clone());
        registry.remove(&builtin::title().name);
        let (internal_agents, disabled_internal_agents) = internal_agents_to_wire(&registry);
        assert_eq!(internal_agents.len(), 1);
        assert_eq!(disabled_internal_agents, vec!["title".to_owned()]);
        let spec = pb::AgentSpec {
            internal_agents,
            disabled_internal_agents,
            ..pb::AgentSpec::default()
        };
        assert_eq!(
            internal_agent(&spec, builtin::compaction()),
            Some(compaction)
        );
        assert_eq!(internal_agent(&spec, builtin::title()), None);
    }
}
