//! Behaviour of the Postgres store, each test on its own fresh database.

use chrono::{Duration, Utc};
use taskwire_protocol::TaskError;
use taskwire_protocol::{ClaimEpoch, TaskId, TaskResult, TaskStatus, Usage, WorkerId, pb};
use taskwire_store::{ClaimOutcome, InsertOutcome, ListFilter, NewTask, ReplayOutcome, Store};
use taskwire_test_support::TestDatabase;

mod common;
use common::{claim, result, store, store_with, task};

#[tokio::test]
async fn submitted_task_is_queued_with_an_outbox_message() {
    let (_db, store) = store().await;
    let t = task(None, "d");
    let id = t.request.task_id;
    assert_eq!(
        store.insert_tasks(&[t]).await.expect("insert"),
        vec![InsertOutcome::Created(id)]
    );
    let rec = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!(rec.status, TaskStatus::Queued);
    assert_eq!(rec.attempt, 0);
    let outbox = store.outbox_pending(10).await.expect("outbox");
    assert_eq!(outbox.len(), 1);
    assert_eq!(outbox[0].msg_id, id.to_string());
}

/// The number of rows in `agent_specs`.
async fn stored_specs(db: &TestDatabase) -> i64 {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(db.url())
        .await
        .expect("connect");
    sqlx::query_scalar("SELECT count(*) FROM agent_specs")
        .fetch_one(&mut conn)
        .await
        .expect("count")
}

#[tokio::test]
async fn a_spec_is_stored_once_and_its_tasks_and_dispatches_name_it_by_digest() {
    use prost::Message as _;
    let (db, store) = store().await;
    let tasks: Vec<NewTask> = (0..3).map(|_| task(None, "d")).collect();
    let bundle = tasks[0].request.spec_bundle();
    let digest = bundle.digest();
    store.insert_tasks(&tasks[..2]).await.expect("insert");
    store.insert_tasks(&tasks[2..]).await.expect("insert again");
    assert_eq!(stored_specs(&db).await, 1, "one row for one spec");
    assert_eq!(
        store.agent_spec(digest).await.expect("read"),
        Some(bundle.clone())
    );
    let other = taskwire_protocol::AgentSpecDigest::of(&pb::AgentSpec::default(), &[]);
    assert_eq!(store.agent_spec(other).await.expect("read"), None);

    // What the relay publishes names the spec instead of carrying it.
    let outbox = store.outbox_pending(10).await.expect("outbox");
    assert_eq!(outbox.len(), 3);
    for row in &outbox {
        let wire = pb::TaskRequest::decode(row.payload.as_slice()).expect("a request");
        assert_eq!(wire.agent_spec, None);
        assert!(wire.subagents.is_empty());
        assert_eq!(wire.agent_spec_digest, digest.as_bytes().to_vec());
        assert!(
            row.payload.len() < bundle.encode().len(),
            "{} bytes",
            row.payload.len()
        );
    }
    // Read back, a task's request has its spec again.
    let read = store
        .task_request(tasks[1].request.task_id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(read, tasks[1].request);
}

#[tokio::test]
async fn an_inline_spec_is_stored_and_dispatched_as_before() {
    use prost::Message as _;
    let (db, store) = store().await;
    let mut t = task(None, "d");
    t.inline_agent_spec = true;
    store.insert_tasks(&[t.clone()]).await.expect("insert");
    assert_eq!(stored_specs(&db).await, 0);
    let outbox = store.outbox_pending(10).await.expect("outbox");
    let wire = pb::TaskRequest::decode(outbox[0].payload.as_slice()).expect("a request");
    assert_eq!(
        wire.agent_spec.as_ref(),
        Some(t.request.agent_spec.as_ref())
    );
    assert_eq!(wire.subagents.len(), 1);
    assert!(wire.agent_spec_digest.is_empty());
    let read = store
        .task_request(t.request.task_id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(read, t.request);
}

#[tokio::test]
async fn same_idempotency_key_returns_the_existing_task_and_a_different_request_conflicts() {
    let (_db, store) = store().await;
    let first = task(Some("k"), "d1");
    let first_id = first.request.task_id;
    store.insert_tasks(&[first]).await.expect("insert");
    let again = store
        .insert_tasks(&[task(Some("k"), "d1")])
        .await
        .expect("insert again");
    assert_eq!(again, vec![InsertOutcome::Existing(first_id)]);
    let other = store
        .insert_tasks(&[task(Some("k"), "d2")])
        .await
        .expect("insert other");
    assert_eq!(other, vec![InsertOutcome::Conflict(first_id)]);
    assert_eq!(
        store.outbox_pending(10).await.expect("outbox").len(),
        1,
        "one dispatch only"
    );
}

#[tokio::test]
async fn duplicate_keys_inside_one_batch_create_one_task() {
    let (_db, store) = store().await;
    let a = task(Some("k"), "d");
    let a_id = a.request.task_id;
    let out = store
        .insert_tasks(&[a, task(Some("k"), "d")])
        .await
        .expect("insert");
    assert_eq!(
        out,
        vec![InsertOutcome::Created(a_id), InsertOutcome::Existing(a_id)]
    );
}

#[tokio::test]
async fn a_title_a_retried_attempt_brought_is_kept_by_a_final_result_without_one() {
    let (_db, store) = store().await;
    let t = task(None, "titled");
    let id = t.request.task_id;
    store.insert_tasks(&[t]).await.expect("insert");
    assert_eq!(
        store
            .get_task(id)
            .await
            .expect("get")
            .expect("exists")
            .title,
        None
    );
    let ClaimOutcome::Granted { epoch: e1, .. } = claim(&store, id).await else {
        panic!("first claim")
    };
    let retried = TaskResult {
        title: Some("Fix the parser".into()),
        ..retryable_failure(id, e1)
    };
    store.record_results(&[retried]).await.expect("record");
    let ClaimOutcome::Granted { epoch: e2, .. } = claim(&store, id).await else {
        panic!("second claim")
    };
    let stale = TaskResult {
        title: Some("Stale title".into()),
        ..result(id, e1, "stale")
    };
    store
        .record_results(&[stale, result(id, e2, "fresh")])
        .await
        .expect("record");
    let rec = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!(rec.status, TaskStatus::Completed);
    assert_eq!(rec.title.as_deref(), Some("Fix the parser"));
}

/// What Postgres counted on the task table: sequential scans, inserts, updates and, of
/// those, the ones written in place (heap-only tuples).
#[derive(Debug, Clone, Copy)]
struct TaskCounts {
    seq_scans: i64,
    inserts: i64,
    updates: i64,
    in_place: i64,
}

/// The task table's counts, once the store's connections have reported what `until`
/// waits for (or after 20 s).
async fn task_counts(
    db: &TestDatabase,
    store: &Store,
    until: impl Fn(&TaskCounts) -> bool,
) -> TaskCounts {
    table_counts(db, store, "tasks", until).await
}

/// [`task_counts`], of the table `table`.
async fn table_counts(
    db: &TestDatabase,
    store: &Store,
    table: &str,
    until: impl Fn(&TaskCounts) -> bool,
) -> TaskCounts {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(db.url())
        .await
        .expect("connect");
    // A backend reports its table counts when it goes idle, at most once a second (or
    // ten seconds later): the store's one connection is kept busy with pings meanwhile.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        store.ping().await.expect("ping");
        sqlx::query("SELECT pg_stat_clear_snapshot()")
            .execute(&mut conn)
            .await
            .expect("clear the stats snapshot");
        let (seq_scans, inserts, updates, in_place): (i64, i64, i64, i64) = sqlx::query_as(
            "SELECT seq_scan, n_tup_ins, n_tup_upd, n_tup_hot_upd \
             FROM pg_stat_user_tables WHERE relname = $1",
        )
        .bind(table)
        .fetch_one(&mut conn)
        .await
        .expect("table stats");
        let counts = TaskCounts {
            seq_scans,
            inserts,
            updates,
            in_place,
        };
        if until(&counts) || std::time::Instant::now() > deadline {
            return counts;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A result batch finds its attempts and tasks by primary key however much the tables
/// grew after its statement first ran, once the grown tables are analysed
/// ([`Store::analyze_grown`], which the coordinator's sweeper calls every second).
/// Planned once on a few rows and kept (a prepared statement's generic plan, kept until
/// the table is next analysed), it read every attempt ever made for each batch.
#[tokio::test]
async fn a_result_batch_scans_no_table_that_grew_after_its_statement_first_ran() {
    // One connection, so that every batch runs on the statement it prepared first.
    let (db, store) = store_with(1).await;
    let pool = sqlx::PgPool::connect(db.url()).await.expect("connect");
    for table in ["tasks", "attempts"] {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE {table} SET (autovacuum_enabled = false)"
        )))
        .execute(&pool)
        .await
        .expect("no analysis during the test");
    }
    // Claims and results of batches of 25, on small tables, more than the five runs
    // after which a prepared statement may keep a generic plan.
    async fn run_batch(store: &Store) -> usize {
        let tasks: Vec<_> = (0..25).map(|_| task(None, "d")).collect();
        let ids: Vec<TaskId> = tasks.iter().map(|t| t.request.task_id).collect();
        store.insert_tasks(&tasks).await.expect("insert");
        let claims: Vec<_> = ids.iter().map(|id| (*id, WorkerId::new("w1"))).collect();
        let outcomes = store.claim_tasks(&claims, None).await.expect("claim");
        let results: Vec<_> = ids
            .iter()
            .zip(outcomes)
            .map(|(id, outcome)| match outcome {
                ClaimOutcome::Granted { epoch, .. } => result(*id, epoch, "done"),
                other => panic!("claim of {id}: {other:?}"),
            })
            .collect();
        let recorded = store.record_results(&results).await.expect("record");
        recorded.iter().filter(|r| **r).count()
    }
    for _ in 0..8 {
        assert_eq!(run_batch(&store).await, 25);
    }
    sqlx::query(
        "WITH t AS ( \
             INSERT INTO tasks (task_id, trace_id, tenant, agent, prompt, status, request_digest, request, finished_at) \
             SELECT gen_random_uuid(), md5(i::text), 'acme', 'general', 'p', 'completed', 'd', '\\x00', now() \
             FROM generate_series(1, 20000) i RETURNING task_id) \
         INSERT INTO attempts (task_id, attempt, claim_epoch, worker_id, status, finished_at) \
         SELECT task_id, 1, 1, 'w0', 'completed', now() FROM t",
    )
    .execute(&pool)
    .await
    .expect("20,000 finished tasks and their attempts");
    let grown = |c: &TaskCounts| c.inserts >= 20_200;
    let before = table_counts(&db, &store, "attempts", grown).await;
    assert!(grown(&before), "the inserts were reported: {before:?}");
    let tasks_before = task_counts(&db, &store, |_| true).await;
    let mut analysed = store.analyze_grown().await.expect("analyse");
    analysed.sort_unstable();
    assert_eq!(
        analysed,
        ["attempts", "tasks"],
        "the grown tables, not the unchanged ones"
    );
    assert_eq!(
        store.analyze_grown().await.expect("analyse"),
        Vec::<&str>::new(),
        "nothing changed since"
    );

    assert_eq!(run_batch(&store).await, 25);
    // The claim's 25 attempt rows, then the result's 25 updates of them.
    let after = table_counts(&db, &store, "attempts", |c| {
        c.updates >= before.updates + 25
    })
    .await;
    assert!(
        after.updates >= before.updates + 25,
        "the attempts' updates were reported: {after:?}"
    );
    assert_eq!(
        after.seq_scans, before.seq_scans,
        "sequential scans of `attempts` by a claim and a result batch"
    );
    let tasks_after = task_counts(&db, &store, |_| true).await;
    assert_eq!(
        tasks_after.seq_scans, tasks_before.seq_scans,
        "sequential scans of `tasks` by a claim and a result batch"
    );
}

#[tokio::test]
async fn claims_and_scheduled_retries_rewrite_the_task_row_in_place() {
    // One connection, which the counters' wait keeps busy until it reports them.
    let (db, store) = store_with(1).await;
    let t = task(None, "d");
    let id = t.request.task_id;
    store.insert_tasks(&[t]).await.expect("insert");
    let ClaimOutcome::Granted { epoch: e1, .. } = claim(&store, id).await else {
        panic!("first claim")
    };
    let retried = retryable_failure(id, e1);
    assert_eq!(
        store.record_results(&[retried]).await.expect("retry"),
        vec![true]
    );
    let ClaimOutcome::Granted { epoch: e2, .. } = claim(&store, id).await else {
        panic!("second claim")
    };
    assert_eq!(
        store
            .record_results(&[result(id, e2, "done")])
            .await
            .expect("record"),
        vec![true]
    );
    // Two claims and the retry leave every indexed column as it was: written in place.
    // The end sets `finished_at`, which takes the task out of the unfinished-task indexes.
    let counts = task_counts(&db, &store, |c| c.updates >= 4).await;
    assert_eq!((counts.updates, counts.in_place), (4, 3));
}

#[tokio::test]
async fn each_claim_gets_a_new_epoch_and_a_stale_result_is_discarded() {
    let (_db, store) = store().await;
    let t = task(None, "d");
    let id = t.request.task_id;
    store.insert_tasks(&[t]).await.expect("insert");
    let ClaimOutcome::Granted {
        epoch: e1,
        attempt: 1,
        ..
    } = claim(&store, id).await
    else {
        panic!("first claim")
    };
    let ClaimOutcome::Granted {
        epoch: e2,
        attempt: 2,
        ..
    } = claim(&store, id).await
    else {
        panic!("second claim")
    };
    assert!(e2 > e1);
    let recorded = store
        .record_results(&[result(id, e1, "stale"), result(id, e2, "fresh")])
        .await
        .expect("record");
    assert_eq!(recorded, vec![false, true]);
    let rec = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!(rec.status, TaskStatus::Completed);
    let recorded = rec.result.expect("result");
    assert_eq!(recorded.text, "fresh");
    assert_eq!(
        recorded.patch, "diff --git a/fresh.txt b/fresh.txt\n",
        "the patch is recorded with the result"
    );
    assert_eq!(
        recorded.provenance[0].uri, "fresh.txt",
        "the provenance is recorded with the result"
    );
    assert_eq!(
        claim(&store, id).await,
        ClaimOutcome::Finished(TaskStatus::Completed)
    );
    assert_eq!(
        store
            .record_results(&[result(id, e2, "again")])
            .await
            .expect("record"),
        vec![false]
    );
}

#[tokio::test]
async fn claim_of_an_overdue_task_finishes_it_instead() {
    let (_db, store) = store().await;
    let mut t = task(None, "d");
    t.request.deadline = Some(Utc::now() - Duration::seconds(1));
    let id = t.request.task_id;
    store.insert_tasks(&[t]).await.expect("insert");
    assert_eq!(
        claim(&store, id).await,
        ClaimOutcome::Ended(TaskStatus::DeadlineExceeded)
    );
    assert_eq!(
        claim(&store, TaskId::generate()).await,
        ClaimOutcome::Unknown
    );
}

#[tokio::test]
async fn one_claim_batch_grants_ends_refuses_and_supersedes_each_task_as_it_stands() {
    let (_db, store) = store().await;
    let mut tasks: Vec<NewTask> = (0..4).map(|_| task(None, "d")).collect();
    tasks[1].request.deadline = Some(Utc::now() - Duration::seconds(1));
    let [fresh, overdue, done, redelivered] = [0, 1, 2, 3].map(|i| tasks[i].request.task_id);
    store.insert_tasks(&tasks).await.expect("insert");
    let ClaimOutcome::Granted { epoch, .. } = claim(&store, done).await else {
        panic!("a queued task is granted")
    };
    store
        .record_results(&[result(done, epoch, "done")])
        .await
        .expect("record");
    let ClaimOutcome::Granted { epoch: first, .. } = claim(&store, redelivered).await else {
        panic!("a queued task is granted")
    };

    let unknown = TaskId::generate();
    let batch: Vec<(TaskId, WorkerId)> = [fresh, overdue, done, redelivered, unknown]
        .iter()
        .map(|id| (*id, WorkerId::new("w2")))
        .collect();
    let outcomes = store.claim_tasks(&batch, None).await.expect("claim");
    assert!(
        matches!(
            outcomes[0],
            ClaimOutcome::Granted {
                epoch: ClaimEpoch(1),
                attempt: 1,
                ..
            }
        ),
        "{:?}",
        outcomes[0]
    );
    assert_eq!(
        outcomes[1],
        ClaimOutcome::Ended(TaskStatus::DeadlineExceeded)
    );
    assert_eq!(outcomes[2], ClaimOutcome::Finished(TaskStatus::Completed));
    let ClaimOutcome::Granted {
        epoch: second,
        attempt: 2,
        ..
    } = outcomes[3]
    else {
        panic!(
            "a redelivery of a running task is granted again: {:?}",
            outcomes[3]
        )
    };
    assert!(second > first);
    assert_eq!(outcomes[4], ClaimOutcome::Unknown);

    let history = |id| {
        let store = store.clone();
        async move {
            let rec = store.get_task(id).await.expect("get").expect("exists");
            let attempts: Vec<(i32, String)> = rec
                .attempts
                .iter()
                .map(|a| (a.attempt, a.status.clone()))
                .collect();
            (rec.status, attempts)
        }
    };
    assert_eq!(
        history(fresh).await,
        (TaskStatus::Running, vec![(1, "running".to_owned())])
    );
    assert_eq!(
        history(overdue).await,
        (TaskStatus::DeadlineExceeded, vec![])
    );
    assert_eq!(
        history(done).await,
        (TaskStatus::Completed, vec![(1, "completed".to_owned())])
    );
    assert_eq!(
        history(redelivered).await,
        (
            TaskStatus::Running,
            vec![(1, "abandoned".to_owned()), (2, "running".to_owned())]
        )
    );
}

#[tokio::test]
async fn cancel_reaches_the_whole_subtree_once() {
    let (_db, store) = store().await;
    let root = task(None, "d");
    let root_id = root.request.task_id;
    let mut child = task(None, "d");
    child.request.parent_task_id = Some(root_id);
    let child_id = child.request.task_id;
    let mut grandchild = task(None, "d");
    grandchild.request.parent_task_id = Some(child_id);
    store
        .insert_tasks(&[root, child, grandchild])
        .await
        .expect("insert");
    let mut cancelled: Vec<TaskId> = store
        .cancel_tree(root_id)
        .await
        .expect("cancel")
        .into_iter()
        .map(|t| t.task_id)
        .collect();
    cancelled.sort();
    assert_eq!(cancelled.len(), 3);
    assert!(
        store
            .cancel_tree(root_id)
            .await
            .expect("cancel again")
            .is_empty()
    );
    let children = store
        .list_tasks(&ListFilter {
            parent_task_id: Some(root_id),
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].task_id, child_id);
    assert_eq!(children[0].status, TaskStatus::Cancelled);
}

#[tokio::test]
async fn a_list_carries_each_tasks_attempts_as_get_does() {
    let (_db, store) = store().await;
    let tasks = [task(None, "d"), task(None, "d")];
    let (ran, waiting) = (tasks[0].request.task_id, tasks[1].request.task_id);
    store.insert_tasks(&tasks).await.expect("insert");
    // Claimed twice: the first attempt abandoned, the second running.
    claim(&store, ran).await;
    claim(&store, ran).await;
    let listed = store
        .list_tasks(&ListFilter::default())
        .await
        .expect("list");
    let attempts = |id| {
        listed
            .iter()
            .find(|t| t.task_id == id)
            .map(|t| t.attempts.clone())
            .expect("listed")
    };
    let got = store.get_task(ran).await.expect("get").expect("exists");
    assert_eq!(got.attempts.len(), 2);
    assert_eq!(attempts(ran), got.attempts);
    assert!(attempts(waiting).is_empty(), "never claimed");
}

fn retryable_failure(id: TaskId, epoch: ClaimEpoch) -> TaskResult {
    TaskResult {
        status: TaskStatus::Error,
        retry_scheduled: true,
        errors: vec![TaskError {
            code: "model".into(),
            message: "model answered 503".into(),
            retryable: true,
        }],
        ..result(id, epoch, "")
    }
}

#[tokio::test]
async fn a_scheduled_retry_requeues_and_the_budget_ends_in_dead_letter_with_history() {
    let (_db, store) = store().await;
    let t = task(None, "d"); // max_attempts: 2
    let id = t.request.task_id;
    store.insert_tasks(&[t]).await.expect("insert");
    let ClaimOutcome::Granted {
        epoch: e1,
        last_attempt: false,
        ..
    } = claim(&store, id).await
    else {
        panic!("first claim is not the last")
    };
    assert_eq!(
        store
            .record_results(&[retryable_failure(id, e1)])
            .await
            .expect("record"),
        vec![true]
    );
    let rec = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!(rec.status, TaskStatus::Queued);
    assert_eq!(rec.last_error.as_deref(), Some("model answered 503"));

    let ClaimOutcome::Granted {
        attempt: 2,
        last_attempt: true,
        ..
    } = claim(&store, id).await
    else {
        panic!("second claim is the last")
    };
    // The worker of attempt 2 vanished: the next delivery finds the budget spent.
    assert_eq!(
        claim(&store, id).await,
        ClaimOutcome::Ended(TaskStatus::DeadLettered)
    );
    let rec = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!(rec.status, TaskStatus::DeadLettered);
    let history: Vec<(i32, &str)> = rec
        .attempts
        .iter()
        .map(|a| (a.attempt, a.status.as_str()))
        .collect();
    assert_eq!(history, vec![(1, "queued"), (2, "running")]);
    assert!(rec.attempts[0].retryable);

    // A replay gives a fresh budget and a new dispatch message.
    store
        .outbox_delete(
            &store
                .outbox_pending(10)
                .await
                .expect("outbox")
                .iter()
                .map(|m| m.id)
                .collect::<Vec<_>>(),
        )
        .await
        .expect("clear outbox");
    assert_eq!(
        store
            .replay_task(id, "t.tasks.default")
            .await
            .expect("replay"),
        ReplayOutcome::Replayed
    );
    let outbox = store.outbox_pending(10).await.expect("outbox");
    assert_eq!(outbox.len(), 1);
    assert_eq!(outbox[0].msg_id, format!("{id}:replay:1"));
    let ClaimOutcome::Granted {
        attempt: 3,
        last_attempt: false,
        ..
    } = claim(&store, id).await
    else {
        panic!("replayed task can be claimed again")
    };
    let rec = store.get_task(id).await.expect("get").expect("exists");
    let history: Vec<(i32, &str)> = rec
        .attempts
        .iter()
        .map(|a| (a.attempt, a.status.as_str()))
        .collect();
    assert_eq!(
        history,
        vec![(1, "queued"), (2, "abandoned"), (3, "running")]
    );
    assert_eq!(
        store
            .replay_task(id, "t.tasks.default")
            .await
            .expect("replay"),
        ReplayOutcome::NotReplayable(TaskStatus::Running)
    );
}

#[tokio::test]
async fn a_tenant_at_its_running_limit_gets_busy_and_others_are_not_held_back() {
    let (_db, store) = store().await;
    let a1 = task(None, "d");
    let a2 = task(None, "d");
    let mut b1 = task(None, "d");
    b1.request.tenant = "other".into();
    let (a1_id, a2_id, b1_id) = (a1.request.task_id, a2.request.task_id, b1.request.task_id);
    store.insert_tasks(&[a1, a2, b1]).await.expect("insert");
    let w = || WorkerId::new("w");
    let out = store
        .claim_tasks(&[(a1_id, w()), (a2_id, w()), (b1_id, w())], Some(1))
        .await
        .expect("claim");
    assert!(matches!(out[0], ClaimOutcome::Granted { .. }), "{out:?}");
    assert_eq!(out[1], ClaimOutcome::Busy);
    assert!(matches!(out[2], ClaimOutcome::Granted { .. }), "{out:?}");
    // A redelivery of the running task keeps its slot; the waiting one is still busy.
    let out = store
        .claim_tasks(&[(a1_id, w()), (a2_id, w())], Some(1))
        .await
        .expect("claim");
    assert!(
        matches!(out[0], ClaimOutcome::Granted { attempt: 2, .. }),
        "{out:?}"
    );
    assert_eq!(out[1], ClaimOutcome::Busy);
    let ClaimOutcome::Granted { epoch, .. } = out[0] else {
        unreachable!("checked above")
    };
    store
        .record_results(&[result(a1_id, epoch, "ok")])
        .await
        .expect("record");
    let out = store
        .claim_tasks(&[(a2_id, w())], Some(1))
        .await
        .expect("claim");
    assert!(
        matches!(out[0], ClaimOutcome::Granted { .. }),
        "a freed slot is taken: {out:?}"
    );
}

#[tokio::test]
async fn a_second_task_on_a_busy_session_waits_for_the_first() {
    let (_db, store) = store().await;
    let session = taskwire_protocol::SessionId::generate();
    let mut first = task(None, "d");
    first.request.resume_token = Some(session);
    let mut second = task(None, "d");
    second.request.resume_token = Some(session);
    let (a, b) = (first.request.task_id, second.request.task_id);
    store.insert_tasks(&[first, second]).await.expect("insert");
    let out = store
        .claim_tasks(&[(a, WorkerId::new("w")), (b, WorkerId::new("w"))], None)
        .await
        .expect("claim");
    assert!(matches!(out[0], ClaimOutcome::Granted { .. }), "{out:?}");
    assert_eq!(out[1], ClaimOutcome::Busy);
    let ClaimOutcome::Granted { epoch, .. } = out[0] else {
        unreachable!("checked above")
    };

    let transcript = serde_json::json!({"messages": [{"role": "user", "text": "hi"}]});
    let write = |epoch| vec![(session, a, epoch, transcript.to_string())];
    assert_eq!(
        store.save_sessions(&write(epoch)).await.expect("save"),
        vec![true]
    );
    let stale = store
        .save_sessions(&write(ClaimEpoch(epoch.0 + 7)))
        .await
        .expect("stale save");
    assert_eq!(stale, vec![false]);
    let loaded = store
        .load_session(session)
        .await
        .expect("load")
        .expect("saved");
    assert_eq!(
        (loaded.tenant.as_str(), loaded.saved_by, loaded.transcript),
        ("acme", a, transcript)
    );

    store
        .record_results(&[result(a, epoch, "done")])
        .await
        .expect("record");
    assert!(
        matches!(claim(&store, b).await, ClaimOutcome::Granted { .. }),
        "the session is free again"
    );
}

#[tokio::test]
async fn an_approval_pauses_the_task_until_answered_once() {
    use taskwire_store::{AnswerOutcome, ApprovalAnswer};
    let (_db, store) = store().await;
    let t = task(None, "d");
    let id = t.request.task_id;
    store.insert_tasks(&[t]).await.expect("insert");
    let ClaimOutcome::Granted { epoch, .. } = claim(&store, id).await else {
        panic!("claim")
    };
    assert!(
        store
            .ask_approval(id, epoch, "r1", "bash", &["rm -rf build".into()], "bash rm")
            .await
            .expect("ask")
    );
    assert_eq!(
        store.task_status(id).await.expect("status"),
        Some(TaskStatus::AwaitingApproval)
    );
    assert!(
        !store
            .ask_approval(id, ClaimEpoch(epoch.0 + 1), "r2", "bash", &[], "x")
            .await
            .expect("stale ask")
    );
    assert_eq!(
        store
            .answer_approval(id, "r1", ApprovalAnswer::Once, None)
            .await
            .expect("answer"),
        AnswerOutcome::Answered
    );
    assert_eq!(
        store.task_status(id).await.expect("status"),
        Some(TaskStatus::Running)
    );
    assert_eq!(
        store
            .answer_approval(id, "r1", ApprovalAnswer::Reject, Some("no"))
            .await
            .expect("answer again"),
        AnswerOutcome::NotPending
    );
}

/// Lookups of caller-named ids take the tenant in the same query: another tenant's
/// task, request, session or trace reads as missing; a session loads only for the task
/// that runs in it.
#[tokio::test]
async fn ids_are_found_only_with_their_tenant() {
    use taskwire_store::SessionLoad;
    let (_db, store) = store().await;
    let mut t = task(None, "d");
    let session = taskwire_protocol::SessionId::generate();
    t.request.resume_token = Some(session);
    let (id, trace) = (t.request.task_id, t.request.trace_id);
    let other = task(None, "d");
    let other_id = other.request.task_id;
    store.insert_tasks(&[t, other]).await.expect("insert");

    for tenant in [None, Some("acme")] {
        assert!(store.get_task_for(tenant, id).await.expect("get").is_some());
        assert!(
            store
                .task_request_for(tenant, id)
                .await
                .expect("req")
                .is_some()
        );
        assert!(
            store
                .session_exists_for(tenant, session)
                .await
                .expect("session")
        );
        assert!(store.trace_exists_for(tenant, trace).await.expect("trace"));
        assert_eq!(
            store
                .session_agent_for(tenant, session)
                .await
                .expect("session agent")
                .as_deref(),
            Some("general"),
            "the session's current agent"
        );
    }
    let globex = Some("globex");
    assert_eq!(
        store
            .session_agent_for(globex, session)
            .await
            .expect("session agent"),
        None
    );
    assert!(store.get_task_for(globex, id).await.expect("get").is_none());
    assert!(
        store
            .task_request_for(globex, id)
            .await
            .expect("req")
            .is_none()
    );
    assert!(
        !store
            .session_exists_for(globex, session)
            .await
            .expect("session")
    );
    assert!(!store.trace_exists_for(globex, trace).await.expect("trace"));
    let unknown = taskwire_protocol::SessionId::generate();
    assert!(
        !store
            .session_exists_for(None, unknown)
            .await
            .expect("unknown")
    );

    // Not saved yet: a new session for its own task, nothing for another task.
    assert_eq!(
        store
            .load_session_for_task(session, id)
            .await
            .expect("load"),
        SessionLoad::New
    );
    assert_eq!(
        store
            .load_session_for_task(session, other_id)
            .await
            .expect("load"),
        SessionLoad::NotFound
    );
    let ClaimOutcome::Granted { epoch, .. } = claim(&store, id).await else {
        panic!("claim")
    };
    let transcript = serde_json::json!({"messages": []});
    // Saving through another task (even a current claim of it) is refused.
    let ClaimOutcome::Granted {
        epoch: other_epoch, ..
    } = claim(&store, other_id).await
    else {
        panic!("claim")
    };
    let stolen = store
        .save_sessions(&[(session, other_id, other_epoch, transcript.to_string())])
        .await
        .expect("save");
    assert_eq!(stolen, vec![false]);
    let saved = store
        .save_sessions(&[(session, id, epoch, transcript.to_string())])
        .await
        .expect("save");
    assert_eq!(saved, vec![true]);
    assert_eq!(
        store
            .load_session_for_task(session, id)
            .await
            .expect("load"),
        SessionLoad::Found {
            transcript,
            saved_by: id
        }
    );
}

/// A root with a queued child, and a finished child holding a queued grandchild.
async fn tree(store: &Store) -> (TaskId, TaskId, TaskId, TaskId) {
    let root = task(None, "d");
    let root_id = root.request.task_id;
    let child = |parent| {
        let mut t = task(None, "d");
        t.request.parent_task_id = Some(parent);
        t
    };
    let (live, done) = (child(root_id), child(root_id));
    let (live_id, done_id) = (live.request.task_id, done.request.task_id);
    let grandchild = child(done_id);
    let grandchild_id = grandchild.request.task_id;
    store
        .insert_tasks(&[root, live, done, grandchild])
        .await
        .expect("insert");
    let ClaimOutcome::Granted { epoch, .. } = claim(store, done_id).await else {
        panic!("the child is claimable")
    };
    store
        .record_results(&[result(done_id, epoch, "done")])
        .await
        .expect("record");
    (root_id, live_id, done_id, grandchild_id)
}

#[tokio::test]
async fn the_live_descendants_of_an_ended_task_are_cancelled_naming_it() {
    let (_db, store) = store().await;
    let (root, live, done, grandchild) = tree(&store).await;
    assert!(
        store
            .cancel_descendants(&[root])
            .await
            .expect("cancel")
            .is_empty(),
        "a live parent keeps its children"
    );

    let ClaimOutcome::Granted { epoch, .. } = claim(&store, root).await else {
        panic!("the root is claimable")
    };
    let mut failed = result(root, epoch, "");
    failed.status = TaskStatus::Error;
    store.record_results(&[failed]).await.expect("record");
    let mut cancelled = store.cancel_descendants(&[root]).await.expect("cancel");
    cancelled.sort_by_key(|c| c.task_id != live);
    let ids: Vec<TaskId> = cancelled.iter().map(|c| c.task_id).collect();
    assert_eq!(ids, [live, grandchild], "the finished child stays finished");
    assert_eq!(
        cancelled[0].reason,
        Some(format!("parent task {root} ended (error)"))
    );
    assert_eq!(
        cancelled[1].reason,
        Some(format!("ancestor task {root} ended (error)"))
    );
    for (id, status) in [
        (live, TaskStatus::Cancelled),
        (grandchild, TaskStatus::Cancelled),
        (done, TaskStatus::Completed),
    ] {
        let record = store.get_task(id).await.expect("get").expect("exists");
        assert_eq!(record.status, status, "{id}");
    }
    let record = store.get_task(live).await.expect("get").expect("exists");
    assert_eq!(record.last_error, cancelled[0].reason);
    assert!(
        store
            .cancel_descendants(&[root])
            .await
            .expect("again")
            .is_empty()
    );
}

#[tokio::test]
async fn ended_tasks_with_live_children_are_found_until_their_children_are_cancelled() {
    let (_db, store) = store().await;
    let (root, _, done, _) = tree(&store).await;
    // The finished child's queued grandchild is an orphan already; the live root's
    // queued child is not.
    assert_eq!(
        store.ended_with_live_children(10).await.expect("find"),
        [done]
    );
    assert!(
        store
            .dead_letter_task(root, "gave up")
            .await
            .expect("dead-letter")
            .is_some()
    );
    let mut found = store.ended_with_live_children(10).await.expect("find");
    found.sort();
    let mut expected = vec![root, done];
    expected.sort();
    assert_eq!(found, expected);
    store.cancel_descendants(&found).await.expect("cancel");
    assert!(
        store
            .ended_with_live_children(10)
            .await
            .expect("find")
            .is_empty()
    );
}

/// Two relays at once (two coordinators) publish disjoint rows: a batch locks what it
/// read until it has deleted what was published; a batch that publishes nothing leaves
/// its rows for the next one.
#[tokio::test]
async fn concurrent_outbox_batches_take_disjoint_rows() {
    let (_db, store) = store().await;
    let tasks: Vec<NewTask> = (0..4).map(|_| task(None, "d")).collect();
    store.insert_tasks(&tasks).await.expect("insert");
    let (hold, release) = tokio::sync::oneshot::channel::<()>();
    let (took, taken) = tokio::sync::oneshot::channel::<Vec<i64>>();
    let first = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .relay_outbox(2, |rows| async move {
                    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
                    took.send(ids.clone()).expect("test waits");
                    release.await.expect("released");
                    ids
                })
                .await
                .expect("first batch")
        }
    });
    let first_ids = taken.await.expect("first batch read");
    let mut second_ids = Vec::new();
    let read = store
        .relay_outbox(10, |rows| {
            second_ids = rows.iter().map(|r| r.id).collect();
            async { Vec::new() } // published nothing: the rows stay
        })
        .await
        .expect("second batch");
    assert_eq!((first_ids.len(), read), (2, 2));
    assert!(
        first_ids.iter().all(|id| !second_ids.contains(id)),
        "{first_ids:?} {second_ids:?}"
    );
    hold.send(()).expect("first batch waits");
    assert_eq!(first.await.expect("joined"), 2);
    let left: Vec<i64> = store
        .outbox_pending(10)
        .await
        .expect("outbox")
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(left, second_ids, "published rows deleted, unpublished kept");
}

/// A coordinator that publishes its own submits' dispatches gets back exactly the rows
/// a scan would have read (same ids, subjects, message ids and payloads), and no
/// relay's scan takes them until the grace has passed; rows written without a grace are
/// scanned at once.
#[tokio::test]
async fn rows_a_writer_relays_itself_are_left_to_it_until_the_grace_passes() {
    let (_db, store) = store().await;
    let own: Vec<NewTask> = (0..3).map(|_| task(None, "d")).collect();
    let grace = std::time::Duration::from_millis(1500);
    let (outcomes, rows) = store
        .insert_tasks_relaying(&own, grace)
        .await
        .expect("insert");
    assert_eq!(outcomes.len(), 3);
    let stored = store.outbox_pending(10).await.expect("outbox");
    let key = |r: &taskwire_store::outbox::OutboxMessage| {
        (
            r.id,
            r.subject.clone(),
            r.msg_id.clone(),
            r.trace_id.clone(),
            r.payload.clone(),
        )
    };
    assert_eq!(
        rows.iter().map(key).collect::<Vec<_>>(),
        stored.iter().map(key).collect::<Vec<_>>(),
        "the rows handed back are the rows written, in the batch's order"
    );
    let own_ids: Vec<i64> = rows.iter().map(|r| r.id).collect();

    // A row another path wrote is scanned at once; the writer's own are skipped.
    let other = task(None, "d");
    store
        .insert_tasks(std::slice::from_ref(&other))
        .await
        .expect("insert");
    let mut scanned = Vec::new();
    store
        .relay_outbox(10, |rows| {
            scanned = rows.iter().map(|r| r.msg_id.clone()).collect();
            async { Vec::new() }
        })
        .await
        .expect("scan");
    assert_eq!(scanned, vec![other.request.task_id.to_string()]);

    // Once the grace has passed (the writer died, or its publish failed), a scan takes them.
    tokio::time::sleep(grace).await;
    let mut scanned = Vec::new();
    store
        .relay_outbox(10, |rows| {
            scanned = rows.iter().map(|r| r.id).collect();
            async { Vec::new() }
        })
        .await
        .expect("scan");
    assert!(
        own_ids.iter().all(|id| scanned.contains(id)) && scanned.len() == 4,
        "{own_ids:?} {scanned:?}"
    );

    // What the writer published it deletes by id.
    store.outbox_delete(&own_ids).await.expect("delete");
    assert_eq!(store.outbox_pending(10).await.expect("outbox").len(), 1);
}

/// An idempotent resubmit writes no row, so none is handed back to publish.
#[tokio::test]
async fn a_resubmit_that_matches_an_existing_task_hands_back_no_row() {
    let (_db, store) = store().await;
    let first = task(Some("k"), "d");
    let grace = std::time::Duration::from_secs(2);
    let (_, rows) = store
        .insert_tasks_relaying(std::slice::from_ref(&first), grace)
        .await
        .expect("insert");
    assert_eq!(rows.len(), 1);
    let (outcomes, rows) = store
        .insert_tasks_relaying(&[task(Some("k"), "d")], grace)
        .await
        .expect("insert again");
    assert_eq!(
        outcomes,
        vec![InsertOutcome::Existing(first.request.task_id)]
    );
    assert!(rows.is_empty(), "{rows:?}");
}

/// A rolling upgrade: a newer version migrated the schema (an additive change, recorded
/// in `_sqlx_migrations`) while coordinators of this version still run and restart.
#[tokio::test]
async fn a_store_connects_and_serves_on_a_schema_a_newer_version_migrated() {
    let (db, store) = store().await;
    let pool = sqlx::PgPool::connect(db.url()).await.expect("connect");
    sqlx::query("ALTER TABLE tasks ADD COLUMN added_by_a_newer_version text")
        .execute(&pool)
        .await
        .expect("the newer version's change");
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99990101000000, 'added by a newer version', true, '\\x00'::bytea, 1)",
    )
    .execute(&pool)
    .await
    .expect("the newer version's migration record");
    drop(store);

    // sqlx's default refuses a database with migrations it does not know. (Its own
    // connection: a refused run leaves the migration lock held until it closes.)
    let strict = sqlx::migrate!("../../migrations");
    let mut conn = pool.acquire().await.expect("connection").detach();
    let refused = strict.run(&mut conn).await.expect_err("refused by default");
    assert!(refused.to_string().contains("99990101000000"), "{refused}");
    sqlx::Connection::close(conn).await.expect("close");

    let store = Store::connect(db.url(), 4)
        .await
        .expect("an older store connects to the newer schema");
    let t = task(None, "d");
    let id = t.request.task_id;
    store.insert_tasks(&[t]).await.expect("insert");
    let ClaimOutcome::Granted { epoch, .. } = claim(&store, id).await else {
        panic!("claim")
    };
    let recorded = store
        .record_results(&[result(id, epoch, "done")])
        .await
        .expect("record");
    assert_eq!(recorded, vec![true]);
    let rec = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!(rec.status, TaskStatus::Completed);
}

#[tokio::test]
async fn a_claim_says_how_long_the_task_waited_and_a_result_how_long_it_ran() {
    let (_db, store) = store().await;
    let t = task(None, "d");
    let id = t.request.task_id;
    store.insert_tasks(&[t]).await.expect("insert");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let ClaimOutcome::Granted { queued_for, .. } = claim(&store, id).await else {
        panic!("claim")
    };
    let waited = queued_for.expect("a queued task waited");
    assert!(waited >= std::time::Duration::from_millis(50), "{waited:?}");
    // A redelivery of the running task did not wait in the queue.
    let ClaimOutcome::Granted {
        epoch, queued_for, ..
    } = claim(&store, id).await
    else {
        panic!("second claim")
    };
    assert_eq!(queued_for, None);
    let recorded = store
        .record_results_timed(&[result(id, epoch, "done")])
        .await
        .expect("record");
    let timing = recorded[0].as_ref().expect("recorded");
    assert_eq!(timing.agent, "general");
    assert!(timing.since_submit >= waited, "{timing:?}");
    assert!(
        timing.since_claim.is_some_and(|c| c <= timing.since_submit),
        "{timing:?}"
    );
    let stale = store
        .record_results_timed(&[result(id, epoch, "again")])
        .await
        .expect("record");
    assert_eq!(stale, vec![None]);
}

#[tokio::test]
async fn the_gauge_counts_follow_running_tasks_and_the_outbox() {
    let (_db, store) = store().await;
    let t = task(None, "d");
    let id = t.request.task_id;
    store.insert_tasks(&[t]).await.expect("insert");
    let counts = store.gauge_counts().await.expect("counts");
    assert_eq!(
        (counts.running, counts.outbox_backlog),
        (0, 1),
        "{counts:?}"
    );
    claim(&store, id).await;
    let counts = store.gauge_counts().await.expect("counts");
    assert_eq!(counts.running, 1, "{counts:?}");
    assert_eq!(counts.awaiting_approval, 0, "{counts:?}");
    store.ping().await.expect("ping");
}

#[tokio::test]
async fn a_subtree_sums_its_tasks_own_usage_and_a_budget_counts_from_its_top() {
    let (_db, store) = store().await;
    // root (unbudgeted) → budgeted (max 100 tokens) → leaf (inherits it)
    let root = task(None, "r");
    let mut budgeted = task(None, "b");
    budgeted.request.parent_task_id = Some(root.request.task_id);
    budgeted.request.budget.max_tokens = Some(100);
    let mut leaf = task(None, "l");
    leaf.request.parent_task_id = Some(budgeted.request.task_id);
    leaf.request.budget.max_tokens = Some(100);
    let ids = [
        root.request.task_id,
        budgeted.request.task_id,
        leaf.request.task_id,
    ];
    store
        .insert_tasks(&[root, budgeted, leaf])
        .await
        .expect("insert");
    for ((id, tokens), children) in ids.iter().zip([1000_u64, 20, 5]).zip([true, true, false]) {
        let ClaimOutcome::Granted { epoch, .. } = claim(&store, *id).await else {
            panic!("claim")
        };
        let mut r = result(*id, epoch, "done");
        r.own_usage = Usage {
            input_tokens: tokens,
            output_tokens: 1,
            cost_picousd: tokens * 1_000,
            unpriced_tokens: 0,
            cache_write_input_tokens: 0,
            cached_input_tokens: 0,
        };
        let recorded = store.record_results_timed(&[r]).await.expect("record");
        let transition = &recorded[0].as_ref().expect("recorded").transition;
        // The result write says whether the task has children: a leaf's end walks nothing.
        assert_eq!(transition.children, Some(children), "task {id}");
    }
    let sums = store.subtree_usage(&ids).await.expect("sums");
    assert_eq!(sums[&ids[0]].input_tokens, 1025);
    assert_eq!(sums[&ids[0]].cost_picousd, 1_025_000);
    assert_eq!(sums[&ids[1]].input_tokens, 25);
    assert_eq!(sums[&ids[2]].input_tokens, 5);
    let leaf = store.get_task(ids[2]).await.expect("get").expect("exists");
    assert_eq!(leaf.own_usage.output_tokens, 1);
    assert_eq!(leaf.budget.max_tokens, Some(100));
    // The leaf's budget is the budgeted task's: its subtree, not the root's.
    let spent = store.budget_spent(ids[2]).await.expect("spent");
    assert_eq!((spent.input_tokens, spent.output_tokens), (25, 2));
    assert_eq!(
        store.budget_spent(ids[0]).await.expect("spent"),
        Usage::default(),
        "no budget, nothing counted"
    );
}

/// A subtree's usage, a cancel of a tree and the cancel of an ended task's children walk
/// the tree through the parent index, whatever Postgres knows of the table: on 20,000
/// tasks it has never analysed (a table that grew since its last analysis), not one
/// sequential scan, where a scan's cost grows with every task ever run.
#[tokio::test]
async fn tree_walks_scan_no_table_however_large_and_unanalysed() {
    // One connection, which the counters' wait keeps busy until it reports them.
    let (db, store) = store_with(1).await;
    let pool = sqlx::PgPool::connect(db.url()).await.expect("connect");
    sqlx::query("ALTER TABLE tasks SET (autovacuum_enabled = false)")
        .execute(&pool)
        .await
        .expect("no analysis during the test");
    // root → child → grandchild, and root → second child.
    let root = task(None, "r");
    let mut child = task(None, "c");
    child.request.parent_task_id = Some(root.request.task_id);
    let mut grandchild = task(None, "g");
    grandchild.request.parent_task_id = Some(child.request.task_id);
    let mut second = task(None, "s");
    second.request.parent_task_id = Some(root.request.task_id);
    let [root_id, child_id, grandchild_id, second_id] =
        [&root, &child, &grandchild, &second].map(|t| t.request.task_id);
    store
        .insert_tasks(&[root, child, grandchild, second])
        .await
        .expect("insert");
    sqlx::query(
        "INSERT INTO tasks (task_id, trace_id, tenant, agent, prompt, status, request_digest, request, finished_at) \
         SELECT gen_random_uuid(), md5(i::text), 'acme', 'general', 'p', 'completed', 'd', '\\x00', now() \
         FROM generate_series(1, 20000) i",
    )
    .execute(&pool)
    .await
    .expect("20,000 finished tasks");
    let before = task_counts(&db, &store, |c| c.inserts >= 20_004).await;
    assert!(
        before.inserts >= 20_004,
        "the inserts were reported: {before:?}"
    );

    let sums = store.subtree_usage(&[root_id]).await.expect("sums");
    assert_eq!(sums[&root_id], Usage::default());
    let cancelled = store
        .cancel_tree(child_id)
        .await
        .expect("cancel the child's tree");
    let mut ids: Vec<TaskId> = cancelled.iter().map(|t| t.task_id).collect();
    ids.sort();
    let mut expected = vec![child_id, grandchild_id];
    expected.sort();
    assert_eq!(ids, expected);
    let ClaimOutcome::Granted { epoch, .. } = claim(&store, root_id).await else {
        panic!("claim the root")
    };
    let recorded = store
        .record_results_timed(&[result(root_id, epoch, "done")])
        .await
        .expect("record");
    let transition = &recorded[0].as_ref().expect("recorded").transition;
    assert_eq!(
        transition.children,
        Some(true),
        "the result write saw the children"
    );
    let orphans = store.cancel_descendants(&[root_id]).await.expect("cancel");
    assert_eq!(
        orphans.iter().map(|t| t.task_id).collect::<Vec<_>>(),
        vec![second_id],
        "the ended root's live child is cancelled, not the finished ones"
    );

    // Two cancels, the claim, the result and the orphan's cancel.
    let after = task_counts(&db, &store, |c| c.updates >= before.updates + 5).await;
    assert!(
        after.updates >= before.updates + 5,
        "the updates were reported"
    );
    assert_eq!(
        after.seq_scans, before.seq_scans,
        "sequential scans of `tasks` during the walks"
    );
}
