//! The coordinator's answers to workers' requests: [`Handler`] implements the bus's
//! `WorkerRequests` (served by `taskwire_bus::serve`, which decodes, dispatches and
//! replies): claims, child submits (the `task` tool), task lookups, agent specs by
//! digest, session transcripts and approvals. Workers hold no database credentials; this is their only
//! way to the store.
//!
//! Every answer is a domain value or a [`CoordinatorError`], whose one code reaches the
//! worker as it would reach a gRPC caller: a refused child (`NOT_FOUND`, a tool error
//! for the model) is told apart from an outage (`UNAVAILABLE`, try again later) and
//! from a bug (`INTERNAL`).
//!
//! A looked-up task's result whose patch is too large for the reply hands the patch
//! over through the patch bucket (`patch_ref`) instead.

use std::sync::Arc;

use async_trait::async_trait;
use taskwire_bus::RpcError;
use taskwire_bus::messages::{
    AgentSpecLookup, Answer, ApprovalAsk, ApprovalDecision, ChildSubmit, ChildSubmitted,
    ClaimRequest, ClaimVerdict, SessionLoad, SessionSave, StoredSession, TaskLookup, TaskState,
};
use taskwire_protocol::{AgentSpecBundle, Subtask, TaskId, TaskRequest, TaskResult, pb};
use taskwire_store::{SessionLoad as Loaded, TaskRecord};

use crate::auth::Principal;
use crate::submit::{Origin, ParentInfo, submit_task};
use crate::{CoordinatorError, State};

/// Answers workers from the coordinator's state.
pub struct Handler {
    state: Arc<State>,
    /// The claim statements' store, which keeps their connection between them.
    claims: taskwire_store::Store,
}

impl Handler {
    pub fn new(state: Arc<State>) -> Self {
        let claims = state.store.holding_a_connection();
        Self { state, claims }
    }
}

type Answered<T> = Result<T, CoordinatorError>;

#[async_trait]
impl taskwire_bus::WorkerRequests for Handler {
    async fn claim(
        &self,
        claims: Vec<ClaimRequest>,
    ) -> Vec<Option<Result<ClaimVerdict, RpcError>>> {
        let st = &self.state;
        crate::claims::answer(
            &self.claims,
            &st.bus,
            &st.metrics,
            claims,
            st.config.max_running_per_tenant,
        )
        .await
    }

    async fn child_submit(&self, submit: ChildSubmit) -> Result<ChildSubmitted, RpcError> {
        Ok(child(&self.state, submit).await?)
    }

    async fn task_lookup(&self, lookup: TaskLookup) -> Result<TaskState, RpcError> {
        let st = &self.state;
        let found = async {
            st.store
                .get_task_beside(lookup.asking, lookup.task)
                .await?
                .ok_or_else(|| CoordinatorError::NotFound(format!("task {}", lookup.task)))
        };
        let mut state = state_of(&found.await?)?;
        if let Some(result) = state.result.as_mut() {
            hand_over_patch(st, lookup.task, result).await?;
        }
        Ok(state)
    }

    async fn agent_spec(&self, lookup: AgentSpecLookup) -> Result<AgentSpecBundle, RpcError> {
        let found: Answered<_> = async {
            self.state
                .store
                .agent_spec(lookup.digest)
                .await?
                .ok_or_else(|| CoordinatorError::NotFound(format!("agent spec {}", lookup.digest)))
        }
        .await;
        Ok(found?)
    }

    async fn session_load(&self, load: SessionLoad) -> Result<Option<StoredSession>, RpcError> {
        let st = &self.state;
        let loaded: Answered<_> = async {
            match st
                .store
                .load_session_for_task(load.session, load.task)
                .await?
            {
                Loaded::NotFound => Err(CoordinatorError::NotFound(format!(
                    "session {} of task {}",
                    load.session, load.task
                ))),
                Loaded::New => Ok(None),
                Loaded::Found {
                    transcript,
                    saved_by,
                } => Ok(Some(StoredSession {
                    transcript_json: serde_json::to_vec(&transcript).map_err(|e| {
                        CoordinatorError::Internal(format!("failed to encode a transcript: {e}"))
                    })?,
                    saved_by,
                })),
            }
        }
        .await;
        Ok(loaded?)
    }

    async fn session_save(&self, save: SessionSave) -> Result<(), RpcError> {
        Ok(session_save(&self.state, save).await?)
    }

    async fn approval_ask(&self, ask: ApprovalAsk) -> Result<(), RpcError> {
        let asked = self
            .state
            .store
            .ask_approval(
                ask.task,
                ask.epoch,
                &ask.request_id,
                &ask.permission,
                &ask.patterns,
                &ask.title,
            )
            .await
            .map_err(CoordinatorError::from)?;
        if !asked {
            return Err(CoordinatorError::FailedPrecondition(format!(
                "task {} is no longer run by this attempt",
                ask.task
            ))
            .into());
        }
        tracing::info!(task.id = %ask.task, request_id = %ask.request_id, permission = %ask.permission, "approval required");
        Ok(())
    }

    async fn approval_check(
        &self,
        task: TaskId,
        request_id: String,
    ) -> Result<Option<ApprovalDecision>, RpcError> {
        Ok(answered(&self.state, task, &request_id).await?)
    }

    async fn approval_timeout(
        &self,
        task: TaskId,
        request_id: String,
    ) -> Result<Option<ApprovalDecision>, RpcError> {
        use taskwire_store::AnswerOutcome;
        let closed = self
            .state
            .store
            .time_out_approval(task, &request_id)
            .await
            .map_err(CoordinatorError::from)?;
        match closed {
            AnswerOutcome::Answered => Ok(None),
            // A timeout that lost the race with an answer gets the answer.
            AnswerOutcome::NotPending | AnswerOutcome::Unknown => {
                Ok(answered(&self.state, task, &request_id).await?)
            }
        }
    }
}

async fn child(state: &State, req: ChildSubmit) -> Answered<ChildSubmitted> {
    let parent_id = req.parent;
    let record = state
        .store
        .get_task(parent_id)
        .await?
        .ok_or_else(|| CoordinatorError::NotFound(format!("parent task {parent_id}")))?;
    if record.claim_epoch != req.parent_epoch || record.status.is_terminal() {
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
    parent.model = req.parent_model;
    parent.fork = req.fork;
    let mut submit = req.request;
    submit.parent_task_id = parent_id.to_string();
    let origin = origin_of_child(&parent_request, &submit);
    // The child runs as its parent's tenant; its scope is bounded by the parent's.
    let caller = Principal {
        tenant: Some(record.tenant.clone()),
        scopes: None,
    };
    let span = crate::spans::child_submit(&req.traceparent, parent_id, parent.trace_id);
    let submitted = span
        .instrument(submit_task(state, &caller, submit, Some(parent), origin))
        .await;
    if let Err(e) = &submitted {
        span.trace.fail(e.code().as_wire());
    }
    let r = submitted?;
    Ok(ChildSubmitted {
        task: TaskId::parse_field("task_id", &r.task_id)
            .map_err(|e| CoordinatorError::Internal(format!("submit answered {e}")))?,
        session: r.session_id,
        created: r.created,
    })
}

/// Who decided the child a worker asks for: the slash command, when it is the subtask
/// the coordinator put in the parent's request (that agent, under that call's key,
/// which names one child per parent); a model's `task` call otherwise, whatever its
/// `command` argument says.
fn origin_of_child(parent: &TaskRequest, child: &pb::SubmitRequest) -> Origin {
    let is_subtask = parent
        .subtask
        .as_ref()
        .is_some_and(|s| s.agent == child.agent)
        && child.idempotency_key == taskwire_protocol::child_key(parent.task_id, Subtask::CALL_ID);
    if is_subtask {
        Origin::Command
    } else {
        Origin::Request
    }
}

async fn session_save(state: &State, save: SessionSave) -> Answered<()> {
    let (session, task) = (save.session, save.task);
    // Checked, not built: Postgres stores the text as jsonb.
    serde_json::from_slice::<serde::de::IgnoredAny>(&save.transcript_json)
        .map_err(|e| CoordinatorError::invalid("transcript_json", e.to_string()))?;
    let transcript = String::from_utf8(save.transcript_json)
        .map_err(|_| CoordinatorError::invalid("transcript_json", "is not UTF-8"))?;
    // Rare (transcripts normally travel with the result), so not batched.
    let write = (session, task, save.epoch, transcript);
    if !state
        .store
        .save_sessions(std::slice::from_ref(&write))
        .await?[0]
    {
        if state.store.load_session_for_task(session, task).await? == Loaded::NotFound {
            return Err(CoordinatorError::NotFound(format!(
                "session {session} of task {task}"
            )));
        }
        return Err(CoordinatorError::FailedPrecondition(format!(
            "task {task} is no longer run by this attempt; transcript not saved"
        )));
    }
    Ok(())
}

/// The stored answer to an approval, once there is one.
async fn answered(
    state: &State,
    task: TaskId,
    request_id: &str,
) -> Answered<Option<ApprovalDecision>> {
    let answer = state.store.approval_answer(task, request_id).await?;
    Ok(answer.map(|(answer, message)| decision(task, request_id, answer, message)))
}

/// The decision message for a stored answer.
pub fn decision(
    task: TaskId,
    request_id: &str,
    answer: taskwire_store::ApprovalAnswer,
    message: Option<String>,
) -> ApprovalDecision {
    use taskwire_store::ApprovalAnswer as A;
    ApprovalDecision {
        task,
        request_id: request_id.to_owned(),
        answer: match answer {
            A::Once => Answer::Once,
            A::Always => Answer::Always,
            A::Reject => Answer::Reject,
        },
        message,
    }
}

/// A task as a worker sees it: the recorded status and, once finished, its result
/// (the one a worker reported, or only why it was stopped), with as much as a parent
/// uses: not its structured answer, tool calls or provenance.
fn state_of(r: &TaskRecord) -> Result<TaskState, CoordinatorError> {
    let result = r
        .status
        .is_terminal()
        .then(|| TaskResult::try_from(crate::convert::result_of(r)))
        .transpose()
        .map_err(|e| {
            CoordinatorError::Internal(format!(
                "the recorded result of task {} is unreadable: {e}",
                r.task_id
            ))
        })?
        .map(|result| TaskResult {
            structured: None,
            tool_calls: Vec::new(),
            provenance: Vec::new(),
            transcript_json: None,
            ..result
        });
    Ok(TaskState {
        task: r.task_id,
        status: r.status,
        result,
    })
}

/// Moves a recorded patch too large for a reply into the patch bucket, as a fresh
/// object (the result's own object may have expired since it was recorded).
async fn hand_over_patch(
    state: &State,
    task: TaskId,
    result: &mut TaskResult,
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
    result.patch_ref = Some(reference);
    Ok(())
}

#[cfg(test)]
mod tests {
    use taskwire_definitions::builtin::AgentRegistry;

    use super::*;
    use crate::CoordinatorConfig;
    use crate::submit::{SubmitTrace, build_task};

    /// A root task `RunCommand` made with a subtask for `agent`.
    fn commanded(agent: &str) -> TaskRequest {
        let req = pb::SubmitRequest {
            agent: "build".into(),
            prompt: "/fix the build".into(),
            subtask: Some(pb::Subtask {
                agent: agent.into(),
                prompt: "fix the build".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        build_task(
            &CoordinatorConfig::default(),
            &crate::agents::Agents::from(AgentRegistry::builtin()),
            &taskwire_bus::Subjects::new("t"),
            req,
            None,
            Origin::Command,
            SubmitTrace::default(),
        )
        .expect("valid")
        .request
    }

    fn child(agent: &str, call_id: &str, parent: &TaskRequest) -> pb::SubmitRequest {
        pb::SubmitRequest {
            agent: agent.into(),
            prompt: "fix the build".into(),
            command: "/fix".into(),
            idempotency_key: taskwire_protocol::child_key(parent.task_id, call_id),
            ..Default::default()
        }
    }

    #[test]
    fn only_the_subtask_a_command_put_in_the_parent_is_the_commands_child() {
        let parent = commanded("build");
        let subtask = child("build", Subtask::CALL_ID, &parent);
        assert_eq!(origin_of_child(&parent, &subtask), Origin::Command);
        // The parent's model later asking for the same agent, whatever its `command`.
        let by_model = child("build", "call_1", &parent);
        assert_eq!(origin_of_child(&parent, &by_model), Origin::Request);
        let other_agent = child("plan", Subtask::CALL_ID, &parent);
        assert_eq!(origin_of_child(&parent, &other_agent), Origin::Request);
        // A task without a subtask never has the command's child.
        let mut plain = commanded("build");
        plain.subtask = None;
        let subtask = child("build", Subtask::CALL_ID, &plain);
        assert_eq!(origin_of_child(&plain, &subtask), Origin::Request);
    }
}
