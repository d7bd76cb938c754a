//! Background children across the fleet: a parent starts two children with
//! `task` and `background: true`, works on (its own tool calls) while they run on two
//! other workers, and answers with both results; a background child's edit reaches
//! the parent's files when its result is delivered; cancelling a parent cancels the
//! background children it left running.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::json;
use taskwire_e2e::{Cluster, PATIENCE, final_result, start, wait_for};
use taskwire_protocol::pb;
use taskwire_test_support::files::git;
use taskwire_test_support::{Gate, ScriptedModel, ScriptedReply, SeenRequest};

/// How long each child's final answer takes: long enough that the parent's own
/// steps fall inside the children's runs.
const CHILD_ANSWER: Duration = Duration::from_millis(1500);
/// How long each of the parent's own model calls takes.
const PARENT_STEP: Duration = Duration::from_millis(200);
/// The parent's own grep steps between starting the children and answering.
const PARENT_GREPS: usize = 3;

fn first_user(req: &SeenRequest) -> String {
    req.first_user_message().unwrap_or_default().to_owned()
}

fn background(description: &str, prompt: &str) -> serde_json::Value {
    json!({"description": description, "prompt": prompt, "subagent_type": "explore", "background": true})
}

/// Everything the model was given so far, tool results and user messages alike.
fn seen_text(req: &SeenRequest) -> String {
    req.messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// When the parent's model was asked for each of its steps, by step (0-based).
type StepLog = Arc<Mutex<Vec<(usize, SystemTime)>>>;

/// Children grep once and answer slowly. The parent starts both in the background,
/// greps on its own, and answers with the children's results once it has both; an
/// answer without them (`still waiting`) makes the session wait for them.
fn script(log: StepLog) -> impl Fn(&SeenRequest) -> ScriptedReply + Send + Sync + 'static {
    move |req| {
        let user = first_user(req);
        if let Some(word) = user.strip_prefix("child: find ") {
            return match req.assistant_turns() {
                0 => ScriptedReply::tool_calls([("g1", "grep", json!({ "pattern": word }))]),
                _ => {
                    let hit = seen_text(req)
                        .lines()
                        .find(|l| l.contains(word) && l.contains(".txt"))
                        .unwrap_or("none")
                        .to_owned();
                    ScriptedReply::text(format!("child found {word}: {hit}"))
                        .with_delay(CHILD_ANSWER)
                }
            };
        }
        let turn = req.assistant_turns();
        log.lock()
            .expect("not poisoned")
            .push((turn, SystemTime::now()));
        let seen = seen_text(req);
        if seen.contains("child found alpha") && seen.contains("child found omega") {
            let results: Vec<&str> = req
                .messages
                .iter()
                .filter(|m| m.content.contains("child found"))
                .map(|m| m.content.as_str())
                .collect();
            return ScriptedReply::text(format!("children said:\n{}", results.join("\n---\n")));
        }
        match turn {
            0 => ScriptedReply::tool_calls([
                ("t1", "task", background("find alpha", "child: find alpha")),
                ("t2", "task", background("find omega", "child: find omega")),
            ]),
            n if n <= PARENT_GREPS => {
                ScriptedReply::tool_calls([(format!("g{n}"), "grep", json!({"pattern": "line"}))])
                    .with_delay(PARENT_STEP)
            }
            _ => ScriptedReply::text("still waiting for the children"),
        }
    }
}

async fn cluster(model: ScriptedModel) -> Cluster {
    let mut cluster = start(model, 0, 1).await.expect("cluster");
    // One session per worker: the parent holds one, each child needs another.
    for i in 0..3 {
        cluster.add_worker(&format!("w{i}"), 1);
    }
    let ws = cluster.workspace.path();
    std::fs::write(ws.join("a.txt"), "the alpha line\n").expect("write");
    std::fs::write(ws.join("z.txt"), "the omega line\n").expect("write");
    cluster
}

fn secs(t: &Option<prost_types::Timestamp>) -> f64 {
    t.as_ref()
        .map_or(0.0, |t| t.seconds as f64 + f64::from(t.nanos) / 1e9)
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs_f64()
}

#[tokio::test]
async fn a_parent_works_on_while_two_background_children_run_on_two_workers_and_answers_with_both()
{
    let log = StepLog::default();
    let cluster = cluster(ScriptedModel::start(script(log.clone())).await).await;
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
        text.contains("child found alpha: a.txt:1: the alpha line")
            && text.contains("child found omega: z.txt:1: the omega line"),
        "the answer uses both children's results: {text}"
    );
    assert!(text.contains("<task_metadata>"), "{text}");

    // The task calls returned at once: the parent's next step came long before the
    // children could have answered.
    let steps = log.lock().expect("not poisoned").clone();
    let at = |turn: usize| {
        steps
            .iter()
            .find(|(t, _)| *t == turn)
            .map(|(_, at)| unix(*at))
            .expect("the step was asked for")
    };
    assert!(
        at(1) - at(0) < CHILD_ANSWER.as_secs_f64(),
        "the parent went on at once: {steps:?}"
    );

    // Two children on two other workers, each running while the parent's own grep
    // steps were asked for.
    let children = cluster.children(&parent.task_id).await.expect("children");
    assert_eq!(children.len(), 2);
    let mut workers = Vec::new();
    for child in &children {
        let task = client
            .get(pb::GetRequest {
                task_id: child.task_id.clone(),
            })
            .await
            .expect("get")
            .into_inner();
        assert_eq!(task.status(), pb::TaskStatus::Completed);
        let attempt = &task.attempts[0];
        workers.push(attempt.worker_id.clone());
        let (started, finished) = (secs(&attempt.started_at), secs(&attempt.finished_at));
        let during: Vec<usize> = (1..=PARENT_GREPS)
            .filter(|turn| started < at(*turn) && at(*turn) < finished)
            .collect();
        eprintln!(
            "child {} ran {started:.3}..{finished:.3} ({:.0} ms); parent steps {:?} at {:?}; own steps during it: {during:?}",
            task.task_id,
            (finished - started) * 1000.0,
            steps.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
            steps
                .iter()
                .map(|(_, s)| format!("{:.3}", unix(*s)))
                .collect::<Vec<_>>(),
        );
        assert!(
            !during.is_empty(),
            "the parent took steps while child {} ran ({started}..{finished}): {steps:?}",
            task.task_id
        );
    }
    assert_ne!(workers[0], workers[1], "the children ran on two workers");
    let parent_task = client
        .get(pb::GetRequest {
            task_id: parent.task_id.clone(),
        })
        .await
        .expect("get")
        .into_inner();
    assert!(
        !workers.contains(&parent_task.attempts[0].worker_id),
        "and neither on the parent's"
    );
    cluster.shutdown().await;
}

/// The parent starts two background children that never answer, then waits for them
/// with `task_status`.
fn waiting_script(gate: Gate) -> impl Fn(&SeenRequest) -> ScriptedReply + Send + Sync + 'static {
    move |req| {
        if first_user(req).starts_with("child: ") {
            return ScriptedReply::text("never").with_gate(&gate);
        }
        match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([
                ("t1", "task", background("first", "child: one")),
                ("t2", "task", background("second", "child: two")),
            ]),
            1 => ScriptedReply::tool_calls([("s1", "task_status", json!({"wait": true}))]),
            _ => ScriptedReply::text("parent done"),
        }
    }
}

#[tokio::test]
async fn cancelling_a_parent_cancels_its_running_background_children() {
    let gate = Gate::new();
    let cluster = cluster(ScriptedModel::start(waiting_script(gate)).await).await;
    let mut client = cluster.client().await.expect("client");
    let parent = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: "start two and wait".into(),
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner()
        .task_id;

    // Both children run, and the parent waits for them in `task_status`.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let children = loop {
        let children = cluster.children(&parent).await.expect("children");
        let asked = cluster
            .model
            .requests()
            .iter()
            .filter(|r| first_user(r).starts_with("child: "))
            .count();
        let waiting = cluster
            .model
            .requests()
            .iter()
            .any(|r| first_user(r) == "start two and wait" && r.assistant_turns() == 1);
        if children.len() == 2
            && children
                .iter()
                .all(|c| c.status() == pb::TaskStatus::Running)
            && asked == 2
            && waiting
        {
            break children;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the children never ran: {children:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    client
        .cancel(pb::CancelRequest {
            task_id: parent.clone(),
            reason: "changed my mind".into(),
        })
        .await
        .expect("cancel");
    for child in &children {
        let task = wait_for(&cluster, &child.task_id, "cancelled and stopped", |t| {
            t.status() == pb::TaskStatus::Cancelled
                && t.attempts.first().is_some_and(|a| a.finished_at.is_some())
        })
        .await
        .expect("the background child was cancelled and its session stopped");
        assert_eq!(task.attempts.len(), 1, "the child never ran again");
    }
    let parent_task = cluster.wait_finished(&parent).await.expect("parent");
    assert_eq!(parent_task.status(), pb::TaskStatus::Cancelled);
    cluster.shutdown().await;
}

fn last_tool_output(req: &SeenRequest) -> String {
    req.messages
        .iter()
        .rev()
        .find(|m| m.role == "tool")
        .map(|m| m.content.clone())
        .unwrap_or_default()
}

/// The parent writes `notes.txt` and has a background child append to it; it reads
/// the file while the child runs, waits for it with `task_status`, and reads again.
/// The child's answer waits for `gate`.
fn edit_script(gate: Gate) -> impl Fn(&SeenRequest) -> ScriptedReply + Send + Sync + 'static {
    move |req| {
        if first_user(req).starts_with("child: ") {
            return match req.assistant_turns() {
                0 => ScriptedReply::tool_calls([(
                    "c1",
                    "edit",
                    json!({ "filePath": "notes.txt", "oldString": "from parent", "newString": "from parent\nfrom child" }),
                )]),
                _ => ScriptedReply::text("appended").with_gate(&gate),
            };
        }
        match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([(
                "p1",
                "write",
                json!({ "filePath": "notes.txt", "content": "from parent\n" }),
            )]),
            1 => ScriptedReply::tool_calls([(
                "p2",
                "task",
                json!({ "description": "append", "prompt": "child: append to notes.txt", "subagent_type": "general", "background": true }),
            )]),
            2 => ScriptedReply::tool_calls([("p3", "read", json!({ "filePath": "notes.txt" }))]),
            3 => ScriptedReply::tool_calls([("p4", "task_status", json!({ "wait": true }))]),
            4 => ScriptedReply::tool_calls([("p5", "read", json!({ "filePath": "notes.txt" }))]),
            _ => ScriptedReply::text(format!("parent read: {}", last_tool_output(req))),
        }
    }
}

#[tokio::test]
async fn a_background_childs_edit_reaches_the_parents_files_when_its_result_is_delivered() {
    let gate = Gate::new();
    let mut cluster = start(ScriptedModel::start(edit_script(gate.clone())).await, 0, 1)
        .await
        .expect("cluster");
    let base = cluster.workspace.path();
    git(base, &["init", "-q", "-b", "main"]);
    std::fs::write(base.join("a.txt"), "one\n").expect("write");
    git(base, &["add", "a.txt"]);
    git(base, &["commit", "-q", "-m", "start"]);
    cluster.add_worker("w0", 1);
    cluster.add_worker("w1", 1);

    let parent = cluster
        .submit("build", "write notes and have them extended")
        .await
        .expect("submit");
    // The parent read its file while the child ran (the child has edited its own copy).
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let read_while_running = loop {
        let requests = cluster.model.requests();
        let child_edited = requests
            .iter()
            .any(|r| first_user(r).starts_with("child: ") && r.assistant_turns() == 1);
        if let Some(r) = requests
            .iter()
            .find(|r| !first_user(r).starts_with("child: ") && r.assistant_turns() == 3)
            && child_edited
        {
            break last_tool_output(r);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the parent never read while the child ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        read_while_running.contains("from parent") && !read_while_running.contains("from child"),
        "{read_while_running}"
    );
    gate.open();

    let done = cluster.wait_finished(&parent).await.expect("finished");
    let result = done.result.as_ref().expect("result");
    assert_eq!(result.status(), pb::TaskStatus::Completed, "{result:?}");
    let text = &result.output.as_ref().expect("output").text;
    assert!(
        text.contains("from parent") && text.contains("from child"),
        "the parent's files hold the child's line once its result was delivered: {text}"
    );
    assert!(
        result.patch.contains("+from child"),
        "the root's patch holds the child's change: {}",
        result.patch
    );
    cluster.shutdown().await;
}
