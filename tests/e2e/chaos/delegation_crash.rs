//! A parent's worker killed with SIGKILL while the parent waits for its children: the
//! redelivered parent resumes from the checkpoint its first attempt saved before the
//! children started, asks for the same children again (same call ids, so the
//! idempotent child submit returns them) and finishes once. No child is started twice,
//! whether the children were still running at the crash or had already finished.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use taskwire_e2e::process::{Process, Taskwire, WorkerOptions};
use taskwire_e2e::{Cluster, start_with, wait_for};
use taskwire_protocol::pb;
use taskwire_test_support::{Gate, ScriptedModel, ScriptedReply, SeenRequest};

use super::eventually;

/// Short, so the redelivery comes quickly; workers beat every quarter of it.
const ACK_WAIT: Duration = Duration::from_secs(3);
const PARENT_PROMPT: &str = "investigate alpha and omega";
const CHILD_PROMPTS: [&str; 2] = ["child: find alpha", "child: find omega"];

fn first_user(req: &SeenRequest) -> &str {
    req.first_user_message().unwrap_or_default()
}

/// The parent calls `task` twice in one turn, then reports what the children said.
/// Children answer `report on <prompt>` once `children` opens; the parent's second
/// turn waits for `second_turn` to say how long.
fn script(
    children: Gate,
    second_turn: impl Fn() -> Duration + Send + Sync + 'static,
) -> impl Fn(&SeenRequest) -> ScriptedReply + Send + Sync + 'static {
    move |req| {
        let user = first_user(req);
        if CHILD_PROMPTS.contains(&user) {
            return ScriptedReply::text(format!("report on {user}")).with_gate(&children);
        }
        if req.assistant_turns() == 0 {
            let call = |description: &str, prompt: &str| json!({"description": description, "prompt": prompt, "subagent_type": "explore"});
            return ScriptedReply::tool_calls([
                ("call_alpha", "task", call("find alpha", CHILD_PROMPTS[0])),
                ("call_omega", "task", call("find omega", CHILD_PROMPTS[1])),
            ]);
        }
        let outputs: Vec<&str> = req
            .messages
            .iter()
            .filter(|m| m.role == "tool")
            .map(|m| m.content.as_str())
            .collect();
        ScriptedReply::text(format!("children said:\n{}", outputs.join("\n---\n")))
            .with_delay(second_turn())
    }
}

/// The background twin of [`script`]: the parent starts both children with
/// `background: true`, waits for them with `task_status`, then reports what they said.
fn background_script(children: Gate) -> impl Fn(&SeenRequest) -> ScriptedReply + Send + Sync {
    move |req| {
        let user = first_user(req);
        if CHILD_PROMPTS.contains(&user) {
            return ScriptedReply::text(format!("report on {user}")).with_gate(&children);
        }
        let call = |description: &str, prompt: &str| json!({"description": description, "prompt": prompt, "subagent_type": "explore", "background": true});
        match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([
                ("call_alpha", "task", call("find alpha", CHILD_PROMPTS[0])),
                ("call_omega", "task", call("find omega", CHILD_PROMPTS[1])),
            ]),
            1 => ScriptedReply::tool_calls([("call_wait", "task_status", json!({"wait": true}))]),
            _ => {
                let outputs: Vec<&str> = req
                    .messages
                    .iter()
                    .filter(|m| m.role == "tool")
                    .map(|m| m.content.as_str())
                    .collect();
                ScriptedReply::text(format!("children said:\n{}", outputs.join("\n---\n")))
            }
        }
    }
}

/// Model requests per conversation, keyed by its first user message.
fn requests_by_prompt(model: &ScriptedModel) -> HashMap<String, usize> {
    let mut seen = HashMap::new();
    for req in model.requests() {
        *seen.entry(first_user(&req).to_owned()).or_default() += 1;
    }
    seen
}

struct Fleet {
    taskwire: Taskwire,
    cluster: Cluster,
}

impl Fleet {
    async fn start(model: ScriptedModel) -> Self {
        let taskwire = Taskwire::locate().expect("taskwire binary");
        // No deadlines here; with the sweeper idle, only the write that ends a task
        // can end its subtree.
        let cluster = start_with(model, 0, 1, |c| {
            c.ack_wait = ACK_WAIT;
            c.sweep_interval = Duration::from_secs(3600);
        })
        .await
        .expect("cluster");
        Self { taskwire, cluster }
    }

    /// A worker process of `concurrency` sessions, once it pulls tasks.
    async fn worker(&self, name: &str, concurrency: usize) -> Process {
        let (nats, model) = (self.cluster.nats.url(), self.cluster.model.base_url());
        let options = WorkerOptions {
            ack_wait: Some(ACK_WAIT),
            concurrency,
            ..WorkerOptions::new(&nats, &model, self.cluster.workspace.path())
        };
        let mut worker = self.taskwire.worker(name, &options).expect("start worker");
        worker.pulling().await.expect("worker ready");
        worker
    }

    async fn children(&self, parent: &str) -> Vec<pb::Task> {
        let listed = self.cluster.children(parent).await.expect("children");
        let mut client = self.cluster.client().await.expect("client");
        let mut children = Vec::new();
        for child in listed {
            let full = client
                .get(pb::GetRequest {
                    task_id: child.task_id,
                })
                .await
                .expect("get")
                .into_inner();
            children.push(full);
        }
        children
    }
}

/// What the test checks after the parent finished; printed for the run's record.
fn check_once_each(fleet: &Fleet, parent: &pb::Task, children: &[pb::Task]) {
    let seen = requests_by_prompt(&fleet.cluster.model);
    let child_requests: Vec<usize> = CHILD_PROMPTS
        .iter()
        .map(|p| seen.get(*p).copied().unwrap_or_default())
        .collect();
    let child_attempts: Vec<usize> = children.iter().map(|c| c.attempts.len()).collect();
    let parent_requests = seen.get(PARENT_PROMPT).copied().unwrap_or_default();
    let parent_first_turns = fleet
        .cluster
        .model
        .requests()
        .iter()
        .filter(|r| first_user(r) == PARENT_PROMPT && r.assistant_turns() == 0)
        .count();
    eprintln!(
        "delegation crash: {} children, child model requests {child_requests:?}, child attempts \
         {child_attempts:?}, parent model requests {parent_requests} (first turn \
         {parent_first_turns}), parent attempts {}",
        children.len(),
        parent.attempts.len()
    );

    assert_eq!(children.len(), 2, "exactly the two children: {children:?}");
    assert_eq!(child_requests, [1, 1], "each child's model was asked once");
    for child in children {
        assert_eq!(child.status(), pb::TaskStatus::Completed, "{child:?}");
        assert_eq!(child.attempts.len(), 1, "each child ran once: {child:?}");
    }
    assert_eq!(
        parent_first_turns, 1,
        "the parent's turn that called task is not asked again after the crash"
    );

    assert_eq!(parent.status(), pb::TaskStatus::Completed, "{parent:?}");
    assert_eq!(parent.attempts.len(), 2, "{:?}", parent.attempts);
    let (crashed, finished) = (&parent.attempts[0], &parent.attempts[1]);
    assert_eq!(
        (crashed.worker_id.as_str(), crashed.status()),
        ("worker-a", pb::TaskStatus::Error)
    );
    assert!(crashed.error.contains("redelivered"), "{crashed:?}");
    assert_eq!(finished.status(), pb::TaskStatus::Completed);
    assert_ne!(finished.worker_id, "worker-a");
    let text = &parent
        .result
        .as_ref()
        .and_then(|r| r.output.as_ref())
        .expect("output")
        .text;
    for prompt in CHILD_PROMPTS {
        assert!(text.contains(&format!("report on {prompt}")), "{text}");
    }
}

/// Waits until worker-a has claimed `parent`'s first attempt.
async fn claimed_by_worker_a(cluster: &Cluster, parent: &str) {
    wait_for(cluster, parent, "running on worker-a", |t| {
        t.attempts
            .first()
            .is_some_and(|a| a.worker_id == "worker-a")
    })
    .await
    .expect("claimed");
}

/// Waits until worker-a runs `parent`, starts worker-c for the children and waits
/// until both children have asked their model; returns worker-c.
async fn children_running(fleet: &Fleet, parent: &str, worker_a: &mut Process) -> Process {
    let cluster = &fleet.cluster;
    claimed_by_worker_a(cluster, parent).await;
    let worker_c = fleet.worker("worker-c", 2).await;
    eventually("both children's model requests", || {
        worker_a.check_running()?;
        let seen = requests_by_prompt(&cluster.model);
        Ok(CHILD_PROMPTS
            .iter()
            .all(|p| seen.contains_key(*p))
            .then_some(()))
    })
    .await
    .expect("children running");
    worker_c
}

/// Waits until `worker` says it re-attached to two running children.
async fn reattached(worker: &Process, what: &str) {
    eventually(what, || {
        Ok((worker.stderr().matches("re-attached to child task").count() >= 2).then_some(()))
    })
    .await
    .expect("re-attached");
}

async fn results_in_watch(cluster: &Cluster, task_id: &str) -> usize {
    cluster
        .watch(task_id)
        .await
        .expect("watch")
        .iter()
        .filter(|e| matches!(e.event, Some(pb::watch_event::Event::Result(_))))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_killed_while_its_children_run_re_attaches_to_them_and_completes_once() {
    let children_gate = Gate::new();
    let model = ScriptedModel::start(script(children_gate.clone(), || Duration::ZERO)).await;
    let fleet = Fleet::start(model).await;
    let cluster = &fleet.cluster;

    // worker-a runs only the parent; the children can only go to worker-c.
    let mut worker_a = fleet.worker("worker-a", 1).await;
    let parent = cluster
        .submit("general", PARENT_PROMPT)
        .await
        .expect("submit");
    let _worker_c = children_running(&fleet, &parent, &mut worker_a).await;
    // Only now the worker that takes the parent over: nothing else is left to run.
    let worker_b = fleet.worker("worker-b", 1).await;

    worker_a.kill();
    reattached(&worker_b, "worker-b to re-attach to both children").await;
    for child in fleet.children(&parent).await {
        assert_eq!(
            child.status(),
            pb::TaskStatus::Running,
            "still running when re-attached: {child:?}"
        );
    }
    children_gate.open();

    let done = cluster.wait_finished(&parent).await.expect("finished");
    check_once_each(&fleet, &done, &fleet.children(&parent).await);
    assert_eq!(
        done.attempts[1].worker_id, "worker-b",
        "worker-c was full with the children"
    );
    assert_eq!(results_in_watch(cluster, &parent).await, 1);
}

/// The same with background children: the parent is killed while it waits for them
/// in `task_status`; the redelivered parent runs its checkpointed step again, whose
/// background `task` calls re-attach to the same children, and waits for them anew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_killed_while_its_background_children_run_re_attaches_to_them_and_completes_once()
{
    let children_gate = Gate::new();
    let model = ScriptedModel::start(background_script(children_gate.clone())).await;
    let fleet = Fleet::start(model).await;
    let cluster = &fleet.cluster;

    let mut worker_a = fleet.worker("worker-a", 1).await;
    let parent = cluster
        .submit("general", PARENT_PROMPT)
        .await
        .expect("submit");
    let _worker_c = children_running(&fleet, &parent, &mut worker_a).await;
    eventually("the parent to wait in task_status", || {
        Ok(cluster
            .model
            .requests()
            .iter()
            .any(|r| first_user(r) == PARENT_PROMPT && r.assistant_turns() == 1)
            .then_some(()))
    })
    .await
    .expect("waiting");
    let worker_b = fleet.worker("worker-b", 1).await;

    worker_a.kill();
    reattached(
        &worker_b,
        "worker-b to re-attach to both background children",
    )
    .await;
    children_gate.open();

    let done = cluster.wait_finished(&parent).await.expect("finished");
    check_once_each(&fleet, &done, &fleet.children(&parent).await);
    assert_eq!(results_in_watch(cluster, &parent).await, 1);
}

/// The drain twin: the parent's worker is stopped with SIGTERM while the children
/// run; the parent does not finish within the drain grace, is released at once, and
/// the worker that takes it re-attaches to the same children.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_released_by_a_draining_worker_re_attaches_to_its_children_and_completes_once() {
    let children_gate = Gate::new();
    let model = ScriptedModel::start(script(children_gate.clone(), || Duration::ZERO)).await;
    let fleet = Fleet::start(model).await;
    let cluster = &fleet.cluster;

    let mut worker_a = fleet.worker("worker-a", 1).await;
    let parent = cluster
        .submit("general", PARENT_PROMPT)
        .await
        .expect("submit");
    let _worker_c = children_running(&fleet, &parent, &mut worker_a).await;
    let worker_b = fleet.worker("worker-b", 1).await;

    // The drain grace (1 s) passes with the children still held: the parent is
    // released, not finished.
    let stopped = worker_a
        .terminate()
        .await
        .expect("worker-a drains and exits");
    assert!(stopped.success(), "{}", worker_a.tail(20));
    reattached(&worker_b, "worker-b to re-attach to both children").await;
    children_gate.open();

    let done = cluster.wait_finished(&parent).await.expect("finished");
    check_once_each(&fleet, &done, &fleet.children(&parent).await);
    assert_eq!(done.attempts[1].worker_id, "worker-b");
    assert_eq!(results_in_watch(cluster, &parent).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_killed_after_its_children_finished_reads_their_results_and_completes_once() {
    let children_gate = Gate::new();
    children_gate.open();
    // The first attempt's second turn never comes back in time: its worker dies
    // waiting. Later ones answer at once.
    let second_turns = Arc::new(AtomicUsize::new(0));
    let delay = {
        let second_turns = second_turns.clone();
        move || match second_turns.fetch_add(1, Ordering::SeqCst) {
            0 => Duration::from_secs(60),
            _ => Duration::ZERO,
        }
    };
    let model = ScriptedModel::start(script(children_gate, delay)).await;
    let fleet = Fleet::start(model).await;
    let cluster = &fleet.cluster;

    let mut worker_a = fleet.worker("worker-a", 1).await;
    let parent = cluster
        .submit("general", PARENT_PROMPT)
        .await
        .expect("submit");
    claimed_by_worker_a(cluster, &parent).await;
    let _worker_c = fleet.worker("worker-c", 2).await;
    eventually("the parent's second turn", || {
        worker_a.check_running()?;
        Ok((second_turns.load(Ordering::SeqCst) >= 1).then_some(()))
    })
    .await
    .expect("children finished, parent asked again");
    for child in fleet.children(&parent).await {
        assert_eq!(child.status(), pb::TaskStatus::Completed, "{child:?}");
    }

    worker_a.kill();
    let done = cluster.wait_finished(&parent).await.expect("finished");
    check_once_each(&fleet, &done, &fleet.children(&parent).await);
    assert_eq!(results_in_watch(cluster, &parent).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_whose_last_attempt_dies_is_dead_lettered_and_its_running_children_cancelled() {
    // The children never answer: only the parent's end can stop them.
    let model = ScriptedModel::start(script(Gate::new(), || Duration::ZERO)).await;
    let fleet = Fleet::start(model).await;
    let cluster = &fleet.cluster;

    let mut worker_a = fleet.worker("worker-a", 1).await;
    let mut client = cluster.client().await.expect("client");
    let parent = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: PARENT_PROMPT.into(),
            max_attempts: Some(1),
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    let _worker_c = children_running(&fleet, &parent, &mut worker_a).await;
    let _worker_b = fleet.worker("worker-b", 1).await;

    worker_a.kill();
    let done = cluster.wait_finished(&parent).await.expect("finished");
    assert_eq!(done.status(), pb::TaskStatus::DeadLettered, "{done:?}");
    let mut children = Vec::new();
    for child in fleet.children(&parent).await {
        // Cancelled, and worker-c stopped the session (the attempt ended).
        let child = wait_for(cluster, &child.task_id, "cancelled and stopped", |t| {
            t.status() == pb::TaskStatus::Cancelled
                && t.attempts.first().is_some_and(|a| a.finished_at.is_some())
        })
        .await
        .expect("child cancelled");
        let reason = &child.result.as_ref().expect("result").errors[0];
        assert_eq!(
            (reason.code.as_str(), reason.message.clone()),
            (
                "parent_ended",
                format!("parent task {parent} ended (dead_lettered)")
            )
        );
        children.push(child);
    }
    assert_eq!(children.len(), 2);
    let seen = requests_by_prompt(&cluster.model);
    for prompt in CHILD_PROMPTS {
        assert_eq!(seen.get(prompt), Some(&1), "{prompt} ran once");
    }
}

const EDIT_PROMPT: &str = "write notes and have them extended";
const EDIT_CHILD_PROMPT: &str = "child: append to notes.txt";

/// The parent writes `notes.txt`, delegates appending a line to it, reads it back
/// (its first attempt's read request is held for a minute: its worker dies waiting)
/// and says what it read. The child appends and answers.
fn edit_script(reads: Arc<AtomicUsize>) -> impl Fn(&SeenRequest) -> ScriptedReply + Send + Sync {
    move |req| {
        let last_tool = || {
            req.messages
                .iter()
                .rev()
                .find(|m| m.role == "tool")
                .map(|m| m.content.clone())
                .unwrap_or_default()
        };
        if first_user(req) == EDIT_CHILD_PROMPT {
            return match req.assistant_turns() {
                0 => ScriptedReply::tool_calls([(
                    "c1",
                    "edit",
                    json!({"filePath": "notes.txt", "oldString": "from parent", "newString": "from parent\nfrom child"}),
                )]),
                _ => ScriptedReply::text("appended"),
            };
        }
        match req.assistant_turns() {
            0 => ScriptedReply::tool_calls([(
                "p1",
                "write",
                json!({"filePath": "notes.txt", "content": "from parent\n"}),
            )]),
            1 => ScriptedReply::tool_calls([(
                "p2",
                "task",
                json!({"description": "append", "prompt": EDIT_CHILD_PROMPT, "subagent_type": "general"}),
            )]),
            2 => {
                let delay = match reads.fetch_add(1, Ordering::SeqCst) {
                    0 => Duration::from_secs(60),
                    _ => Duration::ZERO,
                };
                ScriptedReply::tool_calls([("p3", "read", json!({"filePath": "notes.txt"}))])
                    .with_delay(delay)
            }
            _ => ScriptedReply::text(format!("parent read: {}", last_tool())),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_parent_restores_its_files_and_reapplies_its_finished_childs_changes() {
    let reads = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::start(edit_script(reads.clone())).await;
    let fleet = Fleet::start(model).await;
    let cluster = &fleet.cluster;

    let mut worker_a = fleet.worker("worker-a", 1).await;
    let parent = cluster.submit("build", EDIT_PROMPT).await.expect("submit");
    claimed_by_worker_a(cluster, &parent).await;
    let _worker_c = fleet.worker("worker-c", 2).await;
    eventually("the parent's read after its child", || {
        worker_a.check_running()?;
        Ok((reads.load(Ordering::SeqCst) >= 1).then_some(()))
    })
    .await
    .expect("the child finished and the parent asked again");

    // The new attempt starts from a fresh workspace: its own write comes back from
    // the checkpoint, the child's edit from the child's recorded patch.
    worker_a.kill();
    let done = cluster.wait_finished(&parent).await.expect("finished");
    let result = done.result.as_ref().expect("result");
    assert_eq!(done.status(), pb::TaskStatus::Completed, "{done:?}");
    assert_eq!(done.attempts.len(), 2, "{:?}", done.attempts);
    let children = fleet.children(&parent).await;
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].attempts.len(), 1, "the child ran once");
    let text = &result.output.as_ref().expect("output").text;
    assert!(
        text.contains("from parent") && text.contains("from child"),
        "the parent read both lines: {text}"
    );
    assert_eq!(
        taskwire_e2e::created_in_patch(&result.patch, "notes.txt").as_deref(),
        Some("from parent\nfrom child"),
        "{}",
        result.patch
    );
}
