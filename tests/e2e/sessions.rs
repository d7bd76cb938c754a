//! Sessions: `ask` permissions pause a task until answered (or time out as a deny), and
//! a task submitted with a session's resume token continues its history.

use std::time::Duration;

use futures::StreamExt;
use taskwire_e2e::{Cluster, created_in_patch, start, wait_for};
use taskwire_protocol::pb;
use taskwire_test_support::{ScriptedModel, ScriptedReply, SeenRequest};

/// `plan` asks before running a command that is not read-only.
fn touch_then_report(req: &SeenRequest) -> ScriptedReply {
    match req.assistant_turns() {
        0 => ScriptedReply::tool_calls([(
            "b1",
            "bash",
            serde_json::json!({"command": "touch approved.txt", "description": "create a file"}),
        )]),
        _ => {
            let tool = req
                .messages
                .iter()
                .rev()
                .find(|m| m.role == "tool")
                .map(|m| m.content.clone());
            ScriptedReply::text(format!("bash said: {}", tool.unwrap_or_default()))
        }
    }
}

async fn plan_cluster(approval_timeout: Duration) -> Cluster {
    let mut cluster = start(ScriptedModel::start(touch_then_report).await, 0, 1)
        .await
        .expect("cluster");
    cluster.add_worker_with("w", 2, |c| c.approval_timeout = approval_timeout);
    cluster
}

/// Submits to `plan`, waits for its approval request; returns the task id, the request
/// id and the still-open watch stream.
async fn submit_and_wait_for_ask(
    cluster: &Cluster,
) -> (String, String, tonic::Streaming<pb::WatchEvent>) {
    let mut client = cluster.client().await.expect("client");
    let id = cluster
        .submit("plan", "make the file")
        .await
        .expect("submit");
    let mut stream = client
        .watch(pb::WatchRequest {
            task_id: id.clone(),
        })
        .await
        .expect("watch")
        .into_inner();
    let request_id = tokio::time::timeout(taskwire_e2e::PATIENCE, async {
        while let Some(ev) = stream.next().await {
            if let Some(pb::watch_event::Event::Progress(p)) = ev.expect("event").event
                && let Some(pb::task_progress::Event::ApprovalRequired(a)) = p.event
            {
                assert_eq!(a.permission, "bash");
                assert_eq!(a.patterns, vec!["touch approved.txt".to_owned()]);
                return a.request_id;
            }
        }
        panic!("the watch ended without an approval request")
    })
    .await
    .expect("approval requested in time");
    (id, request_id, stream)
}

async fn result_of(mut stream: tonic::Streaming<pb::WatchEvent>) -> pb::TaskResult {
    tokio::time::timeout(taskwire_e2e::PATIENCE, async {
        while let Some(ev) = stream.next().await {
            if let Some(pb::watch_event::Event::Result(r)) = ev.expect("event").event {
                return r;
            }
        }
        panic!("the watch ended without a result")
    })
    .await
    .expect("result in time")
}

#[tokio::test]
async fn an_ask_waits_for_approval_and_continues_when_approved() {
    let cluster = plan_cluster(Duration::from_secs(60)).await;
    let (id, request_id, stream) = submit_and_wait_for_ask(&cluster).await;
    wait_for(&cluster, &id, "awaiting_approval", |t| {
        t.status() == pb::TaskStatus::AwaitingApproval
    })
    .await
    .expect("awaiting approval");
    let workspace = cluster.task_workspace(&id).expect("the task's workspace");
    assert!(
        !workspace.join("approved.txt").exists(),
        "nothing ran before the answer"
    );

    let mut client = cluster.client().await.expect("client");
    let answered = client
        .approve(pb::ApproveRequest {
            task_id: id.clone(),
            request_id: request_id.clone(),
            answer: pb::ApprovalAnswer::Once as i32,
            message: String::new(),
        })
        .await
        .expect("approve")
        .into_inner();
    assert_eq!(answered.status(), pb::TaskStatus::Running);
    let result = result_of(stream).await;
    assert_eq!(result.status(), pb::TaskStatus::Completed);
    assert!(
        created_in_patch(&result.patch, "approved.txt").is_some(),
        "the approved command ran: {}",
        result.patch
    );

    let err = client
        .approve(pb::ApproveRequest {
            task_id: id,
            request_id,
            answer: pb::ApprovalAnswer::Once as i32,
            message: String::new(),
        })
        .await
        .expect_err("answered already");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_rejected_ask_feeds_the_message_back_to_the_model() {
    let cluster = plan_cluster(Duration::from_secs(60)).await;
    let (id, request_id, stream) = submit_and_wait_for_ask(&cluster).await;
    let mut client = cluster.client().await.expect("client");
    client
        .approve(pb::ApproveRequest {
            task_id: id,
            request_id,
            answer: pb::ApprovalAnswer::Reject as i32,
            message: "not in this repository".into(),
        })
        .await
        .expect("reject");
    let result = result_of(stream).await;
    let text = result.output.expect("output").text;
    assert!(text.contains("not in this repository"), "{text}");
    assert_eq!(result.patch, "", "nothing ran");
    cluster.shutdown().await;
}

#[tokio::test]
async fn an_unanswered_ask_times_out_as_a_deny() {
    let cluster = plan_cluster(Duration::from_millis(500)).await;
    let (id, _request_id, stream) = submit_and_wait_for_ask(&cluster).await;
    let result = result_of(stream).await;
    assert_eq!(result.status(), pb::TaskStatus::Completed);
    let text = result.output.expect("output").text;
    assert!(
        text.contains("timed out"),
        "the model saw the timeout as a tool error: {text}"
    );
    assert_eq!(result.patch, "", "nothing ran");
    let task = cluster.wait_finished(&id).await.expect("finished");
    assert_eq!(task.status(), pb::TaskStatus::Completed);
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_task_with_a_resume_token_continues_the_session_history() {
    let model = ScriptedModel::start(|req: &SeenRequest| {
        let users: Vec<&str> = req
            .messages
            .iter()
            .filter(|m| m.role == "user")
            .map(|m| m.content.as_str())
            .collect();
        match users.as_slice() {
            [first] if first.contains("remember the number 42") => ScriptedReply::text("noted: 42"),
            [first, .., last]
                if first.contains("remember the number 42") && last.contains("what number") =>
            {
                let remembered = req
                    .messages
                    .iter()
                    .any(|m| m.role == "assistant" && m.content == "noted: 42");
                ScriptedReply::text(if remembered {
                    "you said 42"
                } else {
                    "history lost"
                })
            }
            _ => ScriptedReply::text("unexpected conversation"),
        }
    })
    .await;
    let cluster = start(model, 1, 2).await.expect("cluster");
    let mut client = cluster.client().await.expect("client");
    let first = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: "remember the number 42".into(),
            ..Default::default()
        })
        .await
        .expect("submit")
        .into_inner();
    assert!(!first.session_id.is_empty());
    let done = cluster
        .wait_finished(&first.task_id)
        .await
        .expect("first finished");
    assert_eq!(
        done.result.as_ref().expect("result").session_id,
        first.session_id
    );

    let second = client
        .submit(pb::SubmitRequest {
            agent: "general".into(),
            prompt: "what number?".into(),
            resume_token: first.session_id.clone(),
            ..Default::default()
        })
        .await
        .expect("submit resume")
        .into_inner();
    assert_eq!(second.session_id, first.session_id);
    let task = cluster
        .wait_finished(&second.task_id)
        .await
        .expect("second finished");
    assert_eq!(
        task.result.expect("result").output.expect("output").text,
        "you said 42"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn an_answer_whose_message_the_worker_missed_is_found_by_its_recheck() {
    let cluster = plan_cluster(Duration::from_secs(60)).await;
    let (id, request_id, stream) = submit_and_wait_for_ask(&cluster).await;
    // Answer in the store only: no decision message reaches the worker.
    let store = taskwire_store::Store::connect(cluster.db.url(), 2)
        .await
        .expect("store");
    let task: taskwire_protocol::TaskId = id.parse().expect("task id");
    let answered = store
        .answer_approval(
            task,
            &request_id,
            taskwire_store::ApprovalAnswer::Once,
            None,
        )
        .await
        .expect("answer");
    assert_eq!(answered, taskwire_store::AnswerOutcome::Answered);
    let result = result_of(stream).await;
    assert_eq!(result.status(), pb::TaskStatus::Completed);
    assert!(
        created_in_patch(&result.patch, "approved.txt").is_some(),
        "the approved command ran: {}",
        result.patch
    );
    cluster.shutdown().await;
}
