//! Slash commands (seed 000's rule decides subtask or prompt) and markdown agents.

use taskwire_e2e::{Cluster, start_with};
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

const SUMMARY: &str = "Summarize the task tool output above and continue with your task.";

fn write(dir: &std::path::Path, file: &str, text: &str) {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// Every model call answers with what it was asked, so the tests can read the prompts.
fn echo_last(req: &SeenRequest) -> ScriptedReply {
    let last = req
        .messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .map(|m| m.content.clone())
        .unwrap_or_default();
    ScriptedReply::text(format!("answered: {last}"))
}

async fn cluster(config: &tempfile::TempDir) -> Cluster {
    let dir = config.path().to_owned();
    start_with(ScriptedModel::start(echo_last).await, 1, 4, move |c| {
        c.config_dir = Some(dir)
    })
    .await
    .expect("cluster")
}

fn config_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("config dir");
    write(
        dir.path(),
        "commands/find.md",
        "---\ndescription: find a symbol\nagent: explore\n---\nFind $1 in $ARGUMENTS\n",
    );
    write(
        dir.path(),
        "commands/ask.md",
        "---\nagent: explore\nsubtask: false\n---\nAnswer about $1\n",
    );
    write(
        dir.path(),
        "commands/fix.md",
        "---\nagent: build\nsubtask: true\n---\nFix $1\n",
    );
    write(
        dir.path(),
        "agents/auditor.md",
        "---\ndescription: audits files without searching\nmode: subagent\ntools:\n  grep: false\n---\nYou audit.\n",
    );
    write(
        dir.path(),
        "agents/broken.md",
        "---\nmode: sideways\n---\nnope\n",
    );
    dir
}

async fn run(cluster: &Cluster, command: &str, arguments: &str) -> pb::Task {
    let mut client = cluster.client().await.expect("client");
    let r = client
        .run_command(pb::RunCommandRequest {
            command: command.into(),
            arguments: arguments.into(),
            ..Default::default()
        })
        .await
        .expect("run command")
        .into_inner();
    cluster.wait_finished(&r.task_id).await.expect("finished")
}

#[tokio::test]
async fn a_command_for_a_subagent_runs_as_a_subtask_then_the_session_summarises() {
    let config = config_dir();
    let cluster = cluster(&config).await;
    let task = run(&cluster, "/find", "Config src").await;
    assert_eq!(
        task.status(),
        pb::TaskStatus::Completed,
        "{:?}",
        task.result
    );
    assert_eq!(
        task.agent, "build",
        "the session runs in the default primary agent"
    );
    let kids = cluster.children(&task.task_id).await.expect("children");
    assert_eq!(kids.len(), 1, "one subtask, started without asking a model");
    assert_eq!(kids[0].agent, "explore");
    assert_eq!(kids[0].prompt, "Find Config src in Config src");
    // The parent's only model call came after the subtask, with its output as a task
    // tool result and the synthetic summary request as the last user message.
    let parent_calls: Vec<SeenRequest> = cluster
        .model
        .requests()
        .into_iter()
        .filter(|r| r.messages.iter().any(|m| m.role == "tool"))
        .collect();
    assert_eq!(parent_calls.len(), 1);
    let tool = parent_calls[0]
        .messages
        .iter()
        .find(|m| m.role == "tool")
        .expect("tool message");
    assert!(
        tool.content
            .contains("answered: Find Config src in Config src"),
        "{}",
        tool.content
    );
    assert_eq!(
        parent_calls[0].messages.last().expect("messages").content,
        SUMMARY
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn subtask_false_sends_the_rendered_prompt_to_the_agent() {
    let config = config_dir();
    let cluster = cluster(&config).await;
    let task = run(&cluster, "ask", "retries").await;
    assert_eq!(task.status(), pb::TaskStatus::Completed);
    assert_eq!(task.agent, "explore");
    assert_eq!(task.prompt, "Answer about retries");
    assert!(
        cluster
            .children(&task.task_id)
            .await
            .expect("children")
            .is_empty()
    );
    assert_eq!(
        task.result.expect("result").output.expect("output").text,
        "answered: Answer about retries"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn subtask_true_delegates_even_to_a_primary_agent() {
    let config = config_dir();
    let cluster = cluster(&config).await;
    let task = run(&cluster, "/fix", "the build").await;
    assert_eq!(
        task.status(),
        pb::TaskStatus::Completed,
        "{:?}",
        task.result
    );
    let kids = cluster.children(&task.task_id).await.expect("children");
    assert_eq!(kids.len(), 1);
    assert_eq!(
        (kids[0].agent.as_str(), kids[0].prompt.as_str()),
        ("build", "Fix the build"),
        "the last placeholder takes the rest"
    );
    let err = cluster
        .client()
        .await
        .expect("client")
        .run_command(pb::RunCommandRequest {
            command: "/nope".into(),
            ..Default::default()
        })
        .await
        .expect_err("unknown command");
    assert_eq!(err.code(), tonic::Code::NotFound);
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_markdown_agent_with_a_tool_denied_never_sees_it_and_a_broken_file_is_skipped() {
    let config = config_dir();
    let cluster = cluster(&config).await;
    let mut client = cluster.client().await.expect("client");
    let agents = client
        .list_agents(pb::ListAgentsRequest::default())
        .await
        .expect("agents")
        .into_inner()
        .agents;
    let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
    assert!(
        names.contains(&"auditor") && names.contains(&"explore"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"broken"),
        "an invalid file is refused: {names:?}"
    );
    assert!(
        !names.contains(&"compaction"),
        "hidden agents are listed only on request"
    );
    let all = client
        .list_agents(pb::ListAgentsRequest {
            include_hidden: true,
        })
        .await
        .expect("agents")
        .into_inner();
    assert!(all.agents.iter().any(|a| a.name == "compaction"));

    let id = cluster
        .submit("auditor", "audit the repo")
        .await
        .expect("submit");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed);
    let seen = cluster.model.requests();
    let audit = seen
        .iter()
        .find(|r| r.messages.iter().any(|m| m.content == "audit the repo"))
        .expect("auditor call");
    assert!(audit.tools.iter().any(|t| t == "read"), "{:?}", audit.tools);
    assert!(
        !audit.tools.iter().any(|t| t == "grep"),
        "grep must never be offered: {:?}",
        audit.tools
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn the_task_tool_lists_only_the_subagents_the_caller_may_start() {
    let config = config_dir();
    write(
        config.path(),
        "agents/lead.md",
        "---\ndescription: delegates work\nmode: primary\npermission:\n  task:\n    explore: deny\n---\nYou lead.\n",
    );
    let cluster = cluster(&config).await;
    let id = cluster
        .submit("lead", "plan the work")
        .await
        .expect("submit");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(
        task.status(),
        pb::TaskStatus::Completed,
        "{:?}",
        task.result
    );
    let seen = cluster.model.requests();
    let lead = seen
        .iter()
        .find(|r| r.messages.iter().any(|m| m.content == "plan the work"))
        .expect("the lead's model call");
    let task_tool = lead.raw["tools"]
        .as_array()
        .expect("tools offered")
        .iter()
        .find(|t| t["function"]["name"] == "task")
        .expect("the task tool is offered");
    let description = task_tool["function"]["description"]
        .as_str()
        .expect("a description");
    assert!(description.contains("- general:"), "{description}");
    assert!(
        !description.contains("- explore:"),
        "a denied agent is not listed: {description}"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn explore_typescript_files_renders_as_seed_000_says_under_the_sessions_current_agent() {
    let config = config_dir();
    write(
        config.path(),
        "commands/explore.md",
        "---\nagent: explore\ndescription: Explore codebase\n---\nFind all $1 in the codebase\n",
    );
    let cluster = cluster(&config).await;
    // A session whose current agent is `plan`.
    let mut client = cluster.client().await.expect("client");
    let first = client
        .submit(pb::SubmitRequest {
            agent: "plan".into(),
            prompt: "look around".into(),
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner();
    cluster
        .wait_finished(&first.task_id)
        .await
        .expect("finished");

    let r = client
        .run_command(pb::RunCommandRequest {
            command: "/explore".into(),
            arguments: "TypeScript files".into(),
            session_id: first.session_id.clone(),
            ..Default::default()
        })
        .await
        .expect("run command")
        .into_inner();
    let task = cluster.wait_finished(&r.task_id).await.expect("finished");
    assert_eq!(
        task.status(),
        pb::TaskStatus::Completed,
        "{:?}",
        task.result
    );
    assert_eq!(
        task.agent, "plan",
        "the subtask's parent is the session's current agent, not the default"
    );
    let kids = cluster.children(&task.task_id).await.expect("children");
    assert_eq!(kids.len(), 1);
    assert_eq!(kids[0].agent, "explore");
    assert_eq!(kids[0].prompt, "Find all TypeScript files in the codebase");

    // Without a session, the default agent is the parent.
    let task = run(&cluster, "/explore", "\"Rust files\" please").await;
    assert_eq!(task.agent, "build");
    let kids = cluster.children(&task.task_id).await.expect("children");
    assert_eq!(kids[0].prompt, "Find all Rust files please in the codebase");
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_template_commands_output_reaches_the_model_and_a_denied_command_never_runs() {
    let config = config_dir();
    write(
        config.path(),
        "agents/guarded.md",
        "---\ndescription: runs what it is allowed\nmode: primary\npermission:\n  bash:\n    \"*\": allow\n    \"touch*\": deny\n---\nYou report.\n",
    );
    write(
        config.path(),
        "commands/status.md",
        "---\nagent: guarded\n---\nNotes: !`cat notes.txt`\nMissing: !`cat missing.txt`\nMade: !`touch made.txt`\nAbout $1\n",
    );
    let cluster = cluster(&config).await;
    std::fs::write(
        cluster.workspace.path().join("notes.txt"),
        "the gamma notes\n",
    )
    .expect("write");
    let task = run(&cluster, "/status", "today").await;
    assert_eq!(
        task.status(),
        pb::TaskStatus::Completed,
        "{:?}",
        task.result
    );
    let prompt = cluster
        .model
        .requests()
        .first()
        .and_then(|r| r.first_user_message().map(str::to_owned))
        .expect("the model was asked");
    assert!(
        prompt.starts_with("Notes: the gamma notes\n(exit code 0)\n"),
        "the command's output replaced it: {prompt}"
    );
    assert!(
        prompt.contains("missing.txt: No such file or directory\n(exit code 1)"),
        "a failing command gives its stderr and status: {prompt}"
    );
    assert!(
        prompt.contains("Made: [!`touch made.txt` did not run: ") && prompt.contains("denied"),
        "a denied command is refused: {prompt}"
    );
    assert!(prompt.ends_with("About today"), "{prompt}");
    let result = task.result.expect("result");
    assert!(
        taskwire_e2e::created_in_patch(&result.patch, "made.txt").is_none(),
        "the denied command never ran: {}",
        result.patch
    );
    let commands: Vec<(&str, &str)> = result
        .provenance
        .iter()
        .map(|p| (p.source.as_str(), p.uri.as_str()))
        .collect();
    assert_eq!(
        commands,
        [("command", "cat notes.txt"), ("command", "cat missing.txt")],
        "the commands that ran are the result's provenance"
    );
    cluster.shutdown().await;
}

/// The built-in commands of seed 003 (§1.4.1): `/init` asks the session's agent to
/// write or update AGENTS.md; `/review` reviews the uncommitted changes in a subtask
/// (titled by its description). A command file of the same name replaces a built-in.
#[tokio::test]
async fn init_and_review_are_built_in_and_a_users_file_replaces_them() {
    let config = config_dir();
    let cluster = cluster(&config).await;
    let init = run(&cluster, "/init", "mention the benchmarks").await;
    assert_eq!(
        init.status(),
        pb::TaskStatus::Completed,
        "{:?}",
        init.result
    );
    assert_eq!(init.agent, "build", "run by the session's (default) agent");
    assert!(
        init.prompt
            .starts_with("Create or update AGENTS.md in the workspace root")
            && init.prompt.trim_end().ends_with("mention the benchmarks"),
        "{}",
        init.prompt
    );
    assert!(
        cluster
            .children(&init.task_id)
            .await
            .expect("children")
            .is_empty(),
        "/init is not a subtask"
    );

    let review = run(&cluster, "/review", "").await;
    assert_eq!(
        review.status(),
        pb::TaskStatus::Completed,
        "{:?}",
        review.result
    );
    let kids = cluster.children(&review.task_id).await.expect("children");
    assert_eq!(kids.len(), 1, "/review runs as a subtask");
    assert!(
        kids[0]
            .prompt
            .starts_with("Review the uncommitted changes in this workspace."),
        "{}",
        kids[0].prompt
    );
    assert_eq!(
        kids[0].title,
        "review the uncommitted changes (@build subagent)"
    );
    cluster.shutdown().await;

    let own = tempfile::tempdir().expect("config dir");
    write(
        own.path(),
        "commands/review.md",
        "---\ndescription: our review\nsubtask: false\n---\nReview against our checklist: $ARGUMENTS\n",
    );
    let cluster = self::cluster(&own).await;
    let review = run(&cluster, "/review", "security").await;
    assert_eq!(
        review.status(),
        pb::TaskStatus::Completed,
        "{:?}",
        review.result
    );
    assert_eq!(review.prompt, "Review against our checklist: security");
    assert!(
        cluster
            .children(&review.task_id)
            .await
            .expect("children")
            .is_empty(),
        "the user's /review is not a subtask"
    );
    cluster.shutdown().await;
}
