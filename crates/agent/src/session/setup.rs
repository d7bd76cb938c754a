//! What a task's session is made of, decided from its request before anything runs:
//! the agent as this task may use it (narrowed to the task's scope and, for a child,
//! by the depth policy), the permission layers its ancestors hand down, the model and
//! the small model, compaction, the step limit, the output schema, the MCP servers and
//! the subagents the `task` tool may name.
//!
//! ```ignore
//! let setup = SessionSetup::builder(&request, "openai/gpt-5")
//!     .small_model(worker_small_model)
//!     .compaction(threshold, compact_with_small_model, &catalogue)
//!     .build()?;
//! ```
//!
//! The worker then does what needs IO (the transcript, the workspace, the tools) and
//! runs the session with [`SessionSetup::params`].

use taskwire_definitions::agent::{AgentSpec, ModelTier};
use taskwire_definitions::mcp::McpServerDef;
use taskwire_definitions::output_schema::OutputSchema;
use taskwire_definitions::permission::{PermissionAction, PermissionLayer, Permissions};
use taskwire_definitions::policy::{child_tools_policy, restrict_to_scope};
use taskwire_definitions::skill::Skill;
use taskwire_llm::ModelCatalogue;
use taskwire_llm::router::resolve_model;
use taskwire_protocol::TaskRequest;

use crate::session::CompactionPolicy;

/// A request whose session cannot be set up; nothing ran.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("invalid agent spec: {0}")]
    AgentSpec(taskwire_protocol::ProtocolError),
    /// An ancestor's rule that cannot be read must not leave the child unbounded.
    #[error("invalid inherited permission: {0}")]
    InheritedPermission(taskwire_protocol::ProtocolError),
    /// Checked at submit; a schema that no longer compiles here fails the task clearly.
    #[error("invalid output_schema: {0}")]
    OutputSchema(String),
    #[error("invalid mcp servers: {0}")]
    Mcp(taskwire_protocol::ProtocolError),
}

/// The parts of a session decided from its request.
#[derive(Debug)]
pub struct SessionSetup {
    /// The agent as this task may use it.
    pub agent: AgentSpec,
    /// The permission layers of its ancestors, which bound it.
    pub inherited: Vec<PermissionLayer>,
    /// The session's model.
    pub model: String,
    /// The agent's small model, else the worker's: titles, and summaries when the
    /// worker compacts with it.
    pub small_model: Option<String>,
    pub compaction: Option<CompactionPolicy>,
    /// The request's step limit within the agent's.
    pub max_steps: u32,
    pub schema: Option<OutputSchema>,
    pub mcp: Vec<McpServerDef>,
    /// The agents the `task` tool lists: those this one (and its ancestors) may start.
    pub subagents: Vec<(String, String)>,
    /// The skills the `skill` tool offers: those no rule of this agent (or an
    /// ancestor) denies.
    pub skills: std::sync::Arc<[Skill]>,
}

impl SessionSetup {
    /// Starts a setup for `request`, whose model falls back to `default_model`.
    pub fn builder<'a>(request: &'a TaskRequest, default_model: &'a str) -> SetupBuilder<'a> {
        SetupBuilder {
            request,
            default_model,
            small_model: None,
            compaction: None,
        }
    }

    /// The permissions of its agent under its inherited layers.
    pub fn permissions(&self) -> Permissions<'_> {
        Permissions::new(&self.agent.permission, &self.inherited)
    }

    /// The model titles go to: the small model when there is one.
    pub fn title_model(&self) -> &str {
        self.small_model.as_deref().unwrap_or(&self.model)
    }
}

/// Builds a [`SessionSetup`]; see [`SessionSetup::builder`].
pub struct SetupBuilder<'a> {
    request: &'a TaskRequest,
    default_model: &'a str,
    small_model: Option<String>,
    compaction: Option<(f64, bool, &'a ModelCatalogue)>,
}

impl<'a> SetupBuilder<'a> {
    /// The worker's small model, used when the agent names none.
    pub fn small_model(mut self, model: Option<String>) -> Self {
        self.small_model = model;
        self
    }

    /// Compacts at `threshold` of the model's context window (the limits from
    /// `catalogue`), with the small model when `with_small_model`.
    pub fn compaction(
        mut self,
        threshold: Option<f64>,
        with_small_model: bool,
        catalogue: &'a ModelCatalogue,
    ) -> Self {
        self.compaction = threshold.map(|t| (t, with_small_model, catalogue));
        self
    }

    pub fn build(self) -> Result<SessionSetup, SetupError> {
        let request = self.request;
        let spec =
            AgentSpec::try_from(request.agent_spec.as_ref()).map_err(SetupError::AgentSpec)?;
        let inherited = request
            .inherited_permission
            .iter()
            .map(PermissionLayer::try_from)
            .collect::<Result<Vec<_>, _>>()
            .map_err(SetupError::InheritedPermission)?;
        // An agent of the small tier runs on the small model where there is one,
        // unless the request or the agent names a model.
        let tier_model = (spec.model_tier == ModelTier::Small)
            .then(|| {
                spec.small_model
                    .clone()
                    .or_else(|| self.small_model.clone())
                    .filter(|m| !m.trim().is_empty())
            })
            .flatten();
        let model = resolve_model(
            request.model.as_deref(),
            spec.model.as_deref().or(tier_model.as_deref()),
            request.parent_model.as_deref(),
            self.default_model,
        );
        // The worker enforces what a session may use; the model is never trusted to.
        let agent = restrict_to_scope(&spec, &request.auth_scope);
        drop(spec);
        let agent = if request.depth > 0 {
            child_tools_policy(&agent, request.depth, request.max_depth)
        } else {
            agent
        };
        let small_model = agent
            .small_model
            .clone()
            .or(self.small_model)
            .filter(|m| !m.trim().is_empty());
        // The `compaction` agent the definitions directories left (overridden, or the
        // built-in); none when one disabled it, and then the session is not compacted.
        // Built only for a session that is compacted.
        let compaction = self
            .compaction
            .and_then(|(threshold, with_small, catalogue)| {
                let agent = taskwire_protocol::agent_spec::internal_agent(
                    &request.agent_spec,
                    taskwire_definitions::builtin::compaction(),
                )?;
                let limits = catalogue.limits(&model);
                Some(CompactionPolicy {
                    context_window: limits.context_window,
                    max_output_tokens: limits.max_output_tokens,
                    threshold,
                    model: small_model.clone().filter(|_| with_small),
                    agent,
                })
            });
        let max_steps = request
            .max_steps
            .map_or(agent.max_steps, |m| m.min(agent.max_steps));
        let schema = request
            .output_schema
            .as_deref()
            .map(OutputSchema::parse)
            .transpose()
            .map_err(SetupError::OutputSchema)?;
        let mcp = taskwire_protocol::agent_spec::mcp_from_wire(&request.agent_spec)
            .map_err(SetupError::Mcp)?;
        let permissions = Permissions::new(&agent.permission, &inherited);
        let subagents = request
            .subagents
            .iter()
            .filter(|(name, _)| permissions.evaluate("task", name) != PermissionAction::Deny)
            .cloned()
            .collect();
        let skills = taskwire_protocol::agent_spec::skills_from_wire(&request.agent_spec)
            .into_iter()
            .filter(|s| permissions.evaluate("skill", &s.name) != PermissionAction::Deny)
            .collect();
        Ok(SessionSetup {
            agent,
            inherited,
            model,
            small_model,
            compaction,
            max_steps,
            schema,
            mcp,
            subagents,
            skills,
        })
    }
}
