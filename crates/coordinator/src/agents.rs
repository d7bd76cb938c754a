//! [`Agents`]: the agent registry as submits use it, with each agent's spec in the
//! wire form a task carries, built once per registry.
//!
//! A task's spec is its agent's definition with the definitions directories' hooks, MCP
//! servers, skills and internal agents added, and the agents its `task` tool may start.
//! All of it is the same for every task of that agent until the registry is replaced
//! (a definitions reload makes a new [`Agents`]), so the first submit of an agent
//! builds it and the others share it. Shared, the spec's digest and encoding are
//! computed once too ([`taskwire_protocol::task::TaskRequest::to_dispatch`]).

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use taskwire_definitions::agent::{AgentName, AgentSpec};
use taskwire_definitions::builtin::AgentRegistry;
use taskwire_protocol::agent_spec::{
    hook_to_wire, internal_agents_to_wire, mcp_to_wire, skills_to_wire,
};
use taskwire_protocol::pb;

/// A registry and the wire specs built from it so far.
#[derive(Debug)]
pub struct Agents {
    registry: AgentRegistry,
    wire: Mutex<HashMap<AgentName, WireSpec>>,
}

/// What a task of an agent carries: its spec and the agents its `task` tool may start.
#[derive(Debug, Clone)]
pub struct WireSpec {
    pub spec: Arc<pb::AgentSpec>,
    /// `(name, description)` of each subagent.
    pub subagents: Arc<[(String, String)]>,
}

impl From<AgentRegistry> for Agents {
    fn from(registry: AgentRegistry) -> Self {
        Self {
            registry,
            wire: Mutex::new(HashMap::new()),
        }
    }
}

impl Deref for Agents {
    type Target = AgentRegistry;
    fn deref(&self) -> &AgentRegistry {
        &self.registry
    }
}

impl Agents {
    /// The wire spec of `spec` (an agent of this registry), built on first use.
    pub fn wire_spec(&self, spec: &AgentSpec) -> WireSpec {
        let mut wire = self.wire.lock().expect("wire spec lock is never poisoned");
        if let Some(built) = wire.get(&spec.name) {
            return built.clone();
        }
        let built = self.build(spec);
        wire.insert(spec.name.clone(), built.clone());
        built
    }

    fn build(&self, spec: &AgentSpec) -> WireSpec {
        let registry = &self.registry;
        let (internal_agents, disabled_internal_agents) = internal_agents_to_wire(registry);
        let mut wire = pb::AgentSpec::from(spec);
        // The directories' hooks run first, then the agent's own.
        let mut hooks: Vec<pb::Hook> = registry.hooks().list().iter().map(hook_to_wire).collect();
        hooks.append(&mut wire.hooks);
        let spec = pb::AgentSpec {
            hooks,
            mcp: registry.mcp().list().map(mcp_to_wire).collect(),
            internal_agents,
            disabled_internal_agents,
            skills: skills_to_wire(registry.skills()),
            ..wire
        };
        let subagents: Vec<(String, String)> = registry
            .list(false)
            .into_iter()
            .filter(|a| a.mode.is_subagent())
            .map(|a| (a.name.to_string(), a.description.clone()))
            .collect();
        WireSpec {
            spec: Arc::new(spec),
            subagents: subagents.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agents_wire_spec_is_built_once_and_shared_until_the_registry_is_replaced() {
        let agents = Agents::from(AgentRegistry::builtin());
        let build = agents.get(&"build".parse().expect("name")).expect("build");
        let first = agents.wire_spec(build);
        let again = agents.wire_spec(build);
        assert!(Arc::ptr_eq(&first.spec, &again.spec));
        assert!(Arc::ptr_eq(&first.subagents, &again.subagents));
        assert_eq!(first.spec.name, "build");
        assert!(first.subagents.iter().any(|(name, _)| name == "explore"));

        let mut changed = AgentRegistry::builtin();
        let mut general = taskwire_definitions::builtin::general();
        general.description = "a new description".into();
        changed.insert(general);
        let reloaded = Agents::from(changed);
        let after = reloaded.wire_spec(
            reloaded
                .get(&"build".parse().expect("name"))
                .expect("build"),
        );
        assert!(
            after
                .subagents
                .iter()
                .any(|(name, d)| name == "general" && d == "a new description"),
            "a new registry builds its own: {:?}",
            after.subagents
        );
    }
}
