//! Hidden subagents: not listed in the `task` tool's description, but callable by name;
//! the coordinator's registry decides which names exist, and the caller's permission
//! rules still apply.

use serde_json::json;
use taskwire_e2e::{Cluster, start_with};
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

fn write(dir: &std::path::Path, file: &str, text: &str) {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn first_user(req: &SeenRequest) -> &str {
    req.first_user_message().unwrap_or_default()
}

/// A root prompt `call NAME` makes one `task` call to NAME, then reports its result;
/// `call NAME /CMD` also fills in the call's `command` argument; a child answers at
/// once.
fn script(req: &SeenRequest) -> ScriptedReply {
    let user = first_user(req);
    let Some(call) = user.strip_prefix("call ") else {
        return ScriptedReply::text(format!("{user}: done"));
    };
    let (agent, command) = call.split_once(' ').unwrap_or((call, ""));
    let mut args = json!({"description": "delegate", "prompt": format!("{agent} work"), "subagent_type": agent});
    if !command.is_empty() {
        args["command"] = json!(command);
    }
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([("t1", "task", args)]),
        _ => {
            let result = req
                .messages
                .iter()
                .find(|m| m.role == "tool")
                .map_or("", |m| m.content.as_str());
            ScriptedReply::text(format!("task said: {result}"))
        }
    }
}

/// A cluster whose config directory defines `scout`, a hidden subagent, and `lead`, a
/// primary agent whose rules deny starting the scout.
async fn cluster() -> (Cluster, tempfile::TempDir) {
    let config = tempfile::tempdir().expect("config dir");
    write(
        config.path(),
        "agents/scout.md",
        "---\ndescription: scouts secret places\nmode: subagent\nhidden: true\n---\nYou scout.\n",
    );
    write(
        config.path(),
        "agents/lead.md",
        "---\ndescription: leads without the scout\nmode: primary\npermission:\n  task:\n    scout: deny\n---\nYou lead.\n",
    );
    let dir = config.path().to_owned();
    let cluster = start_with(ScriptedModel::start(script).await, 1, 2, move |c| {
        c.config_dir = Some(dir)
    })
    .await
    .expect("cluster");
    (cluster, config)
}

/// The description of the `task` tool offered in `req` (OpenAI or Anthropic shape).
fn task_description(req: &SeenRequest) -> String {
    req.raw["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|tool| tool.get("function").unwrap_or(tool))
        .find(|tool| tool["name"] == "task")
        .and_then(|tool| tool["description"].as_str())
        .map(str::to_owned)
        .expect("the task tool is offered")
}

/// Runs `prompt` on `agent` to its end; returns the task and the text of its result.
async fn run(cluster: &Cluster, agent: &str, prompt: &str) -> (pb::Task, String) {
    let id = cluster.submit(agent, prompt).await.expect("submit");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    let text = task
        .result
        .as_ref()
        .and_then(|r| r.output.as_ref())
        .map(|o| o.text.clone())
        .unwrap_or_default();
    (task, text)
}

#[tokio::test]
async fn a_hidden_markdown_subagent_is_not_listed_but_runs_when_named() {
    let (cluster, _config) = cluster().await;
    let (task, text) = run(&cluster, "build", "call scout").await;

    assert!(
        text.starts_with("task said: scout work: done\n\n<task_metadata>"),
        "{text}"
    );
    let kids = cluster.children(&task.task_id).await.expect("children");
    assert_eq!(kids.len(), 1);
    assert_eq!(kids[0].agent, "scout");
    assert_eq!(kids[0].status(), pb::TaskStatus::Completed);

    let requests = cluster.model.requests();
    let root = requests
        .iter()
        .find(|r| first_user(r) == "call scout")
        .expect("the root asked the model");
    let description = task_description(root);
    assert!(description.contains("- explore: "), "{description}");
    assert!(!description.contains("scout"), "hidden: {description}");

    let mut client = cluster.client().await.expect("client");
    for (include_hidden, expected) in [(false, false), (true, true)] {
        let agents = client
            .list_agents(pb::ListAgentsRequest { include_hidden })
            .await
            .expect("agents")
            .into_inner()
            .agents;
        let scout = agents.iter().any(|a| a.name == "scout");
        assert_eq!(
            scout, expected,
            "scout listed with include_hidden {include_hidden}"
        );
    }
    cluster.shutdown().await;
}

#[tokio::test]
async fn an_unknown_subagent_is_a_tool_error_that_names_it() {
    let (cluster, _config) = cluster().await;
    let (task, text) = run(&cluster, "build", "call nobody").await;

    assert!(
        text.starts_with(
            "task said: error: subagent nobody failed: the child task was refused: \
             NOT_FOUND: agent `nobody` not found; the listed subagents are: "
        ),
        "{text}"
    );
    assert!(
        text.contains("explore") && !text.contains("scout"),
        "{text}"
    );
    assert!(
        cluster
            .children(&task.task_id)
            .await
            .expect("children")
            .is_empty()
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_hidden_subagent_the_callers_rules_deny_is_refused() {
    let (cluster, _config) = cluster().await;
    let (task, text) = run(&cluster, "lead", "call scout").await;

    assert_eq!(
        text,
        "task said: error: permission denied: task on scout is denied by rule \"task scout deny\""
    );
    assert!(
        cluster
            .children(&task.task_id)
            .await
            .expect("children")
            .is_empty()
    );
    let requests = cluster.model.requests();
    assert!(
        !requests.iter().any(|r| first_user(r) == "scout work"),
        "the scout never ran"
    );
    cluster.shutdown().await;
}

/// The `task` tool's `command` argument is what a model fills in: a label, never a way
/// to start a primary agent (`build`) or an internal one (`compaction`) as a child.
#[tokio::test]
async fn a_task_call_with_a_command_cannot_start_a_primary_or_internal_agent() {
    let (cluster, _config) = cluster().await;
    for (agent, why) in [
        (
            "build",
            "INVALID_ARGUMENT: invalid agent: `build` is a primary agent and cannot run as a subagent",
        ),
        (
            "compaction",
            "INVALID_ARGUMENT: invalid agent: `compaction` is an internal agent: workers run it themselves, never as a task",
        ),
    ] {
        let (task, text) = run(&cluster, "build", &format!("call {agent} /review")).await;
        assert_eq!(
            text,
            format!(
                "task said: error: subagent {agent} failed: the child task was refused: {why}; \
                 the listed subagents are: explore, general, plan"
            )
        );
        assert!(
            cluster
                .children(&task.task_id)
                .await
                .expect("children")
                .is_empty(),
            "{agent} never started"
        );
    }
    let requests = cluster.model.requests();
    assert!(
        !requests
            .iter()
            .any(|r| matches!(first_user(r), "build work" | "compaction work")),
        "neither ran"
    );
    // The same call to a subagent, with the same label, runs it.
    let (task, text) = run(&cluster, "build", "call explore /review").await;
    assert!(text.starts_with("task said: explore work: done"), "{text}");
    let kids = cluster.children(&task.task_id).await.expect("children");
    assert_eq!(kids.len(), 1);
    cluster.shutdown().await;
}
