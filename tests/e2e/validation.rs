//! Bad submissions are refused with a clear error, and the coordinator keeps serving.

use taskwire_e2e::start;
use taskwire_protocol::pb;
use taskwire_test_support::ScriptedModel;
use tonic::Code;

fn request(agent: &str, prompt: &str) -> pb::SubmitRequest {
    pb::SubmitRequest {
        agent: agent.into(),
        prompt: prompt.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn bad_submissions_are_refused_naming_the_field() {
    let cluster = start(ScriptedModel::echo().await, 1, 2)
        .await
        .expect("cluster");
    let mut client = cluster.client().await.expect("client");

    let err = client
        .submit(request("no-such-agent", "hi"))
        .await
        .expect_err("unknown agent");
    assert_eq!(err.code(), Code::NotFound);
    assert!(
        err.message().contains("agent `no-such-agent`"),
        "{}",
        err.message()
    );

    let err = client
        .submit(request("general", "  "))
        .await
        .expect_err("blank prompt");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("prompt"), "{}", err.message());

    let mut past = request("general", "hi");
    past.deadline = Some(prost_types_now_minus(60));
    let err = client.submit(past).await.expect_err("past deadline");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("deadline"), "{}", err.message());

    let huge = "x".repeat(300 * 1024);
    let err = client
        .submit(request("general", &huge))
        .await
        .expect_err("oversized prompt");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("prompt") && err.message().contains("limit"),
        "{}",
        err.message()
    );

    let err = client
        .get(pb::GetRequest {
            task_id: "not-an-id".into(),
        })
        .await
        .expect_err("bad id");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("task_id"), "{}", err.message());

    // Nothing was written for the refused submits, and a good one still runs.
    let listed = client
        .list(pb::ListRequest::default())
        .await
        .expect("list")
        .into_inner();
    assert!(
        listed.tasks.is_empty(),
        "refused submits left tasks: {:?}",
        listed.tasks
    );
    let id = cluster.submit("general", "hello").await.expect("submit");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed);
    cluster.shutdown().await;
}

fn prost_types_now_minus(secs: i64) -> prost_types::Timestamp {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970");
    prost_types::Timestamp {
        seconds: now.as_secs() as i64 - secs,
        nanos: 0,
    }
}

#[tokio::test]
async fn concurrent_submits_with_one_idempotency_key_create_one_task() {
    let cluster = start(ScriptedModel::echo().await, 1, 2)
        .await
        .expect("cluster");
    let client = cluster.client().await.expect("client");
    let keyed = |prompt: &str| pb::SubmitRequest {
        agent: "general".into(),
        prompt: prompt.into(),
        idempotency_key: "order-42".into(),
        ..Default::default()
    };
    let submits = (0..20).map(|_| {
        let mut client = client.clone();
        let req = keyed("charge the card once");
        async move { client.submit(req).await.map(|r| r.into_inner()) }
    });
    let replies = futures::future::join_all(submits).await;
    let ids: std::collections::HashSet<String> = replies
        .iter()
        .map(|r| r.as_ref().expect("accepted").task_id.clone())
        .collect();
    assert_eq!(ids.len(), 1, "one task for one key: {ids:?}");
    assert_eq!(
        replies
            .iter()
            .filter(|r| r.as_ref().is_ok_and(|r| r.created))
            .count(),
        1
    );

    let mut client = client.clone();
    let err = client
        .submit(keyed("a different request"))
        .await
        .expect_err("same key, other request");
    assert_eq!(err.code(), Code::AlreadyExists);
    let listed = client
        .list(pb::ListRequest::default())
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.tasks.len(), 1);
    cluster.shutdown().await;
}
