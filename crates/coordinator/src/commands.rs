//! Slash commands (`RunCommand`) and the agent/command registries they draw on.
//!
//! The coordinator owns both registries: the built-in agents, with the `agents/*.md`,
//! `commands/*.md`, `mcp.json`, `skills/` and `hooks.json` of each configured directory layered on top in order (see
//! [`CoordinatorConfig::config_dirs`](crate::CoordinatorConfig::config_dirs): the
//! user's, then the project's). A named loop reloads them when any of the files change,
//! so every worker runs the same definitions (they are shipped in each envelope). An
//! invalid file is logged with its name and key and skipped; the rest load.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use taskwire_agent::command::{CommandMode, CommandRegistry, command_mode, load_commands, render};
use taskwire_agent::mcp::{McpServers, load_mcp};
use taskwire_definitions::builtin::AgentRegistry;
use taskwire_definitions::loader::load_agents;
use taskwire_protocol::{SessionId, pb};
use tokio_util::sync::CancellationToken;

use crate::auth::Principal;
use crate::submit::{Origin, submit_task};
use crate::{CoordinatorError, State};

const RELOAD_POLL: Duration = Duration::from_secs(2);

/// Loads the registries: the built-ins (agents, and the commands `/init` and
/// `/review`), then each of `dirs` over what came before, so a later directory's agent
/// overrides (or with `disable: true` removes) an earlier one of the same name, and its
/// command replaces one of the same name.
pub fn load(dirs: &[PathBuf]) -> (AgentRegistry, CommandRegistry) {
    let mut agents = AgentRegistry::builtin();
    let mut commands = CommandRegistry::builtin();
    let mut mcp = McpServers::new();
    let mut skills = taskwire_definitions::skill::Skills::new();
    let mut hooks = taskwire_definitions::hooks::Hooks::new();
    for dir in dirs {
        let (layered, agent_errors) = load_agents(&dir.join("agents"), agents);
        agents = layered;
        let (found, command_errors) = load_commands(&dir.join("commands"));
        for command in found.list() {
            commands.insert(command.clone());
        }
        let (servers, mcp_errors) = load_mcp(dir, mcp);
        mcp = servers;
        let (layered, skill_errors) = taskwire_definitions::skill::load_skills(dir, skills);
        skills = layered;
        let (layered, hook_errors) = taskwire_definitions::hooks::load_hooks(dir, hooks);
        hooks = layered;
        for e in agent_errors
            .iter()
            .chain(&command_errors)
            .chain(&mcp_errors)
            .chain(&skill_errors)
            .chain(&hook_errors)
        {
            tracing::warn!(dir = %dir.display(), file = %e.file, key = e.key.as_deref().unwrap_or(""), error = %e.message, "invalid definition skipped");
        }
    }
    agents.set_mcp(mcp);
    agents.set_skills(skills);
    agents.set_hooks(hooks);
    (agents, commands)
}

/// A fingerprint of the definition files: changes when any is added, removed or edited.
fn fingerprint(dirs: &[PathBuf]) -> Vec<(PathBuf, Option<SystemTime>, u64)> {
    let mut out = Vec::new();
    for dir in dirs {
        for name in ["mcp.json", "hooks.json"] {
            let file = dir.join(name);
            if let Ok(meta) = std::fs::metadata(&file) {
                out.push((file, meta.modified().ok(), meta.len()));
            }
        }
        for sub in ["agents", "commands", "skills"] {
            fingerprint_tree(&dir.join(sub), &mut out);
        }
    }
    out.sort();
    out
}

/// The files under `dir`, recursively (a skill's files sit a level or more down).
fn fingerprint_tree(dir: &std::path::Path, out: &mut Vec<(PathBuf, Option<SystemTime>, u64)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            fingerprint_tree(&path, out);
            continue;
        }
        let meta = e.metadata().ok();
        out.push((
            path,
            meta.as_ref().and_then(|m| m.modified().ok()),
            meta.map_or(0, |m| m.len()),
        ));
    }
}

/// Reloads the registries when the files under any of `dirs` change (a directory
/// created later counts), until `shutdown`. Failure policy: a reload that finds invalid
/// files keeps the valid ones (and logs).
pub async fn watch(state: Arc<State>, dirs: Vec<PathBuf>, shutdown: CancellationToken) {
    let mut last = fingerprint(&dirs);
    let mut tick = tokio::time::interval(RELOAD_POLL);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let now = fingerprint(&dirs);
        if now != last {
            last = now;
            let (agents, commands) = load(&dirs);
            tracing::info!(
                agents = agents.list(true).len(),
                commands = commands.list().len(),
                "definitions reloaded"
            );
            *state
                .agents
                .write()
                .expect("registry lock is never poisoned") = Arc::new(agents.into());
            *state
                .commands
                .write()
                .expect("registry lock is never poisoned") = Arc::new(commands);
        }
    }
}

/// `RunCommand`: renders the command and submits it, as a subtask (a session of the
/// session's current agent that first delegates to the command's agent, without asking
/// a model) or as a plain prompt to the command's agent, by seed 000's rule.
///
/// The session's current agent is the agent of the newest task of the session named
/// by `session_id`, and the configured default agent without one (seed 003 §1.4.1): it
/// runs a command that names no agent, and it is the parent of a command's subtask.
/// The template's !`cmd` are left for the worker (`expand_shell`), which runs them in
/// the task's workspace under that session's `bash` rules.
pub async fn run_command(
    state: &State,
    caller: &Principal,
    req: pb::RunCommandRequest,
) -> Result<pb::SubmitResponse, CoordinatorError> {
    let name = req.command.trim().trim_start_matches('/').to_owned();
    if name.is_empty() {
        return Err(CoordinatorError::invalid("command", "is required"));
    }
    let current_agent = session_agent(state, caller, &req.session_id).await?;
    let commands = state.commands();
    let command = commands
        .get(&name)
        .ok_or_else(|| CoordinatorError::NotFound(format!("command `/{name}`")))?;
    let registry = state.registry();
    let agent_name = command
        .agent
        .as_ref()
        .map_or(current_agent.as_str(), |a| a.as_str())
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
        output_schema: req.output_schema,
        expand_shell: true,
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
                agent: current_agent.clone(),
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
    submit_task(state, caller, submit, parent, Origin::Command).await
}

/// The agent of the newest task of session `raw`, or the default agent for none (an
/// unknown session, or another tenant's, is refused later, when the submit resumes it).
async fn session_agent(
    state: &State,
    caller: &Principal,
    raw: &str,
) -> Result<String, CoordinatorError> {
    if raw.is_empty() {
        return Ok(state.config.default_agent.clone());
    }
    let session = SessionId::parse_field("session_id", raw)?;
    Ok(state
        .store
        .session_agent_for(caller.tenant.as_deref(), session)
        .await?
        .unwrap_or_else(|| state.config.default_agent.clone()))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use taskwire_definitions::agent::AgentSpec;

    use super::*;

    fn write(dir: &Path, file: &str, text: &str) {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    fn agent<'a>(registry: &'a AgentRegistry, name: &str) -> Option<&'a AgentSpec> {
        registry.get(&name.parse().expect("valid name"))
    }

    fn description(registry: &AgentRegistry, name: &str) -> String {
        agent(registry, name)
            .unwrap_or_else(|| panic!("agent {name} is missing"))
            .description
            .clone()
    }

    /// A user directory and a project directory, lowest precedence first.
    fn layers() -> (tempfile::TempDir, tempfile::TempDir) {
        let (user, project) = (
            tempfile::tempdir().expect("dir"),
            tempfile::tempdir().expect("dir"),
        );
        write(
            user.path(),
            "agents/reviewer.md",
            "---\ndescription: user reviewer\nmode: subagent\nmax_steps: 7\n---\nReview.\n",
        );
        write(
            user.path(),
            "agents/explore.md",
            "---\ndescription: user explore\n---\n",
        );
        write(
            user.path(),
            "agents/linter.md",
            "---\ndescription: user linter\n---\nLint.\n",
        );
        write(
            user.path(),
            "commands/review.md",
            "---\nagent: reviewer\n---\nuser $1\n",
        );
        write(
            user.path(),
            "commands/lint.md",
            "---\nagent: linter\n---\nlint $1\n",
        );
        write(
            project.path(),
            "agents/reviewer.md",
            "---\ndescription: project reviewer\n---\n",
        );
        write(
            project.path(),
            "agents/linter.md",
            "---\ndisable: true\n---\n",
        );
        write(
            project.path(),
            "commands/review.md",
            "---\nagent: reviewer\n---\nproject $1\n",
        );
        (user, project)
    }

    #[test]
    fn project_definitions_override_user_ones_which_override_built_ins() {
        let (user, project) = layers();
        let (agents, commands) = load(&[user.path().to_owned(), project.path().to_owned()]);

        assert_eq!(description(&agents, "reviewer"), "project reviewer");
        let reviewer = agent(&agents, "reviewer").expect("reviewer");
        // A project file overrides only the keys it gives; the user's others stay.
        assert_eq!(reviewer.max_steps, 7);
        assert_eq!(reviewer.prompt.trim(), "Review.");
        assert_eq!(description(&agents, "explore"), "user explore");
        assert_eq!(
            description(&agents, "build"),
            description(&AgentRegistry::builtin(), "build")
        );
        let review = commands.get("review").expect("review");
        assert_eq!(review.template.trim(), "project $1");
    }

    #[test]
    fn disable_in_the_project_removes_a_user_agent() {
        let (user, project) = layers();
        let (agents, commands) = load(&[user.path().to_owned()]);
        assert_eq!(description(&agents, "linter"), "user linter");
        let (agents, _) = load(&[user.path().to_owned(), project.path().to_owned()]);
        assert!(agent(&agents, "linter").is_none());
        // The command stays; running it names the missing agent.
        assert!(commands.get("lint").is_some());
    }

    #[test]
    fn a_single_directory_is_the_only_layer_over_the_built_ins() {
        let (user, project) = layers();
        let (agents, commands) = load(&[project.path().to_owned()]);
        // The project's reviewer no longer has the user's file under it.
        let reviewer = agent(&agents, "reviewer").expect("reviewer");
        assert_ne!(reviewer.max_steps, 7, "the user's step limit");
        assert!(agent(&agents, "linter").is_none());
        assert!(commands.get("lint").is_none());
        assert_eq!(
            description(&agents, "explore"),
            description(&AgentRegistry::builtin(), "explore")
        );
        assert!(user.path().join("agents/linter.md").is_file());
    }

    #[test]
    fn missing_directories_leave_the_built_ins() {
        let gone = PathBuf::from("/nonexistent/taskwire-config");
        let (agents, commands) = load(std::slice::from_ref(&gone));
        assert_eq!(
            agents.list(true).len(),
            AgentRegistry::builtin().list(true).len()
        );
        let names: Vec<&str> = commands.list().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["init", "review"], "the built-in commands");
    }

    #[test]
    fn the_fingerprint_changes_when_a_file_appears_in_any_directory() {
        let (first, second) = (
            tempfile::tempdir().expect("dir"),
            tempfile::tempdir().expect("dir"),
        );
        let dirs = [first.path().to_owned(), second.path().join(".taskwire")];
        let before = fingerprint(&dirs);
        write(&dirs[1], "agents/x.md", "---\ndescription: x\n---\n");
        assert_ne!(fingerprint(&dirs), before);
    }
}
