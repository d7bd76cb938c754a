//! The gRPC `taskwire.v1.TaskService`.

use std::pin::Pin;
use std::sync::Arc;

use taskwire_protocol::{TaskId, TaskStatus, TraceId, pb};
use taskwire_store::{InsertOutcome, ListFilter, ReplayOutcome, TaskRecord};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::auth::{Principal, principal};
use crate::convert::task_of;
use crate::submit::{ParentInfo, build_task};
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

    /// The task, if it exists and the caller's tenant may see it; `NOT_FOUND` otherwise
    /// (another tenant's task is indistinguishable from a missing one).
    async fn visible_task(&self, caller: &Principal, id: TaskId) -> Result<TaskRecord, Status> {
        self.state
            .store
            .get_task(id)
            .await
            .map_err(CoordinatorError::from)?
            .filter(|r| caller.may_see(&r.tenant))
            .ok_or_else(|| CoordinatorError::NotFound(format!("task {id}")).into())
    }
}

fn parse_task_id(field: &'static str, s: &str) -> Result<TaskId, Status> {
    TaskId::parse_field(field, s).map_err(|e| CoordinatorError::from(e).into())
}

#[tonic::async_trait]
impl pb::task_service_server::TaskService for TaskApi {
    async fn submit(&self, request: Request<pb::SubmitRequest>) -> Result<Response<pb::SubmitResponse>, Status> {
        let caller = principal(&request);
        let mut req = request.into_inner();
        req.tenant = caller.tenant_for_submit(&req.tenant)?;
        req.auth_scope = caller.scope_for_submit(std::mem::take(&mut req.auth_scope))?;
        let st = &self.state;
        let depth = st.queue_depth.get();
        if depth >= u64::try_from(st.config.max_queued_tasks).unwrap_or(u64::MAX) {
            return Err(CoordinatorError::ResourceExhausted(format!(
                "the task queue is full ({depth} tasks waiting, limit {}); retry later",
                st.config.max_queued_tasks
            ))
            .into());
        }
        let parent = match req.parent_task_id.as_str() {
            "" => None,
            p => {
                let id = parse_task_id("parent_task_id", p)?;
                let rec = st
                    .store
                    .get_task(id)
                    .await
                    .map_err(CoordinatorError::from)?
                    .filter(|r| caller.may_see(&r.tenant))
                    .ok_or_else(|| CoordinatorError::NotFound(format!("parent task {id}")))?;
                Some(ParentInfo { task_id: id, trace_id: rec.trace_id, depth: rec.depth })
            }
        };
        let task = build_task(&st.config, &st.registry, &st.subjects, req, parent)?;
        let trace_id = task.request.trace_id;
        let outcome = st.submitter.submit(task).await?;
        let (task_id, created) = match outcome {
            InsertOutcome::Created(id) => (id, true),
            InsertOutcome::Existing(id) => (id, false),
            InsertOutcome::Conflict(id) => {
                return Err(CoordinatorError::AlreadyExists(format!(
                    "idempotency key already used by task {id} with a different request"
                ))
                .into());
            }
        };
        if created {
            tracing::debug!(task.id = %task_id, trace.id = %trace_id, "task submitted");
        }
        let trace_id = if created {
            trace_id
        } else {
            st.store
                .get_task(task_id)
                .await
                .map_err(CoordinatorError::from)?
                .map_or(trace_id, |r| r.trace_id)
        };
        Ok(Response::new(pb::SubmitResponse { task_id: task_id.to_string(), trace_id: trace_id.to_string(), created }))
    }

    async fn get(&self, request: Request<pb::GetRequest>) -> Result<Response<pb::Task>, Status> {
        let caller = principal(&request);
        let id = parse_task_id("task_id", &request.into_inner().task_id)?;
        let rec = self.visible_task(&caller, id).await?;
        Ok(Response::new(task_of(&rec)))
    }

    type WatchStream = Pin<Box<dyn futures::Stream<Item = WatchItem> + Send>>;

    async fn watch(&self, request: Request<pb::WatchRequest>) -> Result<Response<Self::WatchStream>, Status> {
        let caller = principal(&request);
        let id = parse_task_id("task_id", &request.into_inner().task_id)?;
        self.visible_task(&caller, id).await?;
        let (tx, rx) = mpsc::channel(256);
        tokio::spawn(stream_task(self.state.clone(), id, tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn cancel(&self, request: Request<pb::CancelRequest>) -> Result<Response<pb::CancelResponse>, Status> {
        let caller = principal(&request);
        let req = request.into_inner();
        let id = parse_task_id("task_id", &req.task_id)?;
        let st = &self.state;
        self.visible_task(&caller, id).await?;
        let reason = if req.reason.is_empty() { "cancelled by request".to_owned() } else { req.reason };
        let cancelled = st.store.cancel_tree(id).await.map_err(CoordinatorError::from)?;
        for t in &cancelled {
            tracing::info!(task.id = %t, reason = %reason, "task cancelled");
            st.notify_stopped(*t, &reason).await;
        }
        let rec = self.visible_task(&caller, id).await?;
        Ok(Response::new(pb::CancelResponse { status: pb::TaskStatus::from(rec.status) as i32 }))
    }

    async fn list(&self, request: Request<pb::ListRequest>) -> Result<Response<pb::ListResponse>, Status> {
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
            trace_id: match req.trace_id.as_str() {
                "" => None,
                t => Some(TraceId::parse_field("trace_id", t).map_err(CoordinatorError::from)?),
            },
            parent_task_id: match req.parent_task_id.as_str() {
                "" => None,
                p => Some(parse_task_id("parent_task_id", p)?),
            },
            status: match req.status {
                0 => None,
                s => Some(TaskStatus::from_wire("status", s).map_err(CoordinatorError::from)?),
            },
            agent: (!req.agent.is_empty()).then_some(req.agent),
            limit: req.limit,
        };
        let tasks = self.state.store.list_tasks(&filter).await.map_err(CoordinatorError::from)?;
        Ok(Response::new(pb::ListResponse { tasks: tasks.iter().map(task_of).collect() }))
    }

    async fn replay(&self, request: Request<pb::ReplayRequest>) -> Result<Response<pb::Task>, Status> {
        let caller = principal(&request);
        let id = parse_task_id("task_id", &request.into_inner().task_id)?;
        let st = &self.state;
        self.visible_task(&caller, id).await?;
        match st.store.replay_task(id, &st.subjects.tasks(&st.config.queue)).await.map_err(CoordinatorError::from)? {
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
            ReplayOutcome::Unknown => return Err(CoordinatorError::NotFound(format!("task {id}")).into()),
        }
        let rec = self.visible_task(&caller, id).await?;
        Ok(Response::new(task_of(&rec)))
    }

    async fn list_agents(
        &self,
        request: Request<pb::ListAgentsRequest>,
    ) -> Result<Response<pb::ListAgentsResponse>, Status> {
        let include_hidden = request.into_inner().include_hidden;
        let agents = self.state.registry.list(include_hidden).into_iter().map(pb::AgentSpec::from).collect();
        Ok(Response::new(pb::ListAgentsResponse { agents }))
    }
}
