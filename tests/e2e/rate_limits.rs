//! Rate limits held by the fleet: two workers, each with its own budget store over the
//! deployment's limits bucket, against a model server that throttles above 10
//! requests a second (`429`, `Retry-After: 1`, `x-ratelimit-*`) and logs every
//! arrival. With the model's `requests_per_minute` in the catalogue nothing is
//! throttled; without it the rate is learned from the 429s, and no worker sends while
//! a `Retry-After` runs.

use taskwire_e2e::{Cluster, start};
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

const TASKS: usize = 50;
const WORKERS: [&str; 2] = ["w1", "w2"];

fn is_title(req: &SeenRequest) -> bool {
    req.messages.first().is_some_and(|m| {
        m.role == "system" && m.content == taskwire_definitions::builtin::title().prompt
    })
}

async fn throttling_model() -> ScriptedModel {
    ScriptedModel::rate_limited(10, |req: &SeenRequest| {
        if is_title(req) {
            ScriptedReply::text("A title")
        } else {
            ScriptedReply::text("done")
        }
    })
    .await
}

/// Two workers with titles on, the model's catalogue entry from `entry`.
async fn fleet(model: ScriptedModel, entry: serde_json::Value) -> Cluster {
    let catalogue: taskwire_llm::ModelCatalogue =
        serde_json::from_value(serde_json::json!({ "scripted": entry })).expect("catalogue");
    let mut cluster = start(model, 0, 1).await.expect("cluster");
    for name in WORKERS {
        let catalogue = catalogue.clone();
        cluster.add_worker_with(name, 16, move |c| {
            c.titles = true;
            c.models = catalogue;
        });
    }
    cluster
}

/// Submits [`TASKS`] root tasks at once and waits for them all; how many got a title.
async fn run_all(cluster: &Cluster) -> usize {
    let mut ids = Vec::new();
    for i in 0..TASKS {
        ids.push(
            cluster
                .submit("general", &format!("task {i}"))
                .await
                .expect("submit"),
        );
    }
    let mut titled = 0;
    for id in &ids {
        let task = cluster.wait_finished(id).await.expect("finished");
        assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
        titled += usize::from(!task.title.is_empty());
    }
    titled
}

#[tokio::test]
async fn two_workers_keep_a_configured_rate_between_them_and_nothing_is_throttled() {
    let model = throttling_model().await;
    let cluster = fleet(
        model,
        serde_json::json!({"context_window": 100000, "input_usd_per_mtok": 0,
                           "output_usd_per_mtok": 0, "requests_per_minute": 540}),
    )
    .await;
    let started = std::time::Instant::now();
    let titled = run_all(&cluster).await;
    let report = cluster.model.rate_report();
    eprintln!(
        "{TASKS} tasks on {WORKERS:?} in {:?}: {report:?}, {titled} titles",
        started.elapsed()
    );
    assert_eq!(report.throttled, 0, "{report:?}");
    assert!(report.peak_per_second <= 10, "{report:?}");
    assert_eq!(
        report.accepted,
        2 * TASKS,
        "a call and a title each: {report:?}"
    );
    assert_eq!(titled, TASKS, "every title written");
}

#[tokio::test]
async fn without_a_configured_rate_the_fleet_learns_it_and_keeps_every_retry_after() {
    let model = throttling_model().await;
    let cluster = fleet(
        model,
        serde_json::json!({"context_window": 100000, "input_usd_per_mtok": 0,
                           "output_usd_per_mtok": 0}),
    )
    .await;
    let started = std::time::Instant::now();
    let titled = run_all(&cluster).await;
    let report = cluster.model.rate_report();
    eprintln!(
        "{TASKS} tasks on {WORKERS:?} in {:?}: {report:?}, {titled} titles",
        started.elapsed()
    );
    assert_eq!(
        report.early, 0,
        "no request while a Retry-After ran: {report:?}"
    );
    assert_eq!(report.accepted, 2 * TASKS, "{report:?}");
    assert!(
        report.sent <= 2 * (2 * TASKS),
        "at most one wasted request per useful call, the first burst's included: {report:?}"
    );
    assert_eq!(titled, TASKS, "every title written");
}

#[tokio::test]
async fn a_call_waiting_for_its_slot_shows_as_awaiting_rate_limit_in_get_and_watch() {
    let model = ScriptedModel::start(|_: &SeenRequest| ScriptedReply::text("done")).await;
    let catalogue: taskwire_llm::ModelCatalogue = serde_json::from_value(serde_json::json!({
        "scripted": {"context_window": 100000, "input_usd_per_mtok": 0,
                     "output_usd_per_mtok": 0, "requests_per_minute": 12}
    }))
    .expect("catalogue");
    let mut cluster = start(model, 0, 1).await.expect("cluster");
    cluster.add_worker_with("w", 4, move |c| c.models = catalogue);
    let first = cluster.submit("general", "first").await.expect("submit");
    cluster.wait_finished(&first).await.expect("first finished");
    // The next call of the model may go five seconds after the first.
    let second = cluster.submit("general", "second").await.expect("submit");
    let mut client = cluster.client().await.expect("client");
    let waiting = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        loop {
            let task = client
                .get(pb::GetRequest {
                    task_id: second.clone(),
                })
                .await
                .expect("get")
                .into_inner();
            if !task.wait.is_empty() {
                return task;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the second task shows its wait");
    assert_eq!(waiting.wait, "awaiting_rate_limit");
    assert_eq!(waiting.status(), pb::TaskStatus::Running);
    let until = std::time::SystemTime::try_from(waiting.wait_until.expect("until")).expect("time");
    assert!(until > std::time::SystemTime::now(), "{waiting:?}");
    let done = cluster
        .wait_finished(&second)
        .await
        .expect("second finished");
    assert_eq!(done.status(), pb::TaskStatus::Completed);
    assert!(done.wait.is_empty(), "a finished task waits for nothing");
}
