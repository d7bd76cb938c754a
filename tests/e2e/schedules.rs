//! Schedules: a task submitted on a cron or interval cadence.
//!
//! - Two coordinators (real processes), one killed (SIGKILL) and restarted, fire a
//!   six-field every-second schedule: each tick's task exists once, no tick between the
//!   first and the last is missing, and each task ran once; the twin does the same
//!   with a parent and two children per tick. The lag from tick to dispatch is printed.
//! - Catch-up after every coordinator was down: `skip` drops the missed ticks, `one`
//!   runs the latest once, `all` runs each.
//! - Overlap with a slow model: `skip`, `allow`, `cancel_previous`, `queue_one`.
//! - Pause, resume, trigger, update, delete; bad input refused naming the field, and
//!   nothing stored.
//! - The DST cases are the timing module's fixed-clock tests
//!   (`crates/coordinator/src/schedules/timing.rs`).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use taskwire_e2e::process::{Process, Taskwire, WorkerOptions, free_addr, wait_serving};
use taskwire_e2e::{PATIENCE, start, start_with};
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_client::TaskServiceClient;
use taskwire_store::Store;
use taskwire_store::schedules::{RunOutcome, ScheduleRun};
use taskwire_test_support::{NatsServer, ScriptedModel, ScriptedReply, SeenRequest, TestDatabase};
use tonic::transport::Channel;

fn every(secs: i64) -> pb::schedule_spec::Cadence {
    pb::schedule_spec::Cadence::Every(prost_types::Duration {
        seconds: secs,
        nanos: 0,
    })
}

fn cron(expr: &str) -> pb::schedule_spec::Cadence {
    pb::schedule_spec::Cadence::Cron(expr.to_owned())
}

fn spec(name: &str, cadence: pb::schedule_spec::Cadence, prompt: &str) -> pb::ScheduleSpec {
    pb::ScheduleSpec {
        name: name.into(),
        cadence: Some(cadence),
        overlap: pb::ScheduleOverlap::Allow as i32,
        task: Some(pb::SubmitRequest {
            agent: "general".into(),
            prompt: prompt.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn create(client: &mut TaskServiceClient<Channel>, spec: pb::ScheduleSpec) -> pb::Schedule {
    client
        .create_schedule(pb::CreateScheduleRequest { spec: Some(spec) })
        .await
        .expect("create schedule")
        .into_inner()
}

async fn pause(client: &mut TaskServiceClient<Channel>, name: &str) -> pb::Schedule {
    client
        .pause_schedule(pb::PauseScheduleRequest {
            name: name.into(),
            tenant: String::new(),
        })
        .await
        .expect("pause")
        .into_inner()
}

/// Every run the store kept for the schedule, oldest first.
async fn runs(store: &Store, name: &str) -> Vec<ScheduleRun> {
    let s = store
        .schedule("default", name)
        .await
        .expect("read schedule")
        .expect("schedule exists");
    let mut runs = store
        .schedule_runs(s.schedule_id, 10_000)
        .await
        .expect("read runs");
    runs.reverse();
    runs
}

fn started(runs: &[ScheduleRun]) -> Vec<&ScheduleRun> {
    runs.iter()
        .filter(|r| r.outcome == RunOutcome::Started)
        .collect()
}

/// Lag from tick to dispatch, in milliseconds, sorted.
fn lags_ms(runs: &[&ScheduleRun]) -> Vec<i64> {
    let mut lags: Vec<i64> = runs
        .iter()
        .map(|r| (r.fired_at - r.tick).num_milliseconds())
        .collect();
    lags.sort_unstable();
    lags
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Ticks missing between consecutive fired ticks of an every-`period` schedule.
fn gaps(ticks: &[DateTime<Utc>], period: i64) -> Vec<(DateTime<Utc>, i64)> {
    ticks
        .windows(2)
        .filter_map(|w| {
            let missing = (w[1] - w[0]).num_seconds() / period - 1;
            (missing > 0).then_some((w[0], missing))
        })
        .collect()
}

async fn list_all(client: &mut TaskServiceClient<Channel>) -> Vec<pb::Task> {
    client
        .list(pb::ListRequest {
            limit: 1000,
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .tasks
}

fn finished(t: &pb::Task) -> bool {
    !matches!(
        t.status(),
        pb::TaskStatus::Unspecified
            | pb::TaskStatus::Scheduled
            | pb::TaskStatus::Queued
            | pb::TaskStatus::Running
            | pb::TaskStatus::AwaitingApproval
    )
}

/// Waits until no task is unfinished.
async fn wait_all_finished(client: &mut TaskServiceClient<Channel>) -> Vec<pb::Task> {
    let until = tokio::time::Instant::now() + PATIENCE * 2;
    loop {
        let tasks = list_all(client).await;
        if tasks.iter().all(finished) {
            return tasks;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "tasks still unfinished: {:?}",
            tasks
                .iter()
                .filter(|t| !finished(t))
                .map(|t| (&t.task_id, t.status()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

struct Fleet {
    taskwire: Taskwire,
    nats: NatsServer,
    db: TestDatabase,
    env: Vec<(&'static str, String)>,
}

impl Fleet {
    fn coordinator(&self, name: &str, addr: SocketAddr) -> Process {
        let env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.taskwire
            .coordinator_with_env(
                name,
                self.db.url(),
                &self.nats.url(),
                addr,
                Duration::from_secs(5),
                &env,
            )
            .expect("coordinator")
    }
}

async fn fleet(env: &[(&'static str, &str)]) -> Fleet {
    taskwire_test_support::init_tracing();
    let mut all: Vec<(&'static str, String)> = vec![
        ("TASKWIRE_NO_TITLES", "true".into()),
        (
            "RUST_LOG",
            "warn,taskwire_coordinator::schedules=info".into(),
        ),
    ];
    all.extend(env.iter().map(|(k, v)| (*k, (*v).to_owned())));
    Fleet {
        taskwire: Taskwire::locate().expect("taskwire binary"),
        nats: NatsServer::start().expect("nats"),
        db: TestDatabase::create().await.expect("database"),
        env: all,
    }
}

async fn fires_once_across_two_coordinators(tree: bool) {
    let f = fleet(&[]).await;
    let model = if tree {
        ScriptedModel::start(taskwire_test_support::scripts::parent_and_two_explorers).await
    } else {
        ScriptedModel::echo().await
    };
    let workspace = tempfile::tempdir().expect("workspace");
    let (a_addr, b_addr) = (free_addr().expect("port"), free_addr().expect("port"));
    let mut a = f.coordinator("coordinator-a", a_addr);
    let mut b = f.coordinator("coordinator-b", b_addr);
    wait_serving(&mut a, a_addr, None).await.expect("a serves");
    let mut client = wait_serving(&mut b, b_addr, None).await.expect("b serves");
    let (nats_url, model_url) = (f.nats.url(), model.base_url());
    let options = WorkerOptions {
        concurrency: 8,
        ..WorkerOptions::new(&nats_url, &model_url, workspace.path())
    };
    let _worker = f.taskwire.worker("worker", &options).expect("worker");

    let (name, cadence, period) = if tree {
        ("tree-every-2s", cron("*/2 * * * * *"), 2)
    } else {
        ("every-second", cron("* * * * * *"), 1)
    };
    let prompt = if tree { "parent" } else { "tick" };
    let created = create(&mut client, spec(name, cadence, prompt)).await;
    assert_eq!(created.next_fires.len(), 5, "{created:?}");

    tokio::time::sleep(Duration::from_secs(4)).await;
    a.kill();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let a2_addr = free_addr().expect("port");
    let mut a2 = f.coordinator("coordinator-a2", a2_addr);
    wait_serving(&mut a2, a2_addr, None)
        .await
        .expect("a restarted serves");
    tokio::time::sleep(Duration::from_secs(4)).await;
    pause(&mut client, name).await;

    let tasks = wait_all_finished(&mut client).await;
    let store = Store::connect(f.db.url(), 2).await.expect("store");
    let runs = runs(&store, name).await;
    let fired = started(&runs);
    let ticks: Vec<DateTime<Utc>> = fired.iter().map(|r| r.tick).collect();
    let distinct: BTreeSet<DateTime<Utc>> = ticks.iter().copied().collect();
    let roots: Vec<&pb::Task> = tasks
        .iter()
        .filter(|t| t.parent_task_id.is_empty())
        .collect();
    let lags = lags_ms(&fired);
    eprintln!(
        "schedule {name}: {} ticks fired, {} tasks, {} duplicates, lag tick->dispatch p50 {} ms p99 {} ms max {} ms",
        ticks.len(),
        roots.len(),
        ticks.len() - distinct.len(),
        percentile(&lags, 0.5),
        percentile(&lags, 0.99),
        lags.last().copied().unwrap_or_default(),
    );
    assert!(
        ticks.len() as i64 >= 10 / period - 1,
        "about 11 s of ticks: {ticks:?}"
    );
    assert_eq!(distinct.len(), ticks.len(), "a tick fired twice");
    assert_eq!(gaps(&ticks, period), vec![], "a tick was missed: {ticks:?}");
    assert_eq!(roots.len(), ticks.len(), "one task per tick");
    let fired_ids: BTreeSet<String> = fired
        .iter()
        .map(|r| r.task_id.expect("a started run has a task").to_string())
        .collect();
    let root_ids: BTreeSet<String> = roots.iter().map(|t| t.task_id.clone()).collect();
    assert_eq!(fired_ids, root_ids, "the runs name the tasks");
    for t in &tasks {
        assert_eq!(t.status(), pb::TaskStatus::Completed, "{t:?}");
        assert_eq!(t.attempts.len(), 1, "ran once: {t:?}");
    }
    if tree {
        for root in &roots {
            let children = tasks
                .iter()
                .filter(|t| t.parent_task_id == root.task_id)
                .count();
            assert_eq!(
                children, 2,
                "each tick's parent started its two children once"
            );
        }
        assert_eq!(tasks.len(), roots.len() * 3);
        // Per tree: the parent's two turns and one turn per child.
        assert_eq!(model.request_count(), roots.len() * 4);
    } else {
        assert_eq!(
            model.request_count(),
            roots.len(),
            "each task called the model once"
        );
    }
    let shown = client
        .get_schedule(pb::GetScheduleRequest {
            name: name.into(),
            tenant: String::new(),
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(shown.fires, ticks.len() as u64);
    assert!(shown.next_fires.is_empty(), "paused: no next fire");
    assert_eq!(shown.recent_runs.len(), 20.min(ticks.len()));
    assert_eq!(
        shown.recent_runs[0].status(),
        pb::TaskStatus::Completed,
        "a run shows its task's status"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_every_second_schedule_fires_each_tick_once_across_two_coordinators_one_killed_and_restarted()
 {
    fires_once_across_two_coordinators(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_schedule_fires_each_tick_once_and_each_parent_starts_its_children_once_across_a_coordinator_kill()
 {
    fires_once_across_two_coordinators(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticks_missed_while_every_coordinator_was_down_follow_the_catch_up_policy() {
    let f = fleet(&[("TASKWIRE_SCHEDULE_GRACE", "1s")]).await;
    let addr = free_addr().expect("port");
    let mut c = f.coordinator("coordinator-1", addr);
    let mut client = wait_serving(&mut c, addr, None).await.expect("serves");
    for policy in [
        pb::ScheduleCatchUp::Skip,
        pb::ScheduleCatchUp::One,
        pb::ScheduleCatchUp::All,
    ] {
        let mut s = spec(policy.as_str_name(), every(1), "tick");
        s.catch_up = policy as i32;
        create(&mut client, s).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    c.kill();
    // Every coordinator down for six ticks.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let addr = free_addr().expect("port");
    let mut c = f.coordinator("coordinator-2", addr);
    let mut client = wait_serving(&mut c, addr, None)
        .await
        .expect("serves again");
    tokio::time::sleep(Duration::from_secs(3)).await;
    for policy in [
        "SCHEDULE_CATCH_UP_SKIP",
        "SCHEDULE_CATCH_UP_ONE",
        "SCHEDULE_CATCH_UP_ALL",
    ] {
        pause(&mut client, policy).await;
    }
    let store = Store::connect(f.db.url(), 2).await.expect("store");
    let grace = chrono::Duration::seconds(1);
    for policy in [
        "SCHEDULE_CATCH_UP_SKIP",
        "SCHEDULE_CATCH_UP_ONE",
        "SCHEDULE_CATCH_UP_ALL",
    ] {
        let runs = runs(&store, policy).await;
        let fired = started(&runs);
        let ticks: Vec<DateTime<Utc>> = fired.iter().map(|r| r.tick).collect();
        let late = fired.iter().filter(|r| r.fired_at - r.tick > grace).count();
        let missing: i64 = gaps(&ticks, 1).iter().map(|(_, n)| n).sum();
        let s = store
            .schedule("default", policy)
            .await
            .expect("read")
            .expect("exists");
        eprintln!(
            "{policy}: {} fired, {late} late (caught up), {missing} missing, skipped_missed {}",
            ticks.len(),
            s.skipped_missed
        );
        assert_eq!(
            missing, s.skipped_missed,
            "{policy}: each missing tick counted as missed"
        );
        match policy {
            "SCHEDULE_CATCH_UP_SKIP" => {
                assert_eq!(late, 0, "skip runs no missed tick: {runs:?}");
                assert!(missing >= 4, "skip dropped the outage's ticks: {ticks:?}");
            }
            "SCHEDULE_CATCH_UP_ONE" => {
                assert_eq!(late, 1, "one runs the latest missed tick once: {runs:?}");
                assert!(missing >= 3, "one dropped the rest: {ticks:?}");
            }
            _ => {
                assert!(late >= 4, "all runs every missed tick: {runs:?}");
                assert_eq!(missing, 0, "all left no tick out: {ticks:?}");
            }
        }
    }
}

/// A model that takes `delay` per answer.
async fn slow_model(delay: Duration) -> ScriptedModel {
    ScriptedModel::start(move |req: &SeenRequest| {
        ScriptedReply::text(format!(
            "done: {}",
            req.first_user_message().unwrap_or_default()
        ))
        .with_delay(delay)
    })
    .await
}

fn window(t: &pb::Task) -> (i64, i64) {
    let a = t.attempts.first().expect("an attempt");
    let ms = |ts: Option<prost_types::Timestamp>| {
        ts.map(|t| t.seconds * 1000 + i64::from(t.nanos) / 1_000_000)
            .unwrap_or(i64::MAX)
    };
    (ms(a.started_at), ms(a.finished_at))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overlap_policies_decide_what_a_tick_does_while_the_previous_run_is_going() {
    let cluster = start_with(slow_model(Duration::from_millis(3500)).await, 1, 8, |c| {
        c.schedule_interval = Duration::from_millis(100);
    })
    .await
    .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let policies = [
        pb::ScheduleOverlap::Skip,
        pb::ScheduleOverlap::Allow,
        pb::ScheduleOverlap::CancelPrevious,
        pb::ScheduleOverlap::QueueOne,
    ];
    for policy in policies {
        let mut s = spec(policy.as_str_name(), every(1), policy.as_str_name());
        s.overlap = policy as i32;
        create(&mut client, s).await;
    }
    tokio::time::sleep(Duration::from_secs(6)).await;
    for policy in policies {
        pause(&mut client, policy.as_str_name()).await;
    }
    let tasks = wait_all_finished(&mut client).await;
    let store = Store::connect(cluster.db.url(), 2).await.expect("store");
    for policy in policies {
        let name = policy.as_str_name();
        let mine: Vec<&pb::Task> = tasks.iter().filter(|t| t.prompt == name).collect();
        let runs = runs(&store, name).await;
        let count = |o: RunOutcome| runs.iter().filter(|r| r.outcome == o).count();
        let s = store
            .schedule("default", name)
            .await
            .expect("read")
            .expect("exists");
        eprintln!(
            "{name}: tasks {:?}, runs {:?}",
            mine.iter().map(|t| t.status()).collect::<Vec<_>>(),
            runs.iter().map(|r| r.outcome).collect::<Vec<_>>()
        );
        match policy {
            pb::ScheduleOverlap::Skip => {
                assert!(count(RunOutcome::SkippedOverlap) >= 2, "{runs:?}");
                assert_eq!(
                    s.skipped_overlap as usize,
                    count(RunOutcome::SkippedOverlap)
                );
                let mut w: Vec<(i64, i64)> = mine.iter().map(|t| window(t)).collect();
                w.sort_unstable();
                for pair in w.windows(2) {
                    assert!(pair[0].1 <= pair[1].0, "skip: runs never overlap: {w:?}");
                }
                assert!(mine.iter().all(|t| t.status() == pb::TaskStatus::Completed));
            }
            pb::ScheduleOverlap::Allow => {
                assert_eq!(count(RunOutcome::SkippedOverlap), 0);
                assert!(mine.len() >= 5, "allow: a task every tick: {}", mine.len());
                let w: Vec<(i64, i64)> = mine.iter().map(|t| window(t)).collect();
                let overlapping = w
                    .iter()
                    .any(|a| w.iter().any(|b| a != b && a.0 < b.1 && b.0 < a.1));
                assert!(overlapping, "allow: runs overlap: {w:?}");
            }
            pb::ScheduleOverlap::CancelPrevious => {
                let cancelled = mine
                    .iter()
                    .filter(|t| t.status() == pb::TaskStatus::Cancelled)
                    .count();
                assert!(mine.len() >= 5, "a task every tick");
                assert_eq!(
                    cancelled,
                    mine.len() - 1,
                    "each run but the last was cancelled by the next tick"
                );
            }
            _ => {
                assert!(
                    count(RunOutcome::SkippedOverlap) >= 1,
                    "one waits, the rest are skipped: {runs:?}"
                );
                let mut w: Vec<(i64, i64)> = mine.iter().map(|t| window(t)).collect();
                w.sort_unstable();
                assert!(w.len() >= 2, "the queued tick ran: {w:?}");
                for pair in w.windows(2) {
                    assert!(
                        pair[0].1 <= pair[1].0,
                        "queue_one: runs never overlap: {w:?}"
                    );
                }
                // The queued tick started soon after the previous run ended.
                let first_end = w[0].1;
                assert!(
                    w[1].0 - first_end < 2000,
                    "the queued tick started once the run ended: {w:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn pause_resume_trigger_update_and_delete_act_on_a_schedule() {
    let cluster = start(ScriptedModel::echo().await, 1, 2)
        .await
        .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let mut s = spec("hourly", cron("0 * * * *"), "hourly report");
    s.time_zone = "Europe/Berlin".into();
    s.task_timeout = Some(prost_types::Duration {
        seconds: 600,
        nanos: 0,
    });
    let created = create(&mut client, s.clone()).await;
    assert_eq!(created.next_fires.len(), 5);
    let gap = |s: &pb::Schedule| s.next_fires[1].seconds - s.next_fires[0].seconds;
    assert_eq!(gap(&created), 3600, "hourly");
    assert_eq!(created.next_fires[0].seconds % 3600, 0, "on the hour");
    let again = client
        .create_schedule(pb::CreateScheduleRequest {
            spec: Some(s.clone()),
        })
        .await
        .expect_err("the name is taken");
    assert_eq!(again.code(), tonic::Code::AlreadyExists);

    let fired = client
        .trigger_schedule(pb::TriggerScheduleRequest {
            name: "hourly".into(),
            tenant: String::new(),
        })
        .await
        .expect("trigger")
        .into_inner();
    let task = cluster
        .wait_finished(&fired.task_id)
        .await
        .expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed);
    let deadline = task
        .deadline
        .expect("task_timeout gives a deadline")
        .seconds;
    let created_at = task.created_at.expect("created").seconds;
    assert!(
        (deadline - created_at - 600).abs() <= 2,
        "deadline = tick + 10m"
    );
    let shown = client
        .get_schedule(pb::GetScheduleRequest {
            name: "hourly".into(),
            tenant: String::new(),
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(shown.fires, 1);
    assert_eq!(
        shown.recent_runs[0].outcome(),
        pb::ScheduleRunOutcome::Triggered
    );
    assert_eq!(shown.recent_runs[0].task_id, fired.task_id);
    assert_eq!(shown.recent_runs[0].status(), pb::TaskStatus::Completed);

    let paused = pause(&mut client, "hourly").await;
    assert!(paused.spec.as_ref().expect("spec").paused);
    assert!(paused.next_fires.is_empty());
    let resumed = client
        .resume_schedule(pb::ResumeScheduleRequest {
            name: "hourly".into(),
            tenant: String::new(),
        })
        .await
        .expect("resume")
        .into_inner();
    assert_eq!(resumed.next_fires.len(), 5);

    s.cadence = Some(every(900));
    let updated = client
        .update_schedule(pb::UpdateScheduleRequest { spec: Some(s) })
        .await
        .expect("update")
        .into_inner();
    assert_eq!(gap(&updated), 900);
    assert_eq!(updated.fires, 1, "an update keeps the counters");

    client
        .delete_schedule(pb::DeleteScheduleRequest {
            name: "hourly".into(),
            tenant: String::new(),
        })
        .await
        .expect("delete");
    let gone = client
        .get_schedule(pb::GetScheduleRequest {
            name: "hourly".into(),
            tenant: String::new(),
        })
        .await
        .expect_err("deleted");
    assert_eq!(gone.code(), tonic::Code::NotFound);
    let task = cluster.wait_finished(&fired.task_id).await.expect("kept");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "its task stays");
}

#[tokio::test]
async fn a_schedule_with_bad_input_is_refused_naming_the_field_and_nothing_is_stored() {
    let cluster = start(ScriptedModel::echo().await, 0, 1)
        .await
        .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let base = spec("bad", cron("* * * * *"), "x");
    let mut cases: Vec<(&str, pb::ScheduleSpec)> = vec![(
        "cron",
        pb::ScheduleSpec {
            cadence: Some(cron("61 * * * *")),
            ..base.clone()
        },
    )];
    cases.push((
        "cron",
        pb::ScheduleSpec {
            cadence: None,
            ..base.clone()
        },
    ));
    cases.push((
        "time_zone",
        pb::ScheduleSpec {
            time_zone: "Mars/Olympus_Mons".into(),
            ..base.clone()
        },
    ));
    cases.push((
        "every",
        pb::ScheduleSpec {
            cadence: Some(pb::schedule_spec::Cadence::Every(prost_types::Duration {
                seconds: 0,
                nanos: 500_000_000,
            })),
            ..base.clone()
        },
    ));
    let mut unknown_agent = base.clone();
    unknown_agent.task.as_mut().expect("task").agent = "nobody".into();
    cases.push(("task.agent", unknown_agent));
    let mut bad_budget = base.clone();
    bad_budget.task.as_mut().expect("task").max_cost_usd = Some(-1.0);
    cases.push(("task.max_cost_usd", bad_budget));
    let mut with_deadline = base.clone();
    with_deadline.task.as_mut().expect("task").deadline = Some(prost_types::Timestamp {
        seconds: 4_000_000_000,
        nanos: 0,
    });
    cases.push(("task.deadline", with_deadline));
    cases.push((
        "name",
        pb::ScheduleSpec {
            name: "no spaces".into(),
            ..base.clone()
        },
    ));
    cases.push((
        "task",
        pb::ScheduleSpec {
            task: None,
            ..base.clone()
        },
    ));
    for (field, s) in cases {
        let err = client
            .create_schedule(pb::CreateScheduleRequest { spec: Some(s) })
            .await
            .expect_err(field);
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{field}: {err:?}");
        assert!(
            err.message().contains(field),
            "the error names {field}: {}",
            err.message()
        );
    }
    let listed = client
        .list_schedules(pb::ListSchedulesRequest::default())
        .await
        .expect("list")
        .into_inner();
    assert!(listed.schedules.is_empty(), "nothing stored: {listed:?}");
    // The coordinator keeps serving.
    create(&mut client, base).await;
}

fn as_tenant<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("ascii"),
    );
    request
}

#[tokio::test]
async fn another_tenants_schedule_is_not_found_and_its_name_is_free() {
    use std::io::Write;
    let mut tokens = tempfile::NamedTempFile::new().expect("tokens file");
    writeln!(
        tokens,
        "[[token]]\ntoken = \"acme-secret\"\ntenant = \"acme\"\nscopes = [\"*\"]\n\n\
         [[token]]\ntoken = \"globex-secret\"\ntenant = \"globex\"\nscopes = [\"*\"]\n"
    )
    .expect("write tokens");
    let path = tokens.path().to_owned();
    let cluster = start_with(ScriptedModel::echo().await, 0, 1, move |c| {
        c.auth_tokens_file = Some(path);
    })
    .await
    .expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let nightly = spec("nightly", cron("0 3 * * *"), "acme's report");
    let created = client
        .create_schedule(as_tenant(
            pb::CreateScheduleRequest {
                spec: Some(nightly.clone()),
            },
            "acme-secret",
        ))
        .await
        .expect("acme creates")
        .into_inner();
    assert_eq!(created.spec.as_ref().expect("spec").tenant, "acme");

    let not_found = |r: Result<tonic::Response<pb::Schedule>, tonic::Status>| {
        assert_eq!(
            r.expect_err("another tenant's").code(),
            tonic::Code::NotFound
        );
    };
    let named = |token| {
        as_tenant(
            pb::GetScheduleRequest {
                name: "nightly".into(),
                tenant: String::new(),
            },
            token,
        )
    };
    not_found(client.get_schedule(named("globex-secret")).await);
    not_found(
        client
            .pause_schedule(as_tenant(
                pb::PauseScheduleRequest {
                    name: "nightly".into(),
                    tenant: String::new(),
                },
                "globex-secret",
            ))
            .await,
    );
    let trigger = client
        .trigger_schedule(as_tenant(
            pb::TriggerScheduleRequest {
                name: "nightly".into(),
                tenant: String::new(),
            },
            "globex-secret",
        ))
        .await
        .expect_err("globex cannot trigger acme's");
    assert_eq!(trigger.code(), tonic::Code::NotFound);
    let named_other = client
        .get_schedule(as_tenant(
            pb::GetScheduleRequest {
                name: "nightly".into(),
                tenant: "acme".into(),
            },
            "globex-secret",
        ))
        .await
        .expect_err("a token acts for its own tenant only");
    assert_eq!(named_other.code(), tonic::Code::PermissionDenied);
    let listed = client
        .list_schedules(as_tenant(
            pb::ListSchedulesRequest::default(),
            "globex-secret",
        ))
        .await
        .expect("list")
        .into_inner();
    assert!(listed.schedules.is_empty(), "globex sees none");

    // The name is per tenant.
    let theirs = client
        .create_schedule(as_tenant(
            pb::CreateScheduleRequest {
                spec: Some(nightly),
            },
            "globex-secret",
        ))
        .await
        .expect("globex creates its own")
        .into_inner();
    assert_ne!(theirs.schedule_id, created.schedule_id);
    let still = client
        .get_schedule(named("acme-secret"))
        .await
        .expect("acme's is untouched")
        .into_inner();
    assert!(!still.spec.expect("spec").paused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedule_commands_create_show_trigger_pause_and_remove_a_schedule() {
    let cluster = start(ScriptedModel::echo().await, 1, 2)
        .await
        .expect("cluster");
    let taskwire = Taskwire::locate().expect("taskwire binary");
    let url = cluster.url();
    let run = |name: &'static str, args: &[&str]| {
        let taskwire = &taskwire;
        let url = url.clone();
        let mut args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        async move {
            args.extend(["--addr".to_owned(), url]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let p = taskwire.run(name, &args, &[]).await.expect(name);
            (p.stdout(), p.stderr())
        }
    };
    let (out, err) = run(
        "create",
        &[
            "schedule",
            "create",
            "nightly",
            "--cron",
            "30 2 * * *",
            "--tz",
            "America/New_York",
            "--overlap",
            "queue_one",
            "--catch-up",
            "one",
            "--agent",
            "general",
            "--deadline",
            "45m",
            "nightly",
            "report",
        ],
    )
    .await;
    assert!(
        out.contains("nightly"),
        "create shows the schedule: {out}{err}"
    );
    assert!(out.contains("America/New_York"), "{out}");
    assert!(out.contains("queue_one"), "{out}");

    let (out, err) = run("ls", &["schedule", "ls"]).await;
    assert!(
        out.contains("nightly") && out.contains("30 2 * * *"),
        "{out}{err}"
    );

    let (out, err) = run("trigger", &["schedule", "trigger", "nightly", "--wait"]).await;
    assert!(
        out.contains("echo: nightly report"),
        "trigger --wait prints the result: {out}{err}"
    );

    let (out, err) = run("get", &["schedule", "get", "nightly", "--output", "json"]).await;
    let shown: serde_json::Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("one JSON value ({e}):\n{out}\n{err}"));
    assert_eq!(shown["recent_runs"][0]["outcome"], "triggered", "{shown}");
    assert_eq!(shown["recent_runs"][0]["status"], "completed", "{shown}");
    assert_eq!(shown["fires"], 1, "{shown}");
    let next = shown["next_fires"].as_array().expect("next fires");
    assert_eq!(next.len(), 5, "{shown}");

    let (out, err) = run("pause", &["schedule", "pause", "nightly"]).await;
    assert!(out.contains("paused"), "{out}{err}");
    let (_, err) = run("rm", &["schedule", "rm", "nightly"]).await;
    assert!(err.contains("deleted schedule nightly"), "{err}");
    let (out, err) = run("get-gone", &["schedule", "get", "nightly"]).await;
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("not_found") || err.contains("not found"),
        "{err}"
    );

    let (_, err) = run(
        "bad-tz",
        &[
            "schedule",
            "create",
            "bad",
            "--cron",
            "* * * * *",
            "--tz",
            "Mars/Base",
            "--agent",
            "general",
            "x",
        ],
    )
    .await;
    assert!(
        err.contains("time_zone"),
        "the error names the field: {err}"
    );
}
