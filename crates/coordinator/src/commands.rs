//! Slash commands (`RunCommand`) and the agent/command registries they draw on.
//!
//! The coordinator owns both registries: built-in agents merged with
//! `<config_dir>/agents/*.md`, and `<config_dir>/commands/*.md`. A named loop reloads
//! them when the files change, so every worker runs the same definitions (they are
//! shipped in each envelope). An invalid file is logged with its name and key and
//! skipped; the rest load.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use taskwire_agent::builtin::AgentRegistry;
use taskwire_agent::command::{CommandMode, CommandRegistry, command_mode, load_commands, render};
use taskwire_agent::loader::load_agents;
use taskwire_protocol::pb;
use tokio_util::sync::CancellationToken;

use crate::auth::Principal;
use crate::submit::submit_task;
use crate::{CoordinatorError, State};

const RELOAD_POLL: Duration = Duration::from_secs(2);

/// Loads the registries from `config_dir` (built-ins only when it is `None`).
pub fn load(config_dir: Option<&Path>) -> (AgentRegistry, CommandRegistry) {
    let Some(dir) = config_dir else {
        return (AgentRegistry::builtin(), CommandRegistry::new());
    };
    let (agents, agent_errors) = load_agents(&dir.join("agents"), AgentRegistry::builtin());
    let (commands, command_errors) = load_commands(&dir.join("commands"));
    for e in agent_errors.iter().chain(&command_errors) {
        tracing::warn!(file = %e.file, key = e.key.as_deref().unwrap_or(""), error = %e.message, "invalid definition skipped");
    }
    (agents, commands)
}

/// A fingerprint of the definition files: changes when any is added, removed or edited.
fn fingerprint(dir: &Path) -> Vec<(PathBuf, Option<SystemTime>, u64)> {
    let mut out = Vec::new();
    for sub in ["agents", "commands"] {
        if let Ok(entries) = std::fs::read_dir(dir.join(sub)) {
            for e in entries.flatten() {
                let meta = e.metadata().ok();
                out.push((
                    e.path(),
                    meta.as_ref().and_then(|m| m.modified().ok()),
                    meta.map_or(0, |m| m.len()),
                ));
            }
        }
    }
    out.sort();
    out
}

/// Reloads the registries when the files under `dir` change, until `shutdown`.
/// Failure policy: a reload that finds invalid files keeps the valid ones (and logs).
pub async fn watch(state: Arc<State>, dir: PathBuf, shutdown: CancellationToken) {
    let mut last = fingerprint(&dir);
    let mut tick = tokio::time::interval(RELOAD_POLL);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let now = fingerprint(&dir);
        if now != last {
            last = now;
            let (agents, commands) = load(Some(&dir));
            tracing::info!(
                agents = agents.list(true).len(),
                commands = commands.list().len(),
                "definitions reloaded"
            );
            *state
                .agents
                .write()
                .expect("registry lock is never poisoned") = Arc::new(agents);
            *state
                .commands
                .write()
                .expect("registry lock is never poisoned") = Arc::new(commands);
        }
    }
}

/// `RunCommand`: renders the command and submits it, as a subtask (a session of the
/// default agent that first delegates to the command's agent, without asking a model)
/// or as a plain prompt to the command's agent, by seed 000's rule.
pub async fn run_command(
    state: &State,
    caller: &Principal,
    req: pb::RunCommandRequest,
) -> Result<pb::SubmitResponse, CoordinatorError> {
    let name = req.command.trim().trim_start_matches('/').to_owned();
    if name.is_empty() {
        return Err(CoordinatorError::invalid("command", "is required"));
    }
    let commands = state.commands();
    let command = commands
        .get(&name)
        .ok_or_else(|| CoordinatorError::NotFound(format!("command `/{name}`")))?;
    let registry = state.registry();
    let agent_name = command
        .agent
        .as_ref()
        .map_or(state.config.default_agent.as_str(), |a| a.as_str())
        .to_owned();
    let agent = registry
        .get(
            &agent_name
                .parse()
                .map_err(|e| CoordinatorError::invalid("agent", format!("{e}")))?,
        )
        .ok_or_else(|| {
            CoordinatorError::NotFound(format!("agent `{agent_name}` of command `/{name}`"))
        })?
        .clone();
    let base = pb::SubmitRequest {
        tenant: req.tenant,
        parent_task_id: req.parent_task_id,
        resume_token: req.session_id,
        model: req.model.or_else(|| command.model.clone()),
        deadline: req.deadline,
        idempotency_key: req.idempotency_key,
        command: format!("/{name}"),
        ..Default::default()
    };
    let submit = match command_mode(command, &agent) {
        CommandMode::Prompt => pb::SubmitRequest {
            agent: agent_name,
            prompt: render(&command.template, &req.arguments),
            ..base
        },
        CommandMode::Subtask => {
            let part = command.subtask_part(&agent, &req.arguments);
            pb::SubmitRequest {
                agent: state.config.default_agent.clone(),
                // What the user typed is the session's user message.
                prompt: format!("/{name} {}", req.arguments).trim_end().to_owned(),
                subtask: Some(pb::Subtask {
                    agent: part.agent,
                    description: part.description,
                    prompt: part.prompt,
                    command: part.command.unwrap_or_default(),
                }),
                ..base
            }
        }
    };
    let mut submit = submit;
    let parent = crate::ownership::parent(state, caller, &mut submit).await?;
    submit_task(state, caller, submit, parent).await
}
