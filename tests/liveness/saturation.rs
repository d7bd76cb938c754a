//! Live sessions on a machine whose CPUs are saturated, for several minutes: a single
//! task and a parent with two children, all waiting on the model, while busy loops
//! outnumber the CPUs four to one. No task is offered to another worker: each keeps
//! its one attempt, and JetStream redelivers nothing.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use taskwire_e2e::process::Taskwire;
use taskwire_e2e::start_with;
use taskwire_protocol::pb;
use taskwire_test_support::{Gate, ScriptedModel, ScriptedReply, SeenRequest};

use super::{default_ack_wait, eventually, first_user, requests_by_prompt, serial, worker};

/// How long the sessions stay live under load: many times the ack wait.
const HOLD: Duration = Duration::from_secs(180);
const SINGLE_PROMPT: &str = "hold: a single task";
const PARENT_PROMPT: &str = "hold: a parent";
const CHILD_PROMPTS: [&str; 2] = ["hold: child alpha", "hold: child omega"];

/// Busy loops, `per_cpu` for each CPU, as processes of their own; stopped when dropped.
struct Load(Vec<Child>);

impl Load {
    fn start(per_cpu: usize) -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let hogs = (0..cpus * per_cpu)
            .map(|_| {
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("a busy loop starts")
            })
            .collect();
        Self(hogs)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for hog in &mut self.0 {
            let _ = hog.kill();
            let _ = hog.wait();
        }
    }
}

/// Everything waits for `gate`; the parent first starts its two children.
fn script(gate: Gate) -> impl Fn(&SeenRequest) -> ScriptedReply + Send + Sync + 'static {
    move |req| {
        let user = first_user(req);
        if user == PARENT_PROMPT {
            if req.assistant_turns() == 0 {
                let call = |prompt: &str| json!({"description": "hold", "prompt": prompt, "subagent_type": "explore"});
                return ScriptedReply::tool_calls([
                    ("call_alpha", "task", call(CHILD_PROMPTS[0])),
                    ("call_omega", "task", call(CHILD_PROMPTS[1])),
                ]);
            }
            return ScriptedReply::text("children reported");
        }
        ScriptedReply::text(format!("done: {user}")).with_gate(&gate)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_sessions_on_a_saturated_machine_are_never_offered_to_another_worker() {
    let _serial = serial().await;
    let gate = Gate::new();
    let model = ScriptedModel::start(script(gate.clone())).await;
    let cluster = start_with(model, 0, 1, |c| {
        c.ack_wait = taskwire_coordinator::CoordinatorConfig::default().ack_wait;
    })
    .await
    .expect("cluster");
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let nats = cluster.nats.url();
    // Two workers with room to spare: a redelivered task would start a second attempt.
    let mut a = worker(&taskwire, &cluster, "worker-a", &nats, 4).await;
    let mut b = worker(&taskwire, &cluster, "worker-b", &nats, 4).await;
    let single = cluster
        .submit("general", SINGLE_PROMPT)
        .await
        .expect("submit");
    let parent = cluster
        .submit("general", PARENT_PROMPT)
        .await
        .expect("submit");
    eventually("every session to wait on the model", || {
        let seen = requests_by_prompt(&cluster.model);
        Ok(std::iter::once(SINGLE_PROMPT)
            .chain(CHILD_PROMPTS)
            .all(|p| seen.contains_key(p))
            .then_some(()))
    })
    .await
    .expect("sessions live");
    let children: Vec<String> = cluster
        .children(&parent)
        .await
        .expect("children")
        .into_iter()
        .map(|c| c.task_id)
        .collect();
    assert_eq!(children.len(), 2);
    let tasks: Vec<&str> = [single.as_str(), parent.as_str()]
        .into_iter()
        .chain(children.iter().map(String::as_str))
        .collect();

    let load = Load::start(4);
    let loaded = Instant::now();
    let mut client = cluster.client().await.expect("client");
    while loaded.elapsed() < HOLD {
        tokio::time::sleep(Duration::from_secs(5)).await;
        a.check_running().expect("worker-a runs");
        b.check_running().expect("worker-b runs");
        for id in &tasks {
            let task = client
                .get(pb::GetRequest {
                    task_id: (*id).to_owned(),
                })
                .await
                .expect("get")
                .into_inner();
            assert_eq!(
                task.attempts.len(),
                1,
                "task {id} offered again {:?} into the load: {:?}",
                loaded.elapsed(),
                task.attempts
            );
        }
    }
    drop(load);
    gate.open();

    for id in &tasks {
        let task = cluster.wait_finished(id).await.expect("finished");
        assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
        assert_eq!(task.attempts.len(), 1, "{id}: {:?}", task.attempts);
    }
    let seen = requests_by_prompt(&cluster.model);
    for prompt in std::iter::once(SINGLE_PROMPT).chain(CHILD_PROMPTS) {
        assert_eq!(seen.get(prompt), Some(&1), "{prompt}: asked once");
    }
    let js = async_nats::jetstream::new(
        async_nats::connect(cluster.nats.url())
            .await
            .expect("connects"),
    );
    let subjects = taskwire_bus::Subjects::default();
    let mut consumer: async_nats::jetstream::consumer::PullConsumer = js
        .get_stream(subjects.tasks_stream())
        .await
        .expect("tasks stream")
        .get_consumer(&subjects.workers_consumer("default"))
        .await
        .expect("workers' consumer");
    let info = consumer.info().await.expect("consumer info");
    assert_eq!(info.config.ack_wait, default_ack_wait());
    assert_eq!(info.num_redelivered, 0, "JetStream redelivered nothing");
    let late = a.stderr().matches("liveness beat late").count()
        + b.stderr().matches("liveness beat late").count();
    eprintln!(
        "saturated for {HOLD:?} ({} busy loops): 4 live tasks, 0 redelivered, {late} late beats logged",
        std::thread::available_parallelism().map_or(2, |n| n.get()) * 4
    );
    drop((a, b));
    cluster.shutdown().await;
}
