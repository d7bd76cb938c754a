//! Task priorities: 1 (highest) to 5 (lowest), 3 by default; a child keeps or lowers
//! its parent's; they show in `get` and `ls`, and order the model calls that wait for
//! a slot in a model's rate budget.

use serde_json::json;
use taskwire_e2e::start;
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

async fn submit(
    client: &mut pb::task_service_client::TaskServiceClient<tonic::transport::Channel>,
    agent: &str,
    prompt: &str,
    priority: u32,
    parent: &str,
) -> Result<String, tonic::Status> {
    client
        .submit(pb::SubmitRequest {
            agent: agent.into(),
            prompt: prompt.into(),
            priority,
            parent_task_id: parent.into(),
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner().task_id)
}

#[tokio::test]
async fn priorities_are_checked_inherited_and_shown() {
    let model = ScriptedModel::start(|req: &SeenRequest| {
        let child = req
            .first_user_message()
            .unwrap_or_default()
            .starts_with("child");
        match (child, req.assistant_turns()) {
            (false, 0) => ScriptedReply::tool_calls([(
                "t1",
                "task",
                json!({"description": "look", "prompt": "child: look", "subagent_type": "general"}),
            )]),
            _ => ScriptedReply::text("done"),
        }
    })
    .await;
    let cluster = start(model, 1, 2).await.expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let err = submit(&mut client, "general", "x", 6, "")
        .await
        .expect_err("out of range");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("priority"), "{}", err.message());

    let root = submit(&mut client, "general", "delegate", 2, "")
        .await
        .expect("submit");
    let task = cluster.wait_finished(&root).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    assert_eq!(task.priority, 2);
    let children = cluster.children(&root).await.expect("children");
    assert_eq!(children.len(), 1);
    assert_eq!(
        children[0].priority, 2,
        "a child runs at its parent's priority"
    );

    let default = submit(&mut client, "general", "child: plain", 0, "")
        .await
        .expect("submit");
    let task = cluster.wait_finished(&default).await.expect("finished");
    assert_eq!(task.priority, 3, "the default");
}

#[tokio::test]
async fn a_high_priority_call_takes_a_rate_limit_slot_ahead_of_waiting_low_ones() {
    let model = ScriptedModel::start(|_: &SeenRequest| ScriptedReply::text("done")).await;
    let catalogue: taskwire_llm::ModelCatalogue = serde_json::from_value(json!({
        "scripted": {"context_window": 100000, "input_usd_per_mtok": 0,
                     "output_usd_per_mtok": 0, "requests_per_minute": 120}
    }))
    .expect("catalogue");
    let mut cluster = start(model, 0, 1).await.expect("cluster");
    cluster.add_worker_with("w", 16, move |c| c.models = catalogue);
    let mut client = cluster.client().await.expect("client");
    let mut ids = Vec::new();
    for i in 0..8 {
        ids.push(
            submit(&mut client, "general", &format!("low {i}"), 5, "")
                .await
                .expect("submit"),
        );
    }
    // Let the low ones reserve what their priority may (two seconds ahead).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    ids.push(
        submit(&mut client, "general", "high", 1, "")
            .await
            .expect("submit"),
    );
    for id in &ids {
        let task = cluster.wait_finished(id).await.expect("finished");
        assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    }
    let order: Vec<String> = cluster
        .model
        .requests()
        .iter()
        .map(|r| r.first_user_message().unwrap_or_default().to_owned())
        .collect();
    let high = order
        .iter()
        .position(|p| p == "high")
        .expect("the high task called");
    assert!(
        high < order.len() - 1,
        "low-priority calls waiting since before it went after it: {order:?}"
    );
    assert!(high <= 6, "{order:?}");
}

#[tokio::test]
async fn with_a_dispatch_window_a_backlog_runs_by_priority_and_tenants_take_turns() {
    let gate = taskwire_test_support::Gate::new();
    let held = gate.clone();
    let model = ScriptedModel::start(move |req: &SeenRequest| {
        let reply = ScriptedReply::text("done");
        if req.first_user_message() == Some("blocker") {
            reply.with_gate(&held)
        } else {
            reply
        }
    })
    .await;
    let mut cluster = taskwire_e2e::start_with(model, 0, 1, |c| c.dispatch_window = 1)
        .await
        .expect("cluster");
    cluster.add_worker("w", 1);
    let mut client = cluster.client().await.expect("client");
    let mut submit_as = async |tenant: &str, prompt: &str, priority: u32| {
        client
            .submit(pb::SubmitRequest {
                agent: "general".into(),
                prompt: prompt.into(),
                tenant: tenant.into(),
                priority,
                ..Default::default()
            })
            .await
            .expect("submit")
            .into_inner()
            .task_id
    };
    let mut ids = vec![submit_as("a", "blocker", 3).await];
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while cluster.model.request_count() == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the blocker runs");
    for i in 0..4 {
        ids.push(submit_as("a", &format!("a-low-{i}"), 4).await);
    }
    // The window (one undelivered task) takes the first of them: the stream holds the
    // blocker (running) and it.
    let js =
        async_nats::jetstream::new(async_nats::connect(cluster.nats.url()).await.expect("nats"));
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            let mut stream = js.get_stream("TASKWIRE_TASKS").await.expect("stream");
            if stream.info().await.expect("info").state.messages == 2 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the first low task was dispatched");
    // Nothing more is dispatched while the worker is busy.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mut stream = js.get_stream("TASKWIRE_TASKS").await.expect("stream");
    assert_eq!(stream.info().await.expect("info").state.messages, 2);
    ids.push(submit_as("b", "b-low", 4).await);
    ids.push(submit_as("a", "high", 2).await);
    gate.open();
    for id in &ids {
        let task = cluster.wait_finished(id).await.expect("finished");
        assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
    }
    let order: Vec<String> = cluster
        .model
        .requests()
        .iter()
        .map(|r| r.first_user_message().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        order,
        [
            "blocker", "a-low-0", "high", "a-low-1", "b-low", "a-low-2", "a-low-3"
        ],
        "the high one first, then the tenants of priority 4 take turns"
    );
}
