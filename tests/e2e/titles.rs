//! Session titles: the hidden `title` agent names a new root session from its first
//! message, the title is stored with the result and shown by `taskwire get` and
//! `taskwire ls`; a child task is titled `DESCRIPTION (@AGENT subagent)` at its submit.

use serde_json::json;
use taskwire_e2e::process::Taskwire;
use taskwire_e2e::start;
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

const TITLE: &str = "Fix the flaky retry test";

fn is_title(req: &SeenRequest) -> bool {
    req.messages.first().is_some_and(|m| {
        m.role == "system" && m.content == taskwire_definitions::builtin::title().prompt
    })
}

#[tokio::test]
async fn a_root_task_gets_a_title_and_its_child_the_task_calls_description_shown_by_get_and_ls() {
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let model = ScriptedModel::start(|req: &SeenRequest| {
        if is_title(req) {
            return ScriptedReply::text(format!("\"{TITLE}\"\n"));
        }
        let prompt = req.first_user_message().unwrap_or_default();
        let answered = req.messages.iter().any(|m| m.role == "tool");
        if prompt.contains("look around") {
            ScriptedReply::text("looked")
        } else if answered {
            ScriptedReply::text("done")
        } else {
            ScriptedReply::tool_calls([(
                "call-1",
                "task",
                json!({"description": "look", "prompt": "look around", "subagent_type": "general"}),
            )])
        }
    })
    .await;
    let mut cluster = start(model, 0, 2).await.expect("cluster");
    cluster.add_worker_with("w", 2, |c| c.titles = true);

    let root = cluster
        .submit(
            "build",
            "the retry test fails one run in ten; delegate a look",
        )
        .await
        .expect("submit");
    let task = cluster.wait_finished(&root).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    assert_eq!(task.title, TITLE);
    let children = cluster.children(&root).await.expect("children");
    assert_eq!(children.len(), 1);
    let child = cluster
        .wait_finished(&children[0].task_id)
        .await
        .expect("child finished");
    // Seed 001, step 2: the child is titled from the `task` call, with no title call.
    assert_eq!(child.title, "look (@general subagent)");

    let title_requests: Vec<_> = cluster
        .model
        .requests()
        .into_iter()
        .filter(is_title)
        .collect();
    assert_eq!(title_requests.len(), 1, "one title call, for the root only");
    assert!(title_requests[0].tools.is_empty());
    assert!(
        title_requests[0]
            .last_user_message()
            .is_some_and(|m| m.contains("the retry test fails one run in ten")),
        "written from the first message"
    );

    let url = cluster.url();
    let get = taskwire
        .run("get", &["get", "--addr", &url, &root], &[])
        .await
        .expect("taskwire get");
    assert!(
        get.stdout().contains(&format!("title     {TITLE}\n")),
        "{}{}",
        get.stdout(),
        get.stderr()
    );
    let get_child = taskwire
        .run("get-child", &["get", "--addr", &url, &child.task_id], &[])
        .await
        .expect("taskwire get child");
    assert!(
        get_child
            .stdout()
            .contains("title     look (@general subagent)\n"),
        "{}",
        get_child.stdout()
    );
    let json = taskwire
        .run(
            "get-json",
            &["get", "--addr", &url, "--output", "json", &root],
            &[],
        )
        .await
        .expect("taskwire get json");
    let value: serde_json::Value = serde_json::from_str(&json.stdout()).expect("json");
    assert_eq!(value["title"], TITLE);

    let ls = taskwire
        .run("ls", &["ls", "--addr", &url], &[])
        .await
        .expect("taskwire ls");
    let listing = ls.stdout();
    assert!(
        listing.lines().next().is_some_and(|h| h.ends_with("TITLE")),
        "{listing}"
    );
    let root_line = listing
        .lines()
        .find(|l| l.starts_with(&root))
        .unwrap_or_else(|| panic!("root listed: {listing}"));
    assert!(root_line.ends_with(TITLE), "{listing}");
    let child_line = listing
        .lines()
        .find(|l| l.starts_with(&child.task_id))
        .unwrap_or_else(|| panic!("child listed: {listing}"));
    assert!(
        child_line.ends_with(" look (@general subagent)"),
        "{listing}"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_failing_title_call_leaves_the_task_untitled_and_completed() {
    let model = ScriptedModel::start(|req: &SeenRequest| {
        if is_title(req) {
            ScriptedReply::status(400, "no titles today")
        } else {
            ScriptedReply::text("answered")
        }
    })
    .await;
    let mut cluster = start(model, 0, 1).await.expect("cluster");
    cluster.add_worker_with("w", 1, |c| c.titles = true);
    let id = cluster.submit("general", "hello").await.expect("submit");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    assert_eq!(task.title, "");
    assert_eq!(
        task.result.expect("result").output.expect("output").text,
        "answered"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_worker_with_a_small_model_writes_titles_with_it() {
    let model = ScriptedModel::start(|req: &SeenRequest| {
        if is_title(req) {
            ScriptedReply::text(format!("\"{TITLE}\"\n"))
        } else {
            ScriptedReply::text("done")
        }
    })
    .await;
    let mut cluster = start(model, 0, 2).await.expect("cluster");
    cluster.add_worker_with("w", 2, |c| {
        c.titles = true;
        c.small_model = Some("small".into());
    });
    let root = cluster
        .submit("build", "fix the retry test")
        .await
        .expect("submit");
    let task = cluster.wait_finished(&root).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    assert_eq!(task.title, TITLE);
    let models: Vec<(bool, String)> = cluster
        .model
        .requests()
        .iter()
        .map(|r| (is_title(r), r.model.clone()))
        .collect();
    assert!(
        models.contains(&(true, "small".to_owned())),
        "the title went to the small model: {models:?}"
    );
    assert!(
        models
            .iter()
            .all(|(title, model)| *title || model == "scripted"),
        "the session kept its own model: {models:?}"
    );
}

#[tokio::test]
async fn an_agents_small_model_writes_its_titles_and_its_reasoning_effort_is_sent() {
    let config = tempfile::tempdir().expect("temp dir");
    let agents = config.path().join("agents");
    std::fs::create_dir_all(&agents).expect("agents dir");
    std::fs::write(
        agents.join("thinker.md"),
        "---\ndescription: thinks hard\nmode: primary\nsmall_model: tiny\nreasoning_effort: high\n---\nThink.\n",
    )
    .expect("agent file");
    let model = ScriptedModel::start(|req: &SeenRequest| {
        if is_title(req) {
            ScriptedReply::text(format!("\"{TITLE}\"\n"))
        } else {
            ScriptedReply::text("done")
        }
    })
    .await;
    let dir = config.path().to_owned();
    let mut cluster = taskwire_e2e::start_with(model, 0, 2, move |c| c.config_dir = Some(dir))
        .await
        .expect("cluster");
    cluster.add_worker_with("w", 2, |c| {
        c.titles = true;
        c.small_model = Some("small".into());
    });
    let root = cluster.submit("thinker", "think").await.expect("submit");
    let task = cluster.wait_finished(&root).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    assert_eq!(task.title, TITLE);
    let requests = cluster.model.requests();
    let title = requests.iter().find(|r| is_title(r)).expect("a title call");
    assert_eq!(
        title.model, "tiny",
        "the agent's small model wins over the worker's"
    );
    let session = requests
        .iter()
        .find(|r| !is_title(r))
        .expect("a session call");
    assert_eq!(session.model, "scripted");
    assert_eq!(session.raw["reasoning_effort"], "high");
    assert!(
        title.raw.get("reasoning_effort").is_none(),
        "side calls send none"
    );
}

/// The hidden `title` agent comes from the registry: a definitions directory's
/// `agents/title.md` overrides its prompt and model for every worker, and
/// `disable: true` turns titles off.
#[tokio::test]
async fn a_definitions_directorys_title_agent_overrides_the_built_in_or_disables_it() {
    const OWN_PROMPT: &str = "You name sessions in three words, in French.";
    let config = tempfile::tempdir().expect("config dir");
    let agents = config.path().join("agents");
    std::fs::create_dir_all(&agents).expect("mkdir");
    std::fs::write(
        agents.join("title.md"),
        format!("---\nmodel: titler\n---\n{OWN_PROMPT}\n"),
    )
    .expect("write agent");
    let model = ScriptedModel::start(|req: &SeenRequest| {
        let titled = req
            .messages
            .first()
            .is_some_and(|m| m.role == "system" && m.content.starts_with(OWN_PROMPT));
        if titled {
            ScriptedReply::text("Réparer le test")
        } else {
            ScriptedReply::text("done")
        }
    })
    .await;
    let dir = config.path().to_owned();
    let mut cluster = taskwire_e2e::start_with(model, 0, 1, move |c| c.config_dir = Some(dir))
        .await
        .expect("cluster");
    cluster.add_worker_with("w", 1, |c| c.titles = true);
    let id = cluster
        .submit("general", "fix the flaky test")
        .await
        .expect("submit");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    assert_eq!(task.title, "Réparer le test");
    let title_calls: Vec<SeenRequest> = cluster
        .model
        .requests()
        .into_iter()
        .filter(|r| {
            r.messages
                .first()
                .is_some_and(|m| m.content.starts_with(OWN_PROMPT))
        })
        .collect();
    assert_eq!(title_calls.len(), 1);
    assert_eq!(title_calls[0].model, "titler", "the override's model");
    assert!(
        !cluster.model.requests().iter().any(is_title),
        "the built-in title prompt is not used"
    );
    cluster.shutdown().await;

    std::fs::write(agents.join("title.md"), "---\ndisable: true\n---\n").expect("write agent");
    let model = ScriptedModel::start(|_: &SeenRequest| ScriptedReply::text("done")).await;
    let dir = config.path().to_owned();
    let mut cluster = taskwire_e2e::start_with(model, 0, 1, move |c| c.config_dir = Some(dir))
        .await
        .expect("cluster");
    cluster.add_worker_with("w", 1, |c| c.titles = true);
    let id = cluster
        .submit("general", "fix the flaky test")
        .await
        .expect("submit");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    assert_eq!(task.title, "", "no title agent, no title");
    assert_eq!(cluster.model.requests().len(), 1, "only the session's call");
    cluster.shutdown().await;
}
