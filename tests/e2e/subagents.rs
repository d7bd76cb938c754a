//! The `task` tool across the fleet: children run on other workers in parallel, their
//! tool calls reach the parent's progress, their output reaches the parent's model;
//! depth and scope limits hold.

use taskwire_e2e::{Cluster, final_result, progress_events, start};
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};
use tonic::Code;

fn first_user(req: &SeenRequest) -> String {
    req.first_user_message().unwrap_or_default().to_owned()
}

/// The parent delegates to two explore children in one turn, then reports what they
/// said; each child greps once and answers slowly enough that they overlap in time.
fn script(req: &SeenRequest) -> ScriptedReply {
    let user = first_user(req);
    if let Some(word) = user.strip_prefix("child: find ") {
        return match req.assistant_turns() {
            0 => {
                ScriptedReply::tool_calls([("g1", "grep", serde_json::json!({ "pattern": word }))])
            }
            _ => {
                let found = req
                    .messages
                    .iter()
                    .rev()
                    .find(|m| m.role == "tool")
                    .map(|m| m.content.clone());
                let hit = found
                    .unwrap_or_default()
                    .lines()
                    .find(|l| l.contains(word))
                    .unwrap_or("none")
                    .to_owned();
                ScriptedReply::text(format!("child found {word}: {hit}"))
                    .with_delay(std::time::Duration::from_millis(700))
            }
        };
    }
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([
            (
                "t1",
                "task",
                serde_json::json!({"description": "find alpha", "prompt": "child: find alpha", "subagent_type": "explore"}),
            ),
            (
                "t2",
                "task",
                serde_json::json!({"description": "find omega", "prompt": "child: find omega", "subagent_type": "explore"}),
            ),
        ]),
        _ => {
            let outputs: Vec<String> = req
                .messages
                .iter()
                .filter(|m| m.role == "tool")
                .map(|m| m.content.clone())
                .collect();
            ScriptedReply::text(format!("children said:\n{}", outputs.join("\n---\n")))
        }
    }
}

async fn cluster() -> Cluster {
    let mut cluster = start(ScriptedModel::start(script).await, 0, 1)
        .await
        .expect("cluster");
    // One session per worker: the parent holds one, each child needs another.
    for i in 0..3 {
        cluster.add_worker(&format!("w{i}"), 1);
    }
    let ws = cluster.workspace.path();
    std::fs::write(ws.join("a.txt"), "the alpha line\n").expect("write");
    std::fs::write(ws.join("z.txt"), "the omega line\n").expect("write");
    cluster
}

#[tokio::test]
async fn a_parent_starts_two_explore_children_that_run_in_parallel_on_two_workers() {
    let cluster = cluster().await;
    let mut client = cluster.client().await.expect("client");
    let parent = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: "investigate alpha and omega".into(),
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner();
    let events = cluster.watch(&parent.task_id).await.expect("watch");
    let result = final_result(&events).expect("result");
    assert_eq!(result.status(), pb::TaskStatus::Completed, "{result:?}");
    let text = &result.output.as_ref().expect("output").text;
    assert!(
        text.contains("child found alpha: a.txt:1: the alpha line"),
        "{text}"
    );
    assert!(
        text.contains("child found omega: z.txt:1: the omega line"),
        "{text}"
    );
    assert!(
        text.contains("<task_metadata>") && text.contains("session_id"),
        "{text}"
    );

    // The children are listed under the parent, in the same trace, on two workers,
    // and ran at the same time.
    let children = client
        .list(pb::ListRequest {
            parent_task_id: parent.task_id.clone(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .tasks;
    assert_eq!(children.len(), 2);
    let mut details = Vec::new();
    for c in &children {
        assert_eq!(c.trace_id, parent.trace_id);
        assert_eq!(c.agent, "explore");
        assert_eq!(c.depth, 1);
        details.push(
            client
                .get(pb::GetRequest {
                    task_id: c.task_id.clone(),
                })
                .await
                .expect("get")
                .into_inner(),
        );
    }
    let (a, b) = (&details[0].attempts[0], &details[1].attempts[0]);
    assert_ne!(
        a.worker_id, b.worker_id,
        "children ran on different workers"
    );
    let secs = |t: &Option<prost_types::Timestamp>| {
        t.as_ref()
            .map_or(0.0, |t| t.seconds as f64 + f64::from(t.nanos) / 1e9)
    };
    assert!(
        secs(&a.started_at) < secs(&b.finished_at) && secs(&b.started_at) < secs(&a.finished_at),
        "children overlapped in time: {a:?} {b:?}"
    );

    // The parent's progress carried the children's tool calls as they happened, and its
    // usage includes theirs.
    let child_calls = progress_events(&events)
        .into_iter()
        .filter(
            |p| matches!(&p.event, Some(pb::task_progress::Event::ToolCall(t)) if t.tool == "grep"),
        )
        .count();
    assert!(
        child_calls >= 2,
        "the parent's progress shows the children's grep calls"
    );
    let child_usage: u64 = details
        .iter()
        .map(|t| {
            t.result
                .as_ref()
                .and_then(|r| r.usage)
                .map_or(0, |u| u.input_tokens)
        })
        .sum();
    let own = result.usage.expect("usage").input_tokens;
    assert!(
        own >= child_usage + 20,
        "parent usage {own} includes the children's {child_usage}"
    );

    // Seed 001's child progress: `child_task` when each child is submitted, with its
    // session; each child call under its own id and task; the child's summary as the
    // `task` call's metadata.
    for child in &details {
        let child_session = child
            .result
            .as_ref()
            .map(|r| r.session_id.clone())
            .expect("a result");
        let events = progress_events(&events);
        let announced = events
            .iter()
            .position(|p| matches!(&p.event, Some(pb::task_progress::Event::ChildTask(c)) if c.task_id == child.task_id))
            .expect("the child is announced");
        let Some(pb::task_progress::Event::ChildTask(c)) = &events[announced].event else {
            unreachable!("found above");
        };
        assert_eq!(c.session_id, child_session);
        assert!(c.call_id == "t1" || c.call_id == "t2", "{c:?}");
        let calls: Vec<&pb::ToolCallEvent> = events
            .iter()
            .filter_map(|p| match &p.event {
                Some(pb::task_progress::Event::ToolCall(t)) if t.task_id == child.task_id => {
                    Some(t)
                }
                _ => None,
            })
            .collect();
        assert!(
            calls.iter().all(|t| t.call_id == "g1" && t.tool == "grep"),
            "the child's call keeps its own id: {calls:?}"
        );
        let first_call = events
            .iter()
            .position(|p| matches!(&p.event, Some(pb::task_progress::Event::ToolCall(t)) if t.task_id == child.task_id))
            .expect("a child call");
        assert!(announced < first_call, "announced when submitted");
        let summary = events
            .iter()
            .rev()
            .find_map(|p| match &p.event {
                Some(pb::task_progress::Event::ToolCall(t))
                    if t.call_id == c.call_id && t.task_id.is_empty() =>
                {
                    t.metadata
                        .as_ref()
                        .map(taskwire_protocol::value::struct_to_json)
                }
                _ => None,
            })
            .expect("the task call's metadata reached the watcher");
        assert_eq!(summary["session_id"], child_session.as_str());
        assert_eq!(summary["summary"][0]["id"], "g1");
        assert_eq!(summary["summary"][0]["status"], "completed");
    }
    cluster.shutdown().await;
}

#[tokio::test]
async fn the_depth_limit_scope_widening_and_agents_out_of_their_mode_are_refused() {
    let cluster = start(ScriptedModel::echo().await, 1, 2)
        .await
        .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let root = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: "root".into(),
            auth_scope: vec!["read".into(), "grep".into()],
            ..Default::default()
        })
        .await
        .expect("root")
        .into_inner();
    let child = client
        .submit(pb::SubmitRequest {
            agent: "explore".into(),
            prompt: "child".into(),
            parent_task_id: root.task_id.clone(),
            ..Default::default()
        })
        .await
        .expect("a child at depth 1 is allowed")
        .into_inner();
    let err = client
        .submit(pb::SubmitRequest {
            agent: "explore".into(),
            prompt: "grandchild".into(),
            parent_task_id: child.task_id.clone(),
            ..Default::default()
        })
        .await
        .expect_err("depth 2 is past the default limit");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("depth limit"), "{}", err.message());

    let err = client
        .submit(pb::SubmitRequest {
            agent: "explore".into(),
            prompt: "wider".into(),
            parent_task_id: root.task_id.clone(),
            auth_scope: vec!["bash".into()],
            ..Default::default()
        })
        .await
        .expect_err("a scope wider than the parent's");
    assert_eq!(err.code(), Code::PermissionDenied);
    assert!(err.message().contains("`bash`"), "{}", err.message());

    let err = client
        .submit(pb::SubmitRequest {
            agent: "build".into(),
            prompt: "primary as child".into(),
            parent_task_id: root.task_id.clone(),
            ..Default::default()
        })
        .await
        .expect_err("a primary agent is not a subagent");
    assert_eq!(err.code(), Code::InvalidArgument);
    // A client's `command` is a label: only RunCommand delegates to a primary agent,
    // and a client's `subtask` may not name one either.
    let err = client
        .submit(pb::SubmitRequest {
            agent: "build".into(),
            prompt: "primary as child".into(),
            parent_task_id: root.task_id.clone(),
            command: "/fix".into(),
            ..Default::default()
        })
        .await
        .expect_err("a command label does not make a primary agent a subagent");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("primary agent"), "{}", err.message());
    let err = client
        .submit(pb::SubmitRequest {
            agent: "explore".into(),
            prompt: "/fix".into(),
            subtask: Some(pb::Subtask {
                agent: "build".into(),
                prompt: "fix it".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect_err("a client's subtask to a primary agent");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("subtask.agent"), "{}", err.message());
    // The internal agents are the worker's own: never a task, root or child.
    for agent in ["compaction", "title"] {
        for parent_task_id in [String::new(), root.task_id.clone()] {
            let err = client
                .submit(pb::SubmitRequest {
                    agent: agent.into(),
                    prompt: "internal".into(),
                    parent_task_id,
                    command: "/x".into(),
                    ..Default::default()
                })
                .await
                .expect_err("an internal agent");
            assert_eq!(err.code(), Code::InvalidArgument, "{agent}");
            assert!(
                err.message().contains("internal agent"),
                "{}",
                err.message()
            );
        }
    }

    // The child inherited the parent's scope and trace.
    let got = client
        .get(pb::GetRequest {
            task_id: child.task_id,
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(got.trace_id, root.trace_id);
    assert_eq!(got.parent_task_id, root.task_id);
    cluster.shutdown().await;
}

/// `plan` runs as a subagent too (mode `all`, as Claude Code's Plan subagent): a
/// parent's `task` tool lists it and starts it, and it stays read-only there: the editing
/// tools are not offered and a write it tries anyway is refused, the base is
/// unchanged, and the parent gets its plan.
#[tokio::test]
async fn plan_runs_as_a_subagent_and_stays_read_only() {
    let model = ScriptedModel::start(|req: &SeenRequest| {
        let user = first_user(req);
        let last_tool = req
            .messages
            .iter()
            .rev()
            .find(|m| m.role == "tool")
            .map(|m| m.content.clone())
            .unwrap_or_default();
        if user == "child: plan it" {
            return match req.assistant_turns() {
                0 => ScriptedReply::tool_calls([(
                    "w1",
                    "write",
                    serde_json::json!({"filePath": "plan.txt", "content": "step 1\n"}),
                )]),
                _ => ScriptedReply::text(format!("the plan: step 1 (the write said: {last_tool})")),
            };
        }
        match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([(
                "t1",
                "task",
                serde_json::json!({"description": "plan it", "prompt": "child: plan it", "subagent_type": "plan"}),
            )]),
            _ => ScriptedReply::text(format!("parent got: {last_tool}")),
        }
    })
    .await;
    let cluster = start(model, 1, 2).await.expect("cluster");
    let root = cluster
        .submit("build", "make a plan with a helper")
        .await
        .expect("submit");
    let done = cluster.wait_finished(&root).await.expect("finished");
    assert_eq!(done.status(), pb::TaskStatus::Completed, "{done:?}");

    let first = cluster
        .model
        .requests()
        .into_iter()
        .find(|r| first_user(r) == "make a plan with a helper")
        .expect("the parent's first request");
    let task_tool = first.raw["tools"]
        .as_array()
        .expect("tools offered")
        .iter()
        .find(|t| t["function"]["name"] == "task")
        .expect("build has the task tool");
    let description = task_tool["function"]["description"]
        .as_str()
        .expect("a description");
    assert!(description.contains("- plan:"), "{description}");

    let children = cluster.children(&root).await.expect("children");
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].agent, "plan");
    assert_eq!(children[0].title, "plan it (@plan subagent)");
    assert!(
        !cluster.workspace.path().join("plan.txt").exists(),
        "a plan child writes nothing"
    );
    let text = &done
        .result
        .as_ref()
        .expect("a result")
        .output
        .as_ref()
        .expect("an output")
        .text;
    assert!(text.contains("the plan: step 1"), "{text}");
    assert!(
        text.contains("tool write is not available to agent plan"),
        "{text}"
    );
    // Its rules took the editing tools away from the start.
    let child_first = cluster
        .model
        .requests()
        .into_iter()
        .find(|r| first_user(r) == "child: plan it")
        .expect("the child's first request");
    for tool in ["write", "edit"] {
        assert!(
            !child_first.tools.iter().any(|t| t == tool),
            "{tool} offered to plan: {:?}",
            child_first.tools
        );
    }
    cluster.shutdown().await;
}

/// A subagent whose file enables the todo tools gets them as a child (its `tools` are
/// merged last, seed 001), even at the tree's depth limit, which takes `task` alone.
#[tokio::test]
async fn a_subagent_whose_file_enables_the_todo_tools_keeps_them_at_the_depth_limit() {
    let config = tempfile::tempdir().expect("temp dir");
    let agents = config.path().join("agents");
    std::fs::create_dir_all(&agents).expect("mkdir");
    std::fs::write(
        agents.join("tracker.md"),
        "---\ndescription: keeps a todo list\nmode: subagent\n\
         tools: { todowrite: true, todoread: true, task: true }\n---\nYou track work.\n",
    )
    .expect("write agent");
    let model = ScriptedModel::start(|req: &SeenRequest| {
        let last_tool = req
            .messages
            .iter()
            .rev()
            .find(|m| m.role == "tool")
            .map(|m| m.content.clone())
            .unwrap_or_default();
        if first_user(req) == "child: track it" {
            return match req.assistant_turns() {
                0 => ScriptedReply::tool_calls([(
                    "todo1",
                    "todowrite",
                    serde_json::json!({"todos": [
                        {"id": "1", "content": "read the code", "status": "in_progress", "priority": "high"}
                    ]}),
                )]),
                1 => ScriptedReply::tool_calls([("todo2", "todoread", serde_json::json!({}))]),
                _ => ScriptedReply::text(format!("tracked: {last_tool}")),
            };
        }
        match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([(
                "t1",
                "task",
                serde_json::json!({"description": "track", "prompt": "child: track it", "subagent_type": "tracker"}),
            )]),
            _ => ScriptedReply::text(format!("parent got: {last_tool}")),
        }
    })
    .await;
    let dir = config.path().to_owned();
    let mut cluster = taskwire_e2e::start_with(model, 0, 1, move |c| c.config_dir = Some(dir))
        .await
        .expect("cluster");
    cluster.add_worker("w", 2);
    let root = cluster
        .submit("build", "track the work with a helper")
        .await
        .expect("submit");
    let done = cluster.wait_finished(&root).await.expect("finished");
    assert_eq!(done.status(), pb::TaskStatus::Completed, "{done:?}");

    let child_first = cluster
        .model
        .requests()
        .into_iter()
        .find(|r| first_user(r) == "child: track it")
        .expect("the child's first request");
    let offered = &child_first.tools;
    assert!(
        offered.iter().any(|t| t == "todowrite") && offered.iter().any(|t| t == "todoread"),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|t| t == "task"),
        "depth 1 is the default limit: no grandchildren ({offered:?})"
    );
    let text = &done
        .result
        .as_ref()
        .expect("a result")
        .output
        .as_ref()
        .expect("an output")
        .text;
    assert!(
        text.contains("tracked:") && text.contains("read the code"),
        "{text}"
    );
    cluster.shutdown().await;
}

/// `task` takes a `model`: a child runs on it when it costs no more than the parent's
/// (by the worker's model catalogue), and a costlier one is a tool error naming both
/// prices, with no child started.
#[tokio::test]
async fn a_task_calls_model_runs_the_child_on_it_only_when_no_costlier_than_the_parents() {
    let model = ScriptedModel::start(|req: &SeenRequest| {
        if first_user(req).starts_with("child:") {
            return ScriptedReply::text(format!("child ran on {}", req.model));
        }
        let outputs: Vec<String> = req
            .messages
            .iter()
            .filter(|m| m.role == "tool")
            .map(|m| m.content.clone())
            .collect();
        match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([
                (
                    "cheap",
                    "task",
                    serde_json::json!({"description": "cheap look", "prompt": "child: look", "subagent_type": "explore", "model": "cheap"}),
                ),
                (
                    "dear",
                    "task",
                    serde_json::json!({"description": "dear look", "prompt": "child: look hard", "subagent_type": "explore", "model": "dear"}),
                ),
            ]),
            _ => ScriptedReply::text(outputs.join("\n---\n")),
        }
    })
    .await;
    let mut cluster = start(model, 0, 1).await.expect("cluster");
    cluster.add_worker_with("priced", 3, |config| {
        config.models = serde_json::from_value(serde_json::json!({
            "scripted": {"context_window": 128_000, "input_usd_per_mtok": 2.0, "output_usd_per_mtok": 8.0},
            "cheap": {"context_window": 128_000, "input_usd_per_mtok": 0.1, "output_usd_per_mtok": 0.4},
            "dear": {"context_window": 128_000, "input_usd_per_mtok": 10.0, "output_usd_per_mtok": 30.0},
        }))
        .expect("a valid catalogue");
    });
    let root = cluster
        .submit("build", "look with a cheap helper")
        .await
        .expect("submit");
    let done = cluster.wait_finished(&root).await.expect("finished");
    assert_eq!(done.status(), pb::TaskStatus::Completed, "{done:?}");
    let text = &done
        .result
        .as_ref()
        .expect("a result")
        .output
        .as_ref()
        .expect("an output")
        .text;
    assert!(text.contains("child ran on cheap"), "{text}");
    assert!(
        text.contains("model `dear` costs more than yours (`scripted`)"),
        "{text}"
    );
    let children = cluster.children(&root).await.expect("children");
    assert_eq!(children.len(), 1, "no child for the refused call");
    assert_eq!(children[0].title, "cheap look (@explore subagent)");
    assert!(
        cluster.model.requests().iter().all(|r| r.model != "dear"),
        "nothing ran on the costlier model"
    );
    cluster.shutdown().await;
}

/// The built-in `explore` declares the small tier: on a worker with a small model its
/// sessions run on it, while the parent keeps its own; a `task` call's `model` still
/// decides when it names one.
#[tokio::test]
async fn explore_runs_on_the_workers_small_model_unless_the_task_call_names_one() {
    let model = ScriptedModel::start(|req: &SeenRequest| {
        if first_user(req).starts_with("child:") {
            return ScriptedReply::text(format!("child ran on {}", req.model));
        }
        match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([
                (
                    "tiered",
                    "task",
                    serde_json::json!({"description": "look", "prompt": "child: look", "subagent_type": "explore"}),
                ),
                (
                    "named",
                    "task",
                    serde_json::json!({"description": "look again", "prompt": "child: look again", "subagent_type": "explore", "model": "scripted"}),
                ),
            ]),
            _ => ScriptedReply::text("done"),
        }
    })
    .await;
    let mut cluster = start(model, 0, 1).await.expect("cluster");
    cluster.add_worker_with("w", 3, |config| {
        config.small_model = Some("small".into());
        config.models = serde_json::from_value(serde_json::json!({
            "scripted": {"context_window": 128_000, "input_usd_per_mtok": 2.0, "output_usd_per_mtok": 8.0},
            "small": {"context_window": 128_000, "input_usd_per_mtok": 0.1, "output_usd_per_mtok": 0.4},
        }))
        .expect("a valid catalogue");
    });
    let root = cluster
        .submit("build", "look around cheaply")
        .await
        .expect("submit");
    let done = cluster.wait_finished(&root).await.expect("finished");
    assert_eq!(done.status(), pb::TaskStatus::Completed, "{done:?}");
    let models: Vec<(String, String)> = cluster
        .model
        .requests()
        .iter()
        .map(|r| (first_user(r), r.model.clone()))
        .collect();
    assert!(
        models.contains(&("child: look".to_owned(), "small".to_owned())),
        "{models:?}"
    );
    assert!(
        models.contains(&("child: look again".to_owned(), "scripted".to_owned())),
        "{models:?}"
    );
    assert!(
        models
            .iter()
            .filter(|(user, _)| user == "look around cheaply")
            .all(|(_, model)| model == "scripted"),
        "the parent keeps its model: {models:?}"
    );
    cluster.shutdown().await;
}
