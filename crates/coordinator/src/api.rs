//! The gRPC `taskwire.v1.TaskService`.

use std::pin::Pin;
use std::sync::Arc;

use taskwire_protocol::{TaskId, TaskStatus, pb};
use taskwire_store::{ListFilter, ReplayOutcome, TaskRecord};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::auth::{Principal, principal};
use crate::convert::task_with_subtree;
use crate::ownership;
use crate::schedules::service as schedules;
use crate::spans;
use crate::submit::{Origin, submit_task};
use crate::watch::{WatchItem, stream_task};
use crate::{CoordinatorError, State};

/// The service implementation; cheap to clone.
#[derive(Clone)]
pub struct TaskApi {
    state: Arc<State>,
}

impl TaskApi {
    pub fn new(state: Arc<State>) -> Self {
        Self { state }
    }

    /// The task, if it exists and the caller's tenant owns it; `NOT_FOUND` otherwise
    /// (another tenant's task is indistinguishable from a missing one).
    async fn visible_task(&self, caller: &Principal, id: TaskId) -> Result<TaskRecord, Status> {
        Ok(ownership::task_by_id(&self.state, caller, id).await?)
    }

    /// What the service shares with the rest of the coordinator.
    pub(crate) fn state(&self) -> &Arc<State> {
        &self.state
    }

    /// The saved session transcript of `task` (as `Get` returned it, so already
    /// checked against the caller's tenant); `None` until its result names a session
    /// with a saved transcript.
    pub async fn transcript(&self, task: &pb::Task) -> Result<Option<serde_json::Value>, Status> {
        use taskwire_store::SessionLoad;
        let Some(session) = task
            .result
            .as_ref()
            .and_then(|r| r.session_id.parse::<taskwire_protocol::SessionId>().ok())
        else {
            return Ok(None);
        };
        let id = parse_task_id("task_id", &task.task_id)?;
        match self
            .state
            .store
            .load_session_for_task(session, id)
            .await
            .map_err(CoordinatorError::from)?
        {
            SessionLoad::Found { transcript, .. } => Ok(Some(transcript)),
            SessionLoad::New | SessionLoad::NotFound => Ok(None),
        }
    }
}

fn parse_task_id(field: &'static str, s: &str) -> Result<TaskId, Status> {
    TaskId::parse_field(field, s).map_err(|e| CoordinatorError::from(e).into())
}

#[tonic::async_trait]
impl pb::task_service_server::TaskService for TaskApi {
    async fn submit(
        &self,
        request: Request<pb::SubmitRequest>,
    ) -> Result<Response<pb::SubmitResponse>, Status> {
        let caller = principal(&request);
        let traceparent = request
            .metadata()
            .get(taskwire_bus::headers::TRACEPARENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let mut req = request.into_inner();
        let parent = ownership::parent(&self.state, &caller, &mut req).await?;
        let trace = match &parent {
            Some(p) => Some(p.trace_id),
            None => req.trace_id.parse().ok(),
        };
        let span = spans::submit(&traceparent, trace);
        let submitted = span
            .instrument(submit_task(
                &self.state,
                &caller,
                req,
                parent,
                Origin::Request,
            ))
            .await;
        match submitted {
            Ok(r) => Ok(Response::new(r)),
            Err(e) => {
                let status = Status::from(e);
                span.trace.fail(format!("{:?}", status.code()));
                Err(status)
            }
        }
    }

    async fn get(&self, request: Request<pb::GetRequest>) -> Result<Response<pb::Task>, Status> {
        let caller = principal(&request);
        let id = parse_task_id("task_id", &request.into_inner().task_id)?;
        let rec = self.visible_task(&caller, id).await?;
        let mut subtree = self
            .state
            .store
            .subtree_usage(&[id])
            .await
            .map_err(CoordinatorError::from)?;
        let mut task = task_with_subtree(&rec, subtree.remove(&id));
        crate::waits::set_wait(&self.state, id, &mut task).await;
        task.webhook = self
            .state
            .store
            .webhook(id)
            .await
            .map_err(CoordinatorError::from)?
            .map(crate::webhooks::to_wire);
        Ok(Response::new(task))
    }

    type WatchStream = Pin<Box<dyn futures::Stream<Item = WatchItem> + Send>>;

    async fn watch(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let caller = principal(&request);
        let id = parse_task_id("task_id", &request.into_inner().task_id)?;
        self.visible_task(&caller, id).await?;
        let (tx, rx) = mpsc::channel(256);
        tokio::spawn(stream_task(self.state.clone(), id, tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn cancel(
        &self,
        request: Request<pb::CancelRequest>,
    ) -> Result<Response<pb::CancelResponse>, Status> {
        let caller = principal(&request);
        let req = request.into_inner();
        let id = parse_task_id("task_id", &req.task_id)?;
        let st = &self.state;
        self.visible_task(&caller, id).await?;
        let reason = if req.reason.is_empty() {
            "cancelled by request".to_owned()
        } else {
            req.reason
        };
        let cancelled = st
            .store
            .cancel_tree(id)
            .await
            .map_err(CoordinatorError::from)?;
        for t in &cancelled {
            tracing::info!(task.id = %t.task_id, reason = %reason, "task cancelled");
        }
        st.perform(&cancelled, &reason).await;
        let rec = self.visible_task(&caller, id).await?;
        Ok(Response::new(pb::CancelResponse {
            status: pb::TaskStatus::from(rec.status) as i32,
        }))
    }

    async fn list(
        &self,
        request: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListResponse>, Status> {
        let caller = principal(&request);
        let req = request.into_inner();
        let tenant = match &caller.tenant {
            Some(own) if !req.tenant.is_empty() && req.tenant != *own => {
                return Err(CoordinatorError::PermissionDenied(format!(
                    "tenant `{}` is not the tenant of this token",
                    req.tenant
                ))
                .into());
            }
            Some(own) => Some(own.clone()),
            None => (!req.tenant.is_empty()).then_some(req.tenant),
        };
        let filter = ListFilter {
            tenant,
            // Filters naming another tenant's trace or task are `NOT_FOUND`, not empty.
            trace_id: ownership::trace(&self.state, &caller, &req.trace_id).await?,
            parent_task_id: match req.parent_task_id.as_str() {
                "" => None,
                p => Some(
                    ownership::task(&self.state, &caller, "parent_task_id", p)
                        .await?
                        .task_id,
                ),
            },
            status: match req.status {
                0 => None,
                s => Some(TaskStatus::from_wire("status", s).map_err(CoordinatorError::from)?),
            },
            agent: (!req.agent.is_empty()).then_some(req.agent),
            limit: req.limit,
        };
        let tasks = self
            .state
            .store
            .list_tasks(&filter)
            .await
            .map_err(CoordinatorError::from)?;
        let ids: Vec<_> = tasks.iter().map(|t| t.task_id).collect();
        let mut subtrees = self
            .state
            .store
            .subtree_usage(&ids)
            .await
            .map_err(CoordinatorError::from)?;
        Ok(Response::new(pb::ListResponse {
            tasks: tasks
                .iter()
                .map(|t| task_with_subtree(t, subtrees.remove(&t.task_id)))
                .collect(),
        }))
    }

    async fn replay(
        &self,
        request: Request<pb::ReplayRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let caller = principal(&request);
        let id = parse_task_id("task_id", &request.into_inner().task_id)?;
        let st = &self.state;
        self.visible_task(&caller, id).await?;
        match st
            .store
            .replay_task(id, &st.subjects.tasks(&st.config.queue))
            .await
            .map_err(CoordinatorError::from)?
        {
            ReplayOutcome::Replayed => {
                tracing::info!(task.id = %id, "task replayed");
                st.relay_wake.notify_one();
            }
            ReplayOutcome::NotReplayable(status) => {
                return Err(CoordinatorError::FailedPrecondition(format!(
                    "task {id} is {status}; only dead_lettered or error tasks can be replayed"
                ))
                .into());
            }
            ReplayOutcome::Unknown => {
                return Err(CoordinatorError::NotFound(format!("task {id}")).into());
            }
        }
        let rec = self.visible_task(&caller, id).await?;
        let mut subtree = st
            .store
            .subtree_usage(&[id])
            .await
            .map_err(CoordinatorError::from)?;
        Ok(Response::new(task_with_subtree(&rec, subtree.remove(&id))))
    }

    async fn approve(
        &self,
        request: Request<pb::ApproveRequest>,
    ) -> Result<Response<pb::ApproveResponse>, Status> {
        use taskwire_store::{AnswerOutcome, ApprovalAnswer};
        let caller = principal(&request);
        let req = request.into_inner();
        let id = parse_task_id("task_id", &req.task_id)?;
        self.visible_task(&caller, id).await?;
        let answer = match pb::ApprovalAnswer::try_from(req.answer) {
            Ok(pb::ApprovalAnswer::Once) => ApprovalAnswer::Once,
            Ok(pb::ApprovalAnswer::Always) => ApprovalAnswer::Always,
            Ok(pb::ApprovalAnswer::Reject) => ApprovalAnswer::Reject,
            _ => {
                return Err(
                    CoordinatorError::invalid("answer", "must be once, always or reject").into(),
                );
            }
        };
        let st = &self.state;
        let message = (!req.message.is_empty()).then_some(req.message.as_str());
        match st
            .store
            .answer_approval(id, &req.request_id, answer, message)
            .await
            .map_err(CoordinatorError::from)?
        {
            AnswerOutcome::Answered => {
                let decision = crate::worker_rpc::decision(
                    id,
                    &req.request_id,
                    answer,
                    message.map(str::to_owned),
                );
                st.bus.publish_decision(&decision).await.map_err(|e| {
                    CoordinatorError::Unavailable(format!("failed to deliver the approval: {e}"))
                })?;
                tracing::info!(task.id = %id, request_id = %req.request_id, ?answer, "approval answered");
            }
            AnswerOutcome::Unknown => {
                return Err(CoordinatorError::NotFound(format!(
                    "approval request `{}` of task {id}",
                    req.request_id
                ))
                .into());
            }
            AnswerOutcome::NotPending => {
                return Err(CoordinatorError::FailedPrecondition(format!(
                    "approval request `{}` of task {id} is no longer pending (answered or timed out)",
                    req.request_id
                ))
                .into());
            }
        }
        let rec = self.visible_task(&caller, id).await?;
        Ok(Response::new(pb::ApproveResponse {
            status: pb::TaskStatus::from(rec.status) as i32,
        }))
    }

    async fn run_command(
        &self,
        request: Request<pb::RunCommandRequest>,
    ) -> Result<Response<pb::SubmitResponse>, Status> {
        let caller = principal(&request);
        let req = request.into_inner();
        Ok(Response::new(
            crate::commands::run_command(&self.state, &caller, req).await?,
        ))
    }

    async fn create_schedule(
        &self,
        request: Request<pb::CreateScheduleRequest>,
    ) -> Result<Response<pb::Schedule>, Status> {
        let caller = principal(&request);
        let req = request.into_inner();
        Ok(Response::new(
            schedules::create(&self.state, &caller, req.spec).await?,
        ))
    }

    async fn get_schedule(
        &self,
        request: Request<pb::GetScheduleRequest>,
    ) -> Result<Response<pb::Schedule>, Status> {
        let caller = principal(&request);
        let req = request.into_inner();
        Ok(Response::new(
            schedules::get(&self.state, &caller, &req.name, &req.tenant).await?,
        ))
    }

    async fn list_schedules(
        &self,
        request: Request<pb::ListSchedulesRequest>,
    ) -> Result<Response<pb::ListSchedulesResponse>, Status> {
        let caller = principal(&request);
        let req = request.into_inner();
        Ok(Response::new(
            schedules::list(&self.state, &caller, &req.tenant).await?,
        ))
    }

    async fn update_schedule(
        &self,
        request: Request<pb::UpdateScheduleRequest>,
    ) -> Result<Response<pb::Schedule>, Status> {
        let caller = principal(&request);
        let req = request.into_inner();
        Ok(Response::new(
            schedules::update(&self.state, &caller, req.spec).await?,
        ))
    }

    async fn pause_schedule(
        &self,
        request: Request<pb::PauseScheduleRequest>,
    ) -> Result<Response<pb::Schedule>, Status> {
        let caller = principal(&request);
        let req = request.into_inner();
        Ok(Response::new(
            schedules::set_paused(&self.state, &caller, &req.name, &req.tenant, true).await?,
        ))
    }

    async fn resume_schedule(
        &self,
        request: Request<pb::ResumeScheduleRequest>,
    ) -> Result<Response<pb::Schedule>, Status> {
        let caller = principal(&request);
        let req = request.into_inner();
        Ok(Response::new(
            schedules::set_paused(&self.state, &caller, &req.name, &req.tenant, false).await?,
        ))
    }

    async fn delete_schedule(
        &self,
        request: Request<pb::DeleteScheduleRequest>,
    ) -> Result<Response<pb::DeleteScheduleResponse>, Status> {
        let caller = principal(&request);
        let req = request.into_inner();
        schedules::delete(&self.state, &caller, &req.name, &req.tenant).await?;
        Ok(Response::new(pb::DeleteScheduleResponse {}))
    }

    async fn trigger_schedule(
        &self,
        request: Request<pb::TriggerScheduleRequest>,
    ) -> Result<Response<pb::SubmitResponse>, Status> {
        let caller = principal(&request);
        let req = request.into_inner();
        Ok(Response::new(
            schedules::trigger(&self.state, &caller, &req.name, &req.tenant).await?,
        ))
    }

    async fn list_agents(
        &self,
        request: Request<pb::ListAgentsRequest>,
    ) -> Result<Response<pb::ListAgentsResponse>, Status> {
        let include_hidden = request.into_inner().include_hidden;
        let registry = self.state.registry();
        let agents = registry
            .list(include_hidden)
            .into_iter()
            .map(pb::AgentSpec::from)
            .collect();
        Ok(Response::new(pb::ListAgentsResponse { agents }))
    }
}
