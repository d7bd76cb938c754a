//! The store against the lifecycle as its model: generated sequences of every event
//! (claims and redeliveries, results of current and stale attempts with every status,
//! approvals asked, answered and timed out, deadlines, dead letters, cancels, replays),
//! some sent twice at once, on a tree of three tasks whose ended ancestors cancel
//! their descendants, leave every stored status, attempt, epoch and attempt budget
//! where `taskwire_protocol::lifecycle::apply` says.

mod common;

use std::collections::BTreeSet;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use taskwire_protocol::lifecycle::{
    self, CancelCause, Effect, Report, TaskEvent, TaskState, apply,
};
use taskwire_protocol::{ClaimEpoch, TaskError, TaskId, TaskResult, TaskStatus, WorkerId};
use taskwire_store::{AnswerOutcome, ApprovalAnswer, Store, Transitioned};

/// What the test does to one task of the tree.
#[derive(Debug, Clone)]
enum Op {
    Claim,
    /// A result of the attempt `epoch + offset - 1` (stale, current or not yet made).
    Finish {
        offset: u64,
        status: TaskStatus,
        retryable: bool,
    },
    Ask {
        offset: u64,
    },
    /// Answers (or times out) the oldest pending approval.
    Close {
        answer: bool,
    },
    /// The deadline passes now; the sweeper runs.
    Expire,
    DeadLetter,
    Cancel,
    Replay,
}

/// An op on the task `target` (0 the root, 1 its child, 2 the grandchild), sent twice
/// at once when `twice`.
#[derive(Debug, Clone)]
struct Step {
    target: usize,
    op: Op,
    twice: bool,
}

fn op() -> impl Strategy<Value = Op> {
    let status = proptest::sample::select(vec![
        TaskStatus::Completed,
        TaskStatus::Error,
        TaskStatus::MaxSteps,
        TaskStatus::BudgetExceeded,
        TaskStatus::Cancelled,
        TaskStatus::DeadlineExceeded,
        TaskStatus::Rejected,
    ]);
    prop_oneof![
        4 => Just(Op::Claim),
        4 => (0u64..3, status, any::<bool>()).prop_map(|(offset, status, retryable)| Op::Finish {
            offset,
            status,
            retryable
        }),
        2 => (0u64..3).prop_map(|offset| Op::Ask { offset }),
        2 => any::<bool>().prop_map(|answer| Op::Close { answer }),
        1 => Just(Op::Expire),
        1 => Just(Op::DeadLetter),
        1 => Just(Op::Cancel),
        2 => Just(Op::Replay),
    ]
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = (0usize..3, op(), proptest::bool::weighted(0.25))
        .prop_map(|(target, op, twice)| Step { target, op, twice });
    proptest::collection::vec(step, 1..16)
}

/// The model: each task's state, its pending approvals and whether its deadline passed.
#[derive(Debug, Clone)]
struct Model {
    states: [TaskState; 3],
    pending: [BTreeSet<String>; 3],
    overdue: [bool; 3],
    asked: u32,
    /// Tasks that ended in the current step (their effects include `CancelDescendants`).
    ended: Vec<usize>,
}

impl Model {
    fn new(max_attempts: u32) -> Self {
        Self {
            states: [TaskState::submitted(max_attempts); 3],
            pending: Default::default(),
            overdue: [false; 3],
            asked: 0,
            ended: Vec::new(),
        }
    }

    /// Applies `event` to task `i`; returns the effects when the task changed, and
    /// notes the task as ended when they include `CancelDescendants`.
    fn apply(&mut self, i: usize, event: TaskEvent) {
        if let Ok(step) = apply(self.states[i], event)
            && step.state != self.states[i]
        {
            self.states[i] = step.state;
            if step.effects.contains(&Effect::CancelDescendants) {
                self.ended.push(i);
            }
        }
    }

    /// The coordinator's `CancelDescendants` for the tasks that ended in this step:
    /// every live task under one (the tree is a chain, so every task after it) is
    /// cancelled by its ancestor.
    fn end_subtrees(&mut self) {
        let ended = std::mem::take(&mut self.ended);
        if let Some(top) = ended.into_iter().min() {
            for j in (top + 1)..3 {
                self.apply(j, TaskEvent::Cancel(CancelCause::AncestorEnded));
            }
        }
        self.ended.clear();
    }
}

struct Tree {
    ids: [TaskId; 3],
}

async fn tree(store: &Store, max_attempts: u32) -> Tree {
    let mut tasks = [
        common::task(None, "d"),
        common::task(None, "d"),
        common::task(None, "d"),
    ];
    for t in &mut tasks {
        t.request.max_attempts = max_attempts;
    }
    let ids = [
        tasks[0].request.task_id,
        tasks[1].request.task_id,
        tasks[2].request.task_id,
    ];
    tasks[1].request.parent_task_id = Some(ids[0]);
    tasks[2].request.parent_task_id = Some(ids[1]);
    store.insert_tasks(&tasks).await.expect("insert the tree");
    Tree { ids }
}

fn finish(id: TaskId, epoch: ClaimEpoch, status: TaskStatus, retryable: bool) -> TaskResult {
    TaskResult {
        status,
        errors: vec![TaskError {
            code: "session_error".into(),
            message: "the model answered 503".into(),
            retryable,
        }],
        ..common::result(id, epoch, "r")
    }
}

/// Runs `f` once, or twice at once.
async fn once_or_twice<F, Fut, T>(twice: bool, f: F) -> Vec<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    if twice {
        let (a, b) = tokio::join!(f(), f());
        vec![a, b]
    } else {
        vec![f().await]
    }
}

/// Performs one step on the store and the model; returns the tasks the store ended
/// with `CancelDescendants` among their effects, for the caller to perform.
async fn step(
    pool: &sqlx::PgPool,
    store: &Store,
    tree: &Tree,
    model: &mut Model,
    s: &Step,
) -> Vec<Transitioned> {
    let i = s.target;
    let id = tree.ids[i];
    let times = if s.twice { 2 } else { 1 };
    let mut changed = Vec::new();
    match &s.op {
        Op::Claim => {
            let worker = WorkerId::new("w1");
            let claims = [(id, worker)];
            for outcome in once_or_twice(s.twice, || store.claim_tasks(&claims, None)).await {
                if let taskwire_store::ClaimOutcome::Ended(status) = outcome.expect("claim")[0] {
                    changed.push(Transitioned {
                        task_id: id,
                        status,
                        effects: lifecycle::effects(lifecycle::EventKind::Claim, status),
                        reason: None,
                        children: None,
                    });
                }
            }
            for _ in 0..times {
                let deadline_passed = model.overdue[i];
                model.apply(i, TaskEvent::Claim { deadline_passed });
            }
        }
        Op::Finish {
            offset,
            status,
            retryable,
        } => {
            let epoch = ClaimEpoch((model.states[i].epoch.0 + offset).saturating_sub(1));
            let result = [finish(id, epoch, *status, *retryable)];
            for recorded in once_or_twice(s.twice, || store.record_results_timed(&result)).await {
                changed.extend(
                    recorded
                        .expect("record")
                        .into_iter()
                        .flatten()
                        .map(|r| r.transition),
                );
            }
            let report = Report {
                status: *status,
                retryable: *retryable && *status == TaskStatus::Error,
            };
            for _ in 0..times {
                model.apply(i, TaskEvent::Finish { epoch, report });
            }
        }
        Op::Ask { offset } => {
            let epoch = ClaimEpoch((model.states[i].epoch.0 + offset).saturating_sub(1));
            model.asked += 1;
            let request = format!("r{}", model.asked);
            let asked = once_or_twice(s.twice, || {
                store.ask_approval(id, epoch, &request, "bash", &[], "run it")
            })
            .await;
            let accepted = apply(model.states[i], TaskEvent::AskApproval { epoch }).is_ok()
                && !model.states[i].status.is_terminal();
            for a in asked {
                assert_eq!(a.expect("ask"), accepted, "ask {request} at {epoch:?}");
            }
            if accepted {
                model.pending[i].insert(request);
                model.apply(i, TaskEvent::AskApproval { epoch });
            }
        }
        Op::Close { answer } => {
            let Some(request) = model.pending[i].first().cloned() else {
                return changed;
            };
            let closed = once_or_twice(s.twice, || async {
                if *answer {
                    store
                        .answer_approval(id, &request, ApprovalAnswer::Once, None)
                        .await
                } else {
                    store.time_out_approval(id, &request).await
                }
            })
            .await;
            let answered = closed
                .into_iter()
                .filter(|c| matches!(c, Ok(AnswerOutcome::Answered)))
                .count();
            assert_eq!(answered, 1, "one close of {request} counts");
            model.pending[i].remove(&request);
            let others_pending = !model.pending[i].is_empty();
            model.apply(i, TaskEvent::ApprovalClosed { others_pending });
        }
        Op::Expire => {
            sqlx::query(
                "UPDATE tasks SET deadline = now() - interval '1 second' WHERE task_id = $1",
            )
            .bind(id.as_uuid())
            .execute(pool)
            .await
            .expect("move the deadline");
            model.overdue[i] = true;
            for expired in once_or_twice(s.twice, || store.expire_overdue(1000)).await {
                changed.extend(expired.expect("expire"));
            }
            for j in 0..3 {
                if model.overdue[j] {
                    model.apply(j, TaskEvent::Expire);
                }
            }
        }
        Op::DeadLetter => {
            for ended in once_or_twice(s.twice, || store.dead_letter_task(id, "gave up")).await {
                changed.extend(ended.expect("dead-letter"));
            }
            for _ in 0..times {
                model.apply(i, TaskEvent::DeadLetter);
            }
        }
        Op::Cancel => {
            for cancelled in once_or_twice(s.twice, || store.cancel_tree(id)).await {
                changed.extend(cancelled.expect("cancel"));
            }
            // One request reaches the subtree.
            for j in i..3 {
                model.apply(j, TaskEvent::Cancel(CancelCause::Requested));
            }
        }
        Op::Replay => {
            for _ in once_or_twice(s.twice, || store.replay_task(id, "t.tasks.default")).await {}
            for _ in 0..times {
                model.apply(i, TaskEvent::Replay);
            }
        }
    }
    changed
}

async fn check(pool: &sqlx::PgPool, store: &Store, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let max_attempts = 2;
    let tree = tree(store, max_attempts).await;
    let mut model = Model::new(max_attempts);
    for (n, s) in steps.iter().enumerate() {
        let changed = step(pool, store, &tree, &mut model, s).await;
        // The coordinator's effect: the subtrees of ended tasks end, but for the tasks
        // the transition found without children (which must then have none).
        let ended: Vec<TaskId> = changed
            .iter()
            .filter(|t| t.has(Effect::CancelDescendants) && t.children != Some(false))
            .map(|t| t.task_id)
            .collect();
        if !ended.is_empty() {
            let mut round = ended;
            while !round.is_empty() {
                round = store
                    .cancel_descendants(&round)
                    .await
                    .expect("cancel descendants")
                    .into_iter()
                    .filter(|t| t.has(Effect::CancelDescendants))
                    .map(|t| t.task_id)
                    .collect();
            }
        }
        model.end_subtrees();
        for (j, id) in tree.ids.iter().enumerate() {
            let rec = store.get_task(*id).await.expect("get").expect("exists");
            let want = model.states[j];
            prop_assert_eq!(
                (rec.status, rec.attempt, rec.claim_epoch, rec.max_attempts),
                (
                    want.status,
                    want.attempt,
                    want.epoch,
                    want.attempt_base + want.max_attempts
                ),
                "task {} after step {} {:?}",
                j,
                n,
                s
            );
        }
    }
    Ok(())
}

#[test]
fn the_store_follows_the_lifecycle() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (db, store) = runtime.block_on(common::store());
    let pool = runtime
        .block_on(sqlx::PgPool::connect(db.url()))
        .expect("a connection of the test's own");
    // Deterministic: the same cases on every run (failures shrink and reproduce).
    let config = Config {
        cases: 256,
        failure_persistence: None,
        rng_algorithm: proptest::test_runner::RngAlgorithm::ChaCha,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(
        config,
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let outcome = runner.run(&steps(), |steps| {
        runtime.block_on(check(&pool, &store, steps))
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
