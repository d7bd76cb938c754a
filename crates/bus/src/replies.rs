//! Worker replies on the wire: a status, and the domain value on success.
//!
//! Every worker reply holds an `RpcStatus` in field 1 (an empty code on success, else
//! the [`ErrorCode`]'s wire name), so any request can be refused with
//! [`status_reply`]; a claim reply holds it in field 6, next to its verdict. Decoding
//! a reply gives the value, or the [`RpcError`] its status carries.

use bytes::Bytes;
use prost::Message as _;
use taskwire_protocol::{
    AgentSpecBundle, AgentSpecDigest, ClaimEpoch, ErrorCode, ProtocolError, TaskId, TaskResult,
    TaskStatus, pb,
};

use crate::codec::{Envelope, decode_wire};
use crate::error::{CodecError, RpcError};
use crate::messages::{
    ApprovalDecision, ChildSubmitted, Claim, ClaimVerdict, StoredSession, TaskState,
};

/// The wire status of an outcome: empty on success.
pub fn status_of(error: Option<&RpcError>) -> Option<pb::RpcStatus> {
    Some(match error {
        None => pb::RpcStatus::default(),
        Some(e) => pb::RpcStatus {
            code: e.code.as_wire().to_owned(),
            message: e.message.clone(),
        },
    })
}

/// The error a wire status carries, if any. A code this version does not know is
/// `INTERNAL`, naming the code.
pub fn error_of(status: Option<pb::RpcStatus>) -> Result<(), RpcError> {
    let Some(status) = status.filter(|s| !s.code.is_empty()) else {
        return Ok(());
    };
    match ErrorCode::from_wire(&status.code) {
        Some(code) => Err(RpcError::new(code, status.message)),
        None => Err(RpcError::new(
            ErrorCode::Internal,
            format!("unknown error code `{}`: {}", status.code, status.message),
        )),
    }
}

/// A reply that is only a status (field 1): how any worker request is refused.
pub fn status_reply(error: &RpcError) -> Bytes {
    pb::SessionSaveReply {
        status: status_of(Some(error)),
    }
    .encode_to_vec()
    .into()
}

fn reply_error(e: CodecError) -> RpcError {
    RpcError::new(ErrorCode::Internal, e.to_string())
}

pub(crate) fn encode_claim_reply(r: &Result<ClaimVerdict, RpcError>) -> Bytes {
    claim_reply(r).encode_to_vec().into()
}

/// The reply to a claim batch: one claim reply per claim, in order.
pub(crate) fn encode_claim_batch_reply(verdicts: &[Result<ClaimVerdict, RpcError>]) -> Bytes {
    pb::ClaimBatchReply {
        status: status_of(None),
        replies: verdicts.iter().map(claim_reply).collect(),
    }
    .encode_to_vec()
    .into()
}

/// The answers to a batch of `asked` claims, in order; the batch's refusal when it was
/// refused as a whole.
pub(crate) fn decode_claim_batch_reply(
    bytes: &[u8],
    asked: usize,
) -> Result<Vec<Result<ClaimVerdict, RpcError>>, RpcError> {
    let r = decode_wire::<pb::ClaimBatchReply>("claim batch reply", bytes).map_err(reply_error)?;
    error_of(r.status)?;
    if r.replies.len() != asked {
        return Err(RpcError::new(
            ErrorCode::Internal,
            format!(
                "a claim batch of {asked} was answered with {} replies",
                r.replies.len()
            ),
        ));
    }
    Ok(r.replies.into_iter().map(verdict_of).collect())
}

fn claim_reply(r: &Result<ClaimVerdict, RpcError>) -> pb::ClaimReply {
    use pb::claim_reply::Verdict;
    match r {
        Ok(ClaimVerdict::Granted(c)) => pb::ClaimReply {
            verdict: Verdict::Granted as i32,
            claim_epoch: c.epoch.0,
            attempt: c.attempt,
            last_attempt: c.last_attempt,
            ..Default::default()
        },
        Ok(ClaimVerdict::Finished { reason }) => pb::ClaimReply {
            verdict: Verdict::Finished as i32,
            reason: reason.clone(),
            ..Default::default()
        },
        Ok(ClaimVerdict::Busy { reason }) => pb::ClaimReply {
            verdict: Verdict::Busy as i32,
            reason: reason.clone(),
            ..Default::default()
        },
        // `UNKNOWN` too, for workers that read only the verdict.
        Err(e) => pb::ClaimReply {
            verdict: Verdict::Unknown as i32,
            reason: e.message.clone(),
            status: status_of(Some(e)),
            ..Default::default()
        },
    }
}

pub(crate) fn decode_claim_reply(bytes: &[u8]) -> Result<ClaimVerdict, RpcError> {
    verdict_of(decode_wire::<pb::ClaimReply>("claim reply", bytes).map_err(reply_error)?)
}

fn verdict_of(r: pb::ClaimReply) -> Result<ClaimVerdict, RpcError> {
    use pb::claim_reply::Verdict;
    error_of(r.status)?;
    match Verdict::try_from(r.verdict) {
        Ok(Verdict::Granted) => Ok(ClaimVerdict::Granted(Claim {
            epoch: ClaimEpoch(r.claim_epoch),
            attempt: r.attempt,
            last_attempt: r.last_attempt,
        })),
        Ok(Verdict::Finished) => Ok(ClaimVerdict::Finished { reason: r.reason }),
        Ok(Verdict::Busy) => Ok(ClaimVerdict::Busy { reason: r.reason }),
        Ok(Verdict::Unknown) => Err(RpcError::new(ErrorCode::NotFound, r.reason)),
        _ => Err(reply_error(CodecError::new(
            "claim reply",
            ProtocolError::UnknownEnum("verdict"),
        ))),
    }
}

pub(crate) fn encode_child_reply(r: &Result<ChildSubmitted, RpcError>) -> Bytes {
    let reply = match r {
        Ok(c) => pb::ChildSubmitReply {
            status: status_of(None),
            task_id: c.task.to_string(),
            session_id: c.session.clone(),
            created: c.created,
        },
        Err(e) => pb::ChildSubmitReply {
            status: status_of(Some(e)),
            ..Default::default()
        },
    };
    reply.encode_to_vec().into()
}

pub(crate) fn decode_child_reply(bytes: &[u8]) -> Result<ChildSubmitted, RpcError> {
    let r =
        decode_wire::<pb::ChildSubmitReply>("child submit reply", bytes).map_err(reply_error)?;
    error_of(r.status)?;
    let task = TaskId::parse_field("task_id", &r.task_id)
        .map_err(|e| reply_error(CodecError::new("child submit reply", e)))?;
    Ok(ChildSubmitted {
        task,
        session: r.session_id,
        created: r.created,
    })
}

pub(crate) fn encode_spec_reply(r: &Result<AgentSpecBundle, RpcError>) -> Bytes {
    let reply = match r {
        Ok(bundle) => pb::AgentSpecLookupReply {
            status: status_of(None),
            bundle: Some(bundle.to_wire()),
        },
        Err(e) => pb::AgentSpecLookupReply {
            status: status_of(Some(e)),
            bundle: None,
        },
    };
    reply.encode_to_vec().into()
}

/// The bundle in a lookup reply; `INTERNAL` when it is not the one `digest` names (a
/// worker never runs a definition other than the task's).
pub(crate) fn decode_spec_reply(
    bytes: &[u8],
    digest: AgentSpecDigest,
) -> Result<AgentSpecBundle, RpcError> {
    const NAME: &str = "agent spec lookup reply";
    let r = decode_wire::<pb::AgentSpecLookupReply>(NAME, bytes).map_err(reply_error)?;
    error_of(r.status)?;
    let malformed = |e| reply_error(CodecError::new(NAME, e));
    let bundle = r
        .bundle
        .ok_or(ProtocolError::Missing("bundle"))
        .map_err(malformed)?;
    let bundle = AgentSpecBundle::from_wire(bundle).map_err(malformed)?;
    let answered = bundle.digest();
    if answered != digest {
        return Err(RpcError::new(
            ErrorCode::Internal,
            format!("the agent spec answered for digest {digest} has digest {answered}"),
        ));
    }
    Ok(bundle)
}

pub(crate) fn encode_lookup_reply(r: &Result<TaskState, RpcError>) -> Bytes {
    let reply = match r {
        Ok(t) => pb::TaskLookupReply {
            status: status_of(None),
            task: Some(pb::Task {
                task_id: t.task.to_string(),
                status: pb::TaskStatus::from(t.status) as i32,
                result: t.result.as_ref().map(pb::TaskResult::from),
                ..Default::default()
            }),
        },
        Err(e) => pb::TaskLookupReply {
            status: status_of(Some(e)),
            task: None,
        },
    };
    reply.encode_to_vec().into()
}

pub(crate) fn decode_lookup_reply(bytes: &[u8]) -> Result<TaskState, RpcError> {
    let r = decode_wire::<pb::TaskLookupReply>("task lookup reply", bytes).map_err(reply_error)?;
    error_of(r.status)?;
    let malformed = |e| reply_error(CodecError::new("task lookup reply", e));
    let task = r
        .task
        .ok_or(ProtocolError::Missing("task"))
        .map_err(malformed)?;
    let id = TaskId::parse_field("task_id", &task.task_id).map_err(malformed)?;
    let result = task
        .result
        .map(|mut result| {
            // An earlier coordinator sent only what a parent uses, without the trace.
            if result.trace_id.is_empty() {
                result.trace_id = id.as_uuid().simple().to_string();
            }
            TaskResult::try_from(result)
        })
        .transpose()
        .map_err(malformed)?;
    Ok(TaskState {
        task: id,
        status: TaskStatus::from_wire("status", task.status).map_err(malformed)?,
        result,
    })
}

pub(crate) fn encode_load_reply(r: &Result<Option<StoredSession>, RpcError>) -> Bytes {
    let reply = match r {
        Ok(Some(s)) => pb::SessionLoadReply {
            status: status_of(None),
            found: true,
            transcript_json: s.transcript_json.clone(),
            saved_by_task_id: s.saved_by.to_string(),
        },
        Ok(None) => pb::SessionLoadReply {
            status: status_of(None),
            ..Default::default()
        },
        Err(e) => pb::SessionLoadReply {
            status: status_of(Some(e)),
            ..Default::default()
        },
    };
    reply.encode_to_vec().into()
}

pub(crate) fn decode_load_reply(bytes: &[u8]) -> Result<Option<StoredSession>, RpcError> {
    let r =
        decode_wire::<pb::SessionLoadReply>("session load reply", bytes).map_err(reply_error)?;
    error_of(r.status)?;
    if !r.found {
        return Ok(None);
    }
    let saved_by = TaskId::parse_field("saved_by_task_id", &r.saved_by_task_id)
        .map_err(|e| reply_error(CodecError::new("session load reply", e)))?;
    Ok(Some(StoredSession {
        transcript_json: r.transcript_json,
        saved_by,
    }))
}

pub(crate) fn encode_save_reply(r: &Result<(), RpcError>) -> Bytes {
    pb::SessionSaveReply {
        status: status_of(r.as_ref().err()),
    }
    .encode_to_vec()
    .into()
}

pub(crate) fn decode_save_reply(bytes: &[u8]) -> Result<(), RpcError> {
    let r =
        decode_wire::<pb::SessionSaveReply>("session save reply", bytes).map_err(reply_error)?;
    error_of(r.status)
}

pub(crate) fn encode_approval_reply(r: &Result<Option<ApprovalDecision>, RpcError>) -> Bytes {
    let reply = match r {
        Ok(d) => pb::ApprovalAskReply {
            status: status_of(None),
            decision: d.as_ref().map(Envelope::to_wire),
        },
        Err(e) => pb::ApprovalAskReply {
            status: status_of(Some(e)),
            decision: None,
        },
    };
    reply.encode_to_vec().into()
}

pub(crate) fn decode_approval_reply(bytes: &[u8]) -> Result<Option<ApprovalDecision>, RpcError> {
    let r = decode_wire::<pb::ApprovalAskReply>("approval reply", bytes).map_err(reply_error)?;
    error_of(r.status)?;
    r.decision
        .map(ApprovalDecision::from_wire)
        .transpose()
        .map_err(|e| reply_error(CodecError::new("approval reply", e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwire_protocol::{SessionId, TaskError, TraceId, Usage};

    #[test]
    fn every_code_survives_a_reply_status() {
        for code in ErrorCode::ALL {
            let e = RpcError::new(code, "why");
            assert_eq!(error_of(status_of(Some(&e))), Err(e));
        }
        assert_eq!(error_of(status_of(None)), Ok(()));
        assert_eq!(error_of(None), Ok(()));
    }

    #[test]
    fn an_unknown_wire_code_is_internal_and_named() {
        let e = error_of(Some(pb::RpcStatus {
            code: "TEAPOT".into(),
            message: "short and stout".into(),
        }))
        .expect_err("an error");
        assert_eq!(e.code, ErrorCode::Internal);
        assert!(e.message.contains("TEAPOT"), "{e}");
    }

    #[test]
    fn a_status_only_reply_is_read_by_every_worker_reply() {
        let e = RpcError::new(ErrorCode::InvalidArgument, "bad");
        let bytes = status_reply(&e);
        assert_eq!(decode_child_reply(&bytes), Err(e.clone()));
        assert_eq!(decode_lookup_reply(&bytes), Err(e.clone()));
        assert_eq!(decode_load_reply(&bytes), Err(e.clone()));
        assert_eq!(decode_save_reply(&bytes), Err(e.clone()));
        assert_eq!(decode_approval_reply(&bytes), Err(e));
    }

    #[test]
    fn claim_verdicts_and_refusals_round_trip() {
        let granted = Ok(ClaimVerdict::Granted(Claim {
            epoch: ClaimEpoch(7),
            attempt: 2,
            last_attempt: true,
        }));
        let busy = Ok(ClaimVerdict::Busy {
            reason: "busy".into(),
        });
        let gone = Err(RpcError::new(ErrorCode::NotFound, "task x does not exist"));
        for r in [granted.clone(), busy.clone(), gone.clone()] {
            assert_eq!(decode_claim_reply(&encode_claim_reply(&r)), r);
        }
        let batch = [granted, busy, gone];
        let bytes = encode_claim_batch_reply(&batch);
        assert_eq!(decode_claim_batch_reply(&bytes, 3), Ok(batch.to_vec()));
        // A reply that does not answer every claim is refused whole.
        assert_eq!(
            decode_claim_batch_reply(&bytes, 4).map_err(|e| e.code),
            Err(ErrorCode::Internal)
        );
        // A batch refused as a whole: the status-only reply.
        let refused = RpcError::new(ErrorCode::InvalidArgument, "malformed claim batch");
        assert_eq!(
            decode_claim_batch_reply(&status_reply(&refused), 1),
            Err(refused)
        );
        // An earlier coordinator's refusal: the verdict alone.
        let old = pb::ClaimReply {
            verdict: pb::claim_reply::Verdict::Unknown as i32,
            reason: "task x does not exist".into(),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(
            decode_claim_reply(&old).map_err(|e| e.code),
            Err(ErrorCode::NotFound)
        );
    }

    fn finished(task: TaskId) -> TaskResult {
        TaskResult {
            task_id: task,
            trace_id: TraceId::generate(),
            attempt: 2,
            claim_epoch: ClaimEpoch(3),
            status: TaskStatus::Completed,
            text: "done".into(),
            structured: None,
            tool_calls: Vec::new(),
            errors: vec![TaskError {
                code: "c".into(),
                message: "m".into(),
                retryable: false,
            }],
            usage: Usage {
                input_tokens: 3,
                output_tokens: 4,
                cost_picousd: 5_000_000,
                unpriced_tokens: 0,
                cache_write_input_tokens: 0,
                cached_input_tokens: 0,
            },
            own_usage: Usage::default(),
            latency_ms: 0,
            steps: 1,
            session_id: Some(SessionId::generate()),
            worker_id: None,
            retry_scheduled: false,
            transcript_json: None,
            patch: "diff".into(),
            title: None,
            provenance: Vec::new(),
            traceparent: String::new(),
            patch_ref: None,
        }
    }

    #[test]
    fn a_finished_task_round_trips_through_a_lookup_reply() {
        let task = TaskId::generate();
        let state = Ok(TaskState {
            task,
            status: TaskStatus::Completed,
            result: Some(finished(task)),
        });
        assert_eq!(decode_lookup_reply(&encode_lookup_reply(&state)), state);
    }

    /// What an earlier coordinator sent: only what a parent uses, with no trace id.
    #[test]
    fn an_earlier_coordinators_lookup_reply_is_read() {
        let task = TaskId::generate();
        let session = SessionId::generate();
        let old = pb::TaskLookupReply {
            status: status_of(None),
            task: Some(pb::Task {
                task_id: task.to_string(),
                status: pb::TaskStatus::Completed as i32,
                result: Some(pb::TaskResult {
                    task_id: task.to_string(),
                    status: pb::TaskStatus::Completed as i32,
                    output: Some(pb::Output {
                        text: "done".into(),
                        structured: None,
                    }),
                    errors: vec![pb::TaskError {
                        code: "c".into(),
                        message: "m".into(),
                        retryable: false,
                    }],
                    usage: Some(pb::Usage::from(&finished(task).usage)),
                    patch: "diff".into(),
                    session_id: session.to_string(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        }
        .encode_to_vec();
        let state = decode_lookup_reply(&old).expect("an earlier reply is read");
        let result = state.result.expect("a result");
        assert_eq!(
            (result.text.as_str(), result.patch.as_str()),
            ("done", "diff")
        );
        assert_eq!(result.errors, finished(task).errors);
        assert_eq!(result.usage, finished(task).usage);
        assert_eq!(result.session_id, Some(session));
    }
}
