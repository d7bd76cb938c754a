//! Two coordinator processes behind one Postgres and one NATS, as operators run them:
//! submits spread over both, every task completes exactly once, and when one is killed
//! (SIGKILL) mid-burst the other keeps serving and finishes its work, the dead one's
//! committed submits included.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};
use tonic::transport::Channel;

use super::coordinator_crash::{
    Deployment, assert_each_ran_once, eventually_all_finished, keyed_submit, retry_refused,
};
use super::{eventually, prompts_seen};

const SUBMITS: usize = 200;
const IN_FLIGHT: usize = 16;
/// Submits acknowledged by the first coordinator before it is killed.
const KILL_AFTER: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_coordinators_share_submits_and_one_finishes_the_work_after_the_other_dies() {
    let deployment = Deployment::start().await;
    let (mut first, first_client) = deployment.coordinator("coordinator-1").await;
    let (mut second, mut second_client) = deployment.coordinator("coordinator-2").await;
    let mut worker = deployment.worker(8);

    // Even submits go to the first coordinator, odd ones to the second.
    let acked_by_first = Arc::new(AtomicUsize::new(0));
    let burst = tokio::spawn({
        let (acked, second_client) = (acked_by_first.clone(), second_client.clone());
        futures::stream::iter(0..SUBMITS)
            .map(move |i| {
                let acked = acked.clone();
                let mut client = if i % 2 == 0 {
                    first_client.clone()
                } else {
                    second_client.clone()
                };
                async move {
                    let r = keyed_submit(&mut client, i).await;
                    if r.is_ok() && i % 2 == 0 {
                        acked.fetch_add(1, Ordering::SeqCst);
                    }
                    (i, r)
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect::<Vec<_>>()
    });
    eventually("the first coordinator to acknowledge submits", || {
        first.check_running()?;
        Ok((acked_by_first.load(Ordering::SeqCst) >= KILL_AFTER).then_some(()))
    })
    .await
    .expect("burst under way");
    first.kill();
    let outcomes = burst.await.expect("burst");

    let acked_first = outcomes
        .iter()
        .filter(|(i, r)| i % 2 == 0 && r.is_ok())
        .count();
    let acked_second = outcomes
        .iter()
        .filter(|(i, r)| i % 2 == 1 && r.is_ok())
        .count();
    assert!(acked_first >= KILL_AFTER, "{acked_first}");
    assert_eq!(
        acked_second,
        SUBMITS / 2,
        "the surviving coordinator acknowledged every submit sent to it"
    );

    // Submits the dead coordinator did not acknowledge go to the survivor with the same
    // idempotency key: one it had committed is found, the others are created now.
    let found = retry_refused(&mut second_client, &outcomes).await;
    let stored = eventually_all_finished(&mut second_client).await;
    assert_eq!(stored, SUBMITS, "one task per idempotency key");
    assert_each_ran_once(&deployment.model, SUBMITS, |_| {
        format!("\nsurvivor log:\n{}", second.tail(20))
    });
    eprintln!(
        "two coordinators: {acked_first} submits acknowledged by the first before it was killed, \
         {acked_second} by the second; {} refused and retried on the survivor ({found} had been \
         committed); {stored} tasks, each completed and run exactly once",
        SUBMITS - acked_first - acked_second
    );
    second.check_running().expect("the survivor kept serving");
    worker
        .check_running()
        .expect("the worker rode out the coordinator's death");
}

pub(super) const PARENT: &str = "parent: split the work";
pub(super) const CHILDREN: [&str; 2] = ["child: left half", "child: right half"];

/// The parent starts two children in one turn and reports when they answered; each
/// child answers slowly, so both are running when a coordinator dies.
pub(super) fn tree_script(req: &SeenRequest) -> ScriptedReply {
    let first = req.first_user_message().unwrap_or_default();
    if first.starts_with("child:") {
        return ScriptedReply::text(format!("done: {first}"))
            .with_delay(Duration::from_millis(800));
    }
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls(CHILDREN.iter().enumerate().map(|(i, prompt)| {
            (
                format!("t{i}"),
                "task",
                serde_json::json!({"description": "half", "prompt": prompt, "subagent_type": "general"}),
            )
        })),
        _ => ScriptedReply::text("parent done"),
    }
}

/// The twin with a task tree: children are submitted, followed and recorded through
/// whichever coordinator answers; one dies while both children run, and the tree still
/// completes once, with exactly its two children, each run once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_tree_completes_once_when_one_of_two_coordinators_dies_under_it() {
    let deployment = Deployment::with_model(ScriptedModel::start(tree_script).await).await;
    let (mut first, mut first_client) = deployment.coordinator("coordinator-1").await;
    let (mut second, mut second_client) = deployment.coordinator("coordinator-2").await;
    let mut worker = deployment.worker(4);

    let parent = first_client
        .submit(super::task(PARENT))
        .await
        .expect("submit")
        .into_inner()
        .task_id;
    eventually("both children to run", || {
        first.check_running()?;
        let seen = prompts_seen(&deployment.model);
        Ok(CHILDREN.iter().all(|c| seen.contains_key(*c)).then_some(()))
    })
    .await
    .expect("children running");
    first.kill();

    let done = super::wait_finished(&mut second_client, &parent)
        .await
        .unwrap_or_else(|e| panic!("{e}\nsurvivor log:\n{}", second.tail(20)));
    let (children, child_runs) =
        assert_tree_completed_once(&done, &mut second_client, &deployment.model).await;
    eprintln!(
        "two coordinators, one killed under a tree: {} children, child runs {child_runs:?}, \
         parent attempts {}, parent {:?}",
        children.len(),
        done.attempts.len(),
        done.status()
    );
    second.check_running().expect("the survivor kept serving");
    worker.check_running().expect("the worker kept running");
}

/// Asserts that the tree under `done` (finished) completed once: the parent in one
/// attempt, exactly its two children, both completed, each child's model asked once.
/// Returns the children and each child's runs.
pub(super) async fn assert_tree_completed_once(
    done: &pb::Task,
    client: &mut TaskServiceClient<Channel>,
    model: &ScriptedModel,
) -> (Vec<pb::Task>, Vec<usize>) {
    assert_eq!(done.status(), pb::TaskStatus::Completed, "{done:?}");
    assert_eq!(done.attempts.len(), 1, "the parent ran once: {done:?}");
    let children = client
        .list(pb::ListRequest {
            parent_task_id: done.task_id.clone(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .tasks;
    assert_eq!(children.len(), 2, "exactly the two children: {children:?}");
    assert!(
        children
            .iter()
            .all(|c| c.status() == pb::TaskStatus::Completed)
    );
    let seen = prompts_seen(model);
    let child_runs: Vec<usize> = CHILDREN
        .iter()
        .map(|c| seen.get(*c).copied().unwrap_or(0))
        .collect();
    assert_eq!(child_runs, [1, 1], "each child's model was asked once");
    (children, child_runs)
}
