//! The resolved agent definition, to and from the wire.

use taskwire_agent::agent::{AgentMode, AgentName, AgentSpec};
use taskwire_agent::permission::{PermissionAction, PermissionRule};

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
            permission: a
                .permission
                .iter()
                .map(|r| pb::PermissionRule {
                    permission: r.permission.clone(),
                    pattern: r.pattern.clone(),
                    action: match r.action {
                        PermissionAction::Allow => pb::PermissionAction::Allow,
                        PermissionAction::Ask => pb::PermissionAction::Ask,
                        PermissionAction::Deny => pb::PermissionAction::Deny,
                    } as i32,
                })
                .collect(),
            max_steps: a.max_steps,
            model: a.model.clone(),
            temperature: a.temperature,
            top_p: a.top_p,
            color: a.color.clone(),
        }
    }
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
            .map(|r| {
                let action = match pb::PermissionAction::try_from(r.action) {
                    Ok(pb::PermissionAction::Allow) => PermissionAction::Allow,
                    Ok(pb::PermissionAction::Ask) => PermissionAction::Ask,
                    Ok(pb::PermissionAction::Deny) => PermissionAction::Deny,
                    _ => return Err(ProtocolError::UnknownEnum("agent_spec.permission.action")),
                };
                Ok(PermissionRule {
                    permission: r.permission.clone(),
                    pattern: r.pattern.clone(),
                    action,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if a.max_steps == 0 {
            return Err(ProtocolError::invalid(
                "agent_spec.max_steps",
                "must be at least 1",
            ));
        }
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
            temperature: a.temperature,
            top_p: a.top_p,
            color: a.color.clone(),
        })
    }
}
