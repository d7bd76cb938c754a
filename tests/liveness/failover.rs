//! Failover at the default settings: a worker killed with SIGKILL, or cut off from NATS
//! by a partition, while it runs a task (or a parent whose children run on another
//! worker). Another worker claims the task within [`FAILOVER_LIMIT`] of the fault and
//! completes it once; no child starts twice. Each single-task case is measured over
//! [`ROUNDS`] runs and its median printed.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use taskwire_e2e::partition::Partition;
use taskwire_e2e::process::Taskwire;
use taskwire_e2e::{Cluster, start_with, wait_for};
use taskwire_protocol::pb;
use taskwire_test_support::{Gate, ScriptedModel, ScriptedReply, SeenRequest};

use super::{default_ack_wait, eventually, first_user, p50, requests_by_prompt, serial, worker};

/// How soon a task of a dead or cut-off worker must run elsewhere.
const FAILOVER_LIMIT: Duration = Duration::from_secs(10);
/// Runs of each single-task case.
const ROUNDS: usize = 3;
const PARENT_PROMPT: &str = "investigate alpha and omega";
const CHILD_PROMPTS: [&str; 2] = ["child: find alpha", "child: find omega"];

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// SIGKILL: the process and its connections are gone.
    Kill,
    /// The process runs on, but nothing it sends reaches NATS and nothing comes back.
    Partition,
}

/// A conversation's first request is answered only after a minute (its worker is gone
/// by then), a later one at once; children answer once `children` opens; a parent
/// calls `task` twice in its first turn, then reports what its children said.
fn script(children: Gate) -> impl Fn(&SeenRequest) -> ScriptedReply + Send + Sync + 'static {
    let seen = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    move |req| {
        let user = first_user(req).to_owned();
        if CHILD_PROMPTS.contains(&user.as_str()) {
            return ScriptedReply::text(format!("report on {user}")).with_gate(&children);
        }
        if user == PARENT_PROMPT {
            if req.assistant_turns() == 0 {
                let call = |prompt: &str| json!({"description": "find", "prompt": prompt, "subagent_type": "explore"});
                return ScriptedReply::tool_calls([
                    ("call_alpha", "task", call(CHILD_PROMPTS[0])),
                    ("call_omega", "task", call(CHILD_PROMPTS[1])),
                ]);
            }
            return ScriptedReply::text("children reported");
        }
        let asked = {
            let mut seen = seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let n = seen.entry(user.clone()).or_default();
            *n += 1;
            *n
        };
        if asked == 1 {
            ScriptedReply::text("never delivered").with_delay(Duration::from_secs(60))
        } else {
            ScriptedReply::text(format!("done: {user}"))
        }
    }
}

struct Fleet {
    taskwire: Taskwire,
    cluster: Cluster,
    children: Gate,
}

impl Fleet {
    async fn start() -> Self {
        let children = Gate::new();
        let model = ScriptedModel::start(script(children.clone())).await;
        let cluster = start_with(model, 0, 1, |c| {
            c.ack_wait = taskwire_coordinator::CoordinatorConfig::default().ack_wait;
        })
        .await
        .expect("cluster");
        Self {
            taskwire: Taskwire::locate().expect("taskwire binary"),
            cluster,
            children,
        }
    }

    fn nats_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.cluster.nats.port()))
    }
}

/// Applies `fault` to worker `a`, reached through `relay`.
fn strike(fault: Fault, a: &mut taskwire_e2e::process::Process, relay: &Partition) -> Instant {
    let at = Instant::now();
    match fault {
        Fault::Kill => a.kill(),
        Fault::Partition => relay.cut(),
    }
    at
}

/// One task on worker-a, struck by `fault` once its session waits on the model;
/// returns how long until worker-b claimed it.
async fn single_round(fleet: &Fleet, fault: Fault, round: usize) -> Duration {
    let cluster = &fleet.cluster;
    let relay = Partition::relay(fleet.nats_addr()).await.expect("relay");
    let (a_name, b_name) = (format!("worker-a{round}"), format!("worker-b{round}"));
    let via_relay = format!("nats://{}", relay.addr());
    let mut a = worker(&fleet.taskwire, cluster, &a_name, &via_relay, 1).await;
    let prompt = format!("round {round}: summarise the build failures");
    let id = cluster.submit("general", &prompt).await.expect("submit");
    eventually("worker-a's session to ask the model", || {
        a.check_running()?;
        Ok(requests_by_prompt(&cluster.model)
            .contains_key(&prompt)
            .then_some(()))
    })
    .await
    .expect("session started");
    // Only now a second worker, so the first attempt can only have been worker-a's.
    let b = worker(&fleet.taskwire, cluster, &b_name, &cluster.nats.url(), 1).await;

    let struck = strike(fault, &mut a, &relay);
    wait_for(cluster, &id, "claimed by worker-b", |t| {
        t.attempts.get(1).is_some_and(|at| at.worker_id == b_name)
    })
    .await
    .expect("claimed elsewhere");
    let failover = struck.elapsed();

    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    assert_eq!(task.attempts.len(), 2, "{:?}", task.attempts);
    assert_eq!(task.attempts[0].worker_id, a_name);
    assert_eq!(
        task.result
            .as_ref()
            .and_then(|r| r.output.as_ref())
            .map(|o| o.text.as_str()),
        Some(format!("done: {prompt}").as_str())
    );
    assert_eq!(
        requests_by_prompt(&cluster.model).get(&prompt),
        Some(&2),
        "one model request per attempt"
    );
    drop((a, b));
    failover
}

async fn single_task_fails_over(fault: Fault) {
    let _serial = serial().await;
    let fleet = Fleet::start().await;
    let mut times = Vec::new();
    for round in 0..ROUNDS {
        times.push(single_round(&fleet, fault, round).await);
    }
    eprintln!(
        "failover after {fault:?} of a worker (default ack wait {:?}): p50 {:?}, runs {times:?}",
        default_ack_wait(),
        p50(&times)
    );
    for t in &times {
        assert!(
            *t < FAILOVER_LIMIT,
            "{fault:?}: claimed elsewhere after {t:?}"
        );
    }
    fleet.cluster.shutdown().await;
}

/// A parent on worker-a, its two children on worker-c; worker-a is struck while the
/// children run. Worker-b claims the parent within the limit, re-attaches to the same
/// children, and the tree completes with every child run once.
async fn parent_fails_over(fault: Fault) {
    let _serial = serial().await;
    let fleet = Fleet::start().await;
    let cluster = &fleet.cluster;
    let relay = Partition::relay(fleet.nats_addr()).await.expect("relay");
    let via_relay = format!("nats://{}", relay.addr());
    // worker-a runs only the parent; the children can only go to worker-c.
    let mut a = worker(&fleet.taskwire, cluster, "worker-a", &via_relay, 1).await;
    let parent = cluster
        .submit("general", PARENT_PROMPT)
        .await
        .expect("submit");
    wait_for(cluster, &parent, "running on worker-a", |t| {
        t.attempts
            .first()
            .is_some_and(|at| at.worker_id == "worker-a")
    })
    .await
    .expect("claimed");
    let _c = worker(&fleet.taskwire, cluster, "worker-c", &cluster.nats.url(), 2).await;
    eventually("both children's model requests", || {
        a.check_running()?;
        let seen = requests_by_prompt(&cluster.model);
        Ok(CHILD_PROMPTS
            .iter()
            .all(|p| seen.contains_key(*p))
            .then_some(()))
    })
    .await
    .expect("children running");
    let _b = worker(&fleet.taskwire, cluster, "worker-b", &cluster.nats.url(), 1).await;

    let struck = strike(fault, &mut a, &relay);
    wait_for(cluster, &parent, "claimed by worker-b", |t| {
        t.attempts
            .get(1)
            .is_some_and(|at| at.worker_id == "worker-b")
    })
    .await
    .expect("claimed elsewhere");
    let failover = struck.elapsed();
    fleet.children.open();

    let done = cluster.wait_finished(&parent).await.expect("finished");
    eprintln!("failover after {fault:?} of a parent's worker: {failover:?}");
    assert!(
        failover < FAILOVER_LIMIT,
        "claimed elsewhere after {failover:?}"
    );
    assert_eq!(done.status(), pb::TaskStatus::Completed, "{done:?}");
    assert_eq!(done.attempts.len(), 2, "{:?}", done.attempts);
    let seen = requests_by_prompt(&cluster.model);
    for prompt in CHILD_PROMPTS {
        assert_eq!(
            seen.get(prompt),
            Some(&1),
            "{prompt}: its model was asked once"
        );
    }
    let first_turns = cluster
        .model
        .requests()
        .iter()
        .filter(|r| first_user(r) == PARENT_PROMPT && r.assistant_turns() == 0)
        .count();
    assert_eq!(
        first_turns, 1,
        "the turn that started the children is not asked again"
    );
    let children = cluster.children(&parent).await.expect("children");
    assert_eq!(children.len(), 2, "{children:?}");
    let mut client = cluster.client().await.expect("client");
    for child in children {
        let child = client
            .get(pb::GetRequest {
                task_id: child.task_id,
            })
            .await
            .expect("get")
            .into_inner();
        assert_eq!(child.status(), pb::TaskStatus::Completed, "{child:?}");
        assert_eq!(child.attempts.len(), 1, "each child ran once: {child:?}");
    }
    drop(a);
    fleet.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_workers_task_runs_elsewhere_within_ten_seconds_at_the_default_settings() {
    single_task_fails_over(Fault::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_workers_task_runs_elsewhere_within_ten_seconds_at_the_default_settings() {
    single_task_fails_over(Fault::Partition).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_parents_task_runs_elsewhere_within_ten_seconds_and_no_child_starts_twice() {
    parent_fails_over(Fault::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_parents_task_runs_elsewhere_within_ten_seconds_and_no_child_starts_twice() {
    parent_fails_over(Fault::Partition).await;
}
