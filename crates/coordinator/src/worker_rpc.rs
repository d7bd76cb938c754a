//! Requests from workers (NATS request/reply on `<prefix>.worker.<method>`, queue group
//! `taskwire-coordinators`):
//! child submits (the `task` tool), task lookups, session transcripts and approvals.
//! Workers hold no database credentials; this is their only way to the store.
//!
//! A looked-up task's result whose patch is too large for the reply hands the patch
//! over through the patch bucket (`patch_ref`) instead.
//!
//! Every reply carries an `RpcStatus` (a gRPC code name and message on failure), so a
//! worker can tell a refused child (a tool error for the model) from an outage (retry).
//! Failure policy: a request that fails is answered with its error; the loop keeps
//! serving; a malformed request is answered `INVALID_ARGUMENT`.

use std::sync::Arc;

use futures::StreamExt;
use prost::Message;
use taskwire_protocol::{ClaimEpoch, SessionId, TaskId, pb, task::decode};
use taskwire_store::SessionLoad;
use tokio_util::sync::CancellationToken;

use crate::auth::Principal;
use crate::convert::task_of;
use crate::submit::{ParentInfo, submit_task};
use crate::{CoordinatorError, State};

const CONCURRENCY: usize = 64;

fn ok() -> Option<pb::RpcStatus> {
    Some(pb::RpcStatus::default())
}

fn status_of(e: &CoordinatorError) -> Option<pb::RpcStatus> {
    let status = tonic::Status::from(clone_error(e));
    Some(pb::RpcStatus {
        code: format!("{:?}", status.code()),
        message: status.message().to_owned(),
    })
}

/// Errors are not `Clone`; the reply needs only the code and message.
fn clone_error(e: &CoordinatorError) -> CoordinatorError {
    let code = tonic::Status::from(match e {
        CoordinatorError::InvalidArgument { field, reason } => CoordinatorError::InvalidArgument {
            field: field.clone(),
            reason: reason.clone(),
        },
        CoordinatorError::NotFound(m) => CoordinatorError::NotFound(m.clone()),
        CoordinatorError::AlreadyExists(m) => CoordinatorError::AlreadyExists(m.clone()),
        CoordinatorError::ResourceExhausted(m) => CoordinatorError::ResourceExhausted(m.clone()),
        CoordinatorError::FailedPrecondition(m) => CoordinatorError::FailedPrecondition(m.clone()),
        CoordinatorError::PermissionDenied(m) => CoordinatorError::PermissionDenied(m.clone()),
        other => CoordinatorError::Unavailable(other.to_string()),
    });
    match code.code() {
        tonic::Code::InvalidArgument => CoordinatorError::invalid("request", code.message()),
        tonic::Code::NotFound => {
            CoordinatorError::NotFound(code.message().trim_end_matches(" not found").to_owned())
        }
        tonic::Code::AlreadyExists => CoordinatorError::AlreadyExists(code.message().to_owned()),
        tonic::Code::ResourceExhausted => {
            CoordinatorError::ResourceExhausted(code.message().to_owned())
        }
        tonic::Code::FailedPrecondition => {
            CoordinatorError::FailedPrecondition(code.message().to_owned())
        }
        tonic::Code::PermissionDenied => {
            CoordinatorError::PermissionDenied(code.message().to_owned())
        }
        _ => CoordinatorError::Unavailable(code.message().to_owned()),
    }
}

/// Serves worker requests until `shutdown`.
pub async fn run(
    state: Arc<State>,
    shutdown: CancellationToken,
) -> Result<(), async_nats::SubscribeError> {
    let sub = state
        .client
        .queue_subscribe(
            state.subjects.rpc_all(),
            taskwire_bus::subjects::COORDINATORS_GROUP.to_owned(),
        )
        .await?;
    sub.take_until(shutdown.cancelled_owned())
        .for_each_concurrent(CONCURRENCY, |msg| {
            let state = state.clone();
            async move {
                let Some(reply) = msg.reply.clone() else { return };
                let method = msg.subject.as_str().split_once(".worker.").map_or("", |(_, m)| m).to_owned();
                let body = answer(&state, &method, &msg.payload).await;
                if let Err(e) = state.client.publish(reply, body.into()).await {
                    tracing::warn!(error = %e, method = %method, "failed to answer a worker request");
                }
            }
        })
        .await;
    Ok(())
}

async fn answer(state: &State, method: &str, payload: &[u8]) -> Vec<u8> {
    match method {
        "child" => child(state, payload).await.encode_to_vec(),
        "task" => lookup(state, payload).await.encode_to_vec(),
        "session.load" => session_load(state, payload).await.encode_to_vec(),
        "session.save" => session_save(state, payload).await.encode_to_vec(),
        "approval" => approval(state, payload).await.encode_to_vec(),
        other => pb::RpcStatus {
            code: "Unimplemented".into(),
            message: format!("unknown worker request `{other}`"),
        }
        .encode_to_vec(),
    }
}

async fn child(state: &State, payload: &[u8]) -> pb::ChildSubmitReply {
    let run = async {
        let req = decode::<pb::ChildSubmit>("child submit", payload)?;
        let parent_id = TaskId::parse_field("parent_task_id", &req.parent_task_id)?;
        let record = state
            .store
            .get_task(parent_id)
            .await?
            .ok_or_else(|| CoordinatorError::NotFound(format!("parent task {parent_id}")))?;
        if record.claim_epoch != ClaimEpoch(req.parent_claim_epoch) || record.status.is_terminal() {
            return Err(CoordinatorError::FailedPrecondition(format!(
                "parent task {parent_id} is no longer run by this attempt"
            )));
        }
        let parent_request = state
            .store
            .task_request(parent_id)
            .await?
            .ok_or_else(|| CoordinatorError::NotFound(format!("parent task {parent_id}")))?;
        let mut parent = ParentInfo::of(&parent_request);
        parent.model = (!req.parent_model.is_empty()).then_some(req.parent_model);
        let mut submit = req
            .request
            .ok_or(taskwire_protocol::ProtocolError::Missing("request"))?;
        submit.parent_task_id = parent_id.to_string();
        // The child runs as its parent's tenant; its scope is bounded by the parent's.
        let caller = Principal {
            tenant: Some(record.tenant.clone()),
            scopes: None,
        };
        submit_task(state, &caller, submit, Some(parent)).await
    };
    match run.await {
        Ok(r) => pb::ChildSubmitReply {
            status: ok(),
            task_id: r.task_id,
            session_id: r.session_id,
            created: r.created,
        },
        Err(e) => pb::ChildSubmitReply {
            status: status_of(&e),
            ..Default::default()
        },
    }
}

async fn lookup(state: &State, payload: &[u8]) -> pb::TaskLookupReply {
    let run = async {
        let req = decode::<pb::TaskLookup>("task lookup", payload)?;
        let id = TaskId::parse_field("task_id", &req.task_id)?;
        let asking = TaskId::parse_field("asking_task_id", &req.asking_task_id)?;
        let record = state
            .store
            .get_task_beside(asking, id)
            .await?
            .ok_or_else(|| CoordinatorError::NotFound(format!("task {id}")))?;
        let mut task = task_of(&record);
        if let Some(result) = task.result.as_mut() {
            hand_over_patch(state, id, result).await?;
        }
        Ok::<_, CoordinatorError>(task)
    };
    match run.await {
        Ok(task) => pb::TaskLookupReply {
            status: ok(),
            task: Some(task),
        },
        Err(e) => pb::TaskLookupReply {
            status: status_of(&e),
            task: None,
        },
    }
}

/// Moves a recorded patch too large for a reply into the patch bucket, as a fresh
/// object (the result's own object may have expired since it was recorded).
async fn hand_over_patch(
    state: &State,
    task: TaskId,
    result: &mut pb::TaskResult,
) -> Result<(), CoordinatorError> {
    if result.patch.len() <= taskwire_protocol::INLINE_RESULT_PATCH_BYTES {
        return Ok(());
    }
    let reference = state
        .patches
        .put("result", &task.to_string(), &result.patch)
        .await
        .map_err(|e| {
            CoordinatorError::Unavailable(format!(
                "failed to hand over the patch of task {task}: {e}"
            ))
        })?;
    result.patch.clear();
    result.patch_ref = Some(pb::PatchRef::from(&reference));
    Ok(())
}

async fn session_load(state: &State, payload: &[u8]) -> pb::SessionLoadReply {
    let run = async {
        let req = decode::<pb::SessionLoad>("session load", payload)?;
        let id = SessionId::parse_field("session_id", &req.session_id)?;
        let task = TaskId::parse_field("task_id", &req.task_id)?;
        match state.store.load_session_for_task(id, task).await? {
            SessionLoad::NotFound => Err(CoordinatorError::NotFound(format!(
                "session {id} of task {task}"
            ))),
            found => Ok(found),
        }
    };
    match run.await {
        Ok(SessionLoad::Found {
            transcript,
            saved_by,
        }) => pb::SessionLoadReply {
            status: ok(),
            found: true,
            transcript_json: serde_json::to_vec(&transcript).unwrap_or_default(),
            saved_by_task_id: saved_by.to_string(),
        },
        Ok(_) => pb::SessionLoadReply {
            status: ok(),
            found: false,
            ..Default::default()
        },
        Err(e) => pb::SessionLoadReply {
            status: status_of(&e),
            ..Default::default()
        },
    }
}

async fn session_save(state: &State, payload: &[u8]) -> pb::SessionSaveReply {
    let run = async {
        let req = decode::<pb::SessionSave>("session save", payload)?;
        let session = SessionId::parse_field("session_id", &req.session_id)?;
        let task = TaskId::parse_field("task_id", &req.task_id)?;
        // Checked, not built: Postgres stores the text as jsonb.
        serde_json::from_slice::<serde::de::IgnoredAny>(&req.transcript_json)
            .map_err(|e| CoordinatorError::invalid("transcript_json", e.to_string()))?;
        let transcript = String::from_utf8(req.transcript_json)
            .map_err(|_| CoordinatorError::invalid("transcript_json", "is not UTF-8"))?;
        // Rare (transcripts normally travel with the result), so not batched.
        let write = (session, task, ClaimEpoch(req.claim_epoch), transcript);
        if !state
            .store
            .save_sessions(std::slice::from_ref(&write))
            .await?[0]
        {
            if state.store.load_session_for_task(session, task).await? == SessionLoad::NotFound {
                return Err(CoordinatorError::NotFound(format!(
                    "session {session} of task {task}"
                )));
            }
            return Err(CoordinatorError::FailedPrecondition(format!(
                "task {task} is no longer run by this attempt; transcript not saved"
            )));
        }
        Ok::<_, CoordinatorError>(())
    };
    match run.await {
        Ok(()) => pb::SessionSaveReply { status: ok() },
        Err(e) => pb::SessionSaveReply {
            status: status_of(&e),
        },
    }
}

async fn approval(state: &State, payload: &[u8]) -> pb::ApprovalAskReply {
    let run = async {
        let req = decode::<pb::ApprovalAsk>("approval", payload)?;
        let task = TaskId::parse_field("task_id", &req.task_id)?;
        // A check, or a timeout that lost the race with an answer, gets the answer.
        let answered = || async {
            let answer = state.store.approval_answer(task, &req.request_id).await?;
            Ok::<_, CoordinatorError>(
                answer.map(|(answer, message)| decision(task, &req.request_id, answer, message)),
            )
        };
        if req.check {
            return answered().await;
        }
        if req.timed_out {
            return match state.store.time_out_approval(task, &req.request_id).await? {
                taskwire_store::AnswerOutcome::Answered => Ok(None),
                taskwire_store::AnswerOutcome::NotPending
                | taskwire_store::AnswerOutcome::Unknown => answered().await,
            };
        }
        let asked = state
            .store
            .ask_approval(
                task,
                ClaimEpoch(req.claim_epoch),
                &req.request_id,
                &req.permission,
                &req.patterns,
                &req.title,
            )
            .await?;
        if !asked {
            return Err(CoordinatorError::FailedPrecondition(format!(
                "task {task} is no longer run by this attempt"
            )));
        }
        tracing::info!(task.id = %task, request_id = %req.request_id, permission = %req.permission, "approval required");
        Ok::<_, CoordinatorError>(None)
    };
    match run.await {
        Ok(decision) => pb::ApprovalAskReply {
            status: ok(),
            decision,
        },
        Err(e) => pb::ApprovalAskReply {
            decision: None,
            status: status_of(&e),
        },
    }
}

/// The decision message for a stored answer.
fn decision(
    task: TaskId,
    request_id: &str,
    answer: taskwire_store::ApprovalAnswer,
    message: Option<String>,
) -> pb::ApprovalDecision {
    use taskwire_store::ApprovalAnswer as A;
    let answer = match answer {
        A::Once => pb::ApprovalAnswer::Once,
        A::Always => pb::ApprovalAnswer::Always,
        A::Reject => pb::ApprovalAnswer::Reject,
    };
    pb::ApprovalDecision {
        task_id: task.to_string(),
        request_id: request_id.to_owned(),
        answer: answer as i32,
        message: message.unwrap_or_default(),
    }
}
