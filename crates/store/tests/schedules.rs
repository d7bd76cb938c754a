//! The schedule fire transaction: one coordinator's lock keeps another off a tick, and
//! a fire that rolls back leaves nothing behind.

use chrono::{Duration, SubsecRound, Utc};
use taskwire_store::InsertOutcome;
use taskwire_store::schedules::{Advance, FireOf, NewRun, RunOutcome, ScheduleSpecRow, tick_key};

mod common;
use common::{store, task};

fn every_second(tenant: &str, name: &str) -> ScheduleSpecRow {
    ScheduleSpecRow {
        tenant: tenant.to_owned(),
        name: name.to_owned(),
        cron: None,
        every_ms: Some(1000),
        time_zone: "UTC".to_owned(),
        overlap: "allow".to_owned(),
        catch_up: "skip".to_owned(),
        catch_up_window_ms: 3_600_000,
        task_timeout_ms: None,
        task: Vec::new(),
        paused: false,
    }
}

#[tokio::test]
async fn a_schedule_being_fired_is_skipped_by_another_coordinators_pass() {
    let (_db, store) = store().await;
    let id = uuid::Uuid::now_v7();
    let past = Utc::now().trunc_subsecs(0) - Duration::seconds(1);
    assert!(
        store
            .create_schedule(id, &every_second("default", "s"), Some(past))
            .await
            .expect("create")
    );
    assert!(
        !store
            .create_schedule(uuid::Uuid::now_v7(), &every_second("default", "s"), None)
            .await
            .expect("create again"),
        "a name is unique within its tenant"
    );
    assert_eq!(store.due_schedules(10).await.expect("scan"), vec![id]);

    let mut first = store
        .begin_fire(FireOf::Due(id))
        .await
        .expect("lock")
        .expect("due");
    assert!(
        store
            .begin_fire(FireOf::Due(id))
            .await
            .expect("lock")
            .is_none(),
        "a second pass skips the locked schedule"
    );
    let tick = first.schedule.next_fire_at.expect("next");
    let mut t = task(Some(&tick_key(id, tick)), "d");
    t.request.tenant = "default".to_owned();
    let task_id = t.request.task_id;
    assert_eq!(
        first.insert_tasks(&[t]).await.expect("insert"),
        vec![InsertOutcome::Created(task_id)]
    );
    first.record(NewRun {
        tick,
        outcome: RunOutcome::Started,
        task_id: Some(task_id),
        reason: String::new(),
    });
    let next = tick + Duration::hours(1);
    first
        .commit(Advance {
            next_fire_at: Some(next),
            last_tick: Some(tick),
            last_task_id: Some(task_id),
            fires: 1,
            moves_cadence: true,
            ..Advance::default()
        })
        .await
        .expect("commit");

    assert!(
        store
            .begin_fire(FireOf::Due(id))
            .await
            .expect("lock")
            .is_none(),
        "moved past the tick: no longer due"
    );
    let s = store
        .schedule("default", "s")
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(
        (s.fires, s.next_fire_at, s.last_tick),
        (1, Some(next), Some(tick))
    );
    let runs = store.schedule_runs(id, 10).await.expect("runs");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].task_id, Some(task_id));
    assert_eq!(runs[0].status, Some(taskwire_protocol::TaskStatus::Queued));
}

#[tokio::test]
async fn a_fire_that_rolls_back_leaves_no_task_run_or_advance() {
    let (_db, store) = store().await;
    let id = uuid::Uuid::now_v7();
    let past = Utc::now().trunc_subsecs(0) - Duration::seconds(1);
    store
        .create_schedule(id, &every_second("default", "s"), Some(past))
        .await
        .expect("create");
    let mut fire = store
        .begin_fire(FireOf::Due(id))
        .await
        .expect("lock")
        .expect("due");
    let mut t = task(Some(&tick_key(id, past)), "d");
    t.request.tenant = "default".to_owned();
    let task_id = t.request.task_id;
    fire.insert_tasks(&[t]).await.expect("insert");
    fire.record(NewRun {
        tick: past,
        outcome: RunOutcome::Started,
        task_id: Some(task_id),
        reason: String::new(),
    });
    // The coordinator dies before its commit.
    drop(fire);
    assert!(
        store.get_task(task_id).await.expect("get").is_none(),
        "no task"
    );
    assert!(store.schedule_runs(id, 10).await.expect("runs").is_empty());
    let again = store
        .begin_fire(FireOf::Due(id))
        .await
        .expect("lock")
        .expect("still due: the next pass fires the same tick");
    assert_eq!(again.schedule.next_fire_at, Some(past));
}
