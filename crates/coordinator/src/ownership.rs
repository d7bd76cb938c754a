//! Ids named by callers, checked where they enter: each is looked up together with
//! the tenant it must belong to (one query, see `taskwire_store::ownership`), and
//! another tenant's object is `NOT_FOUND`, worded exactly like a missing one.
//!
//! Every path that takes an id goes through here: task ids (`Get`, `Watch`, `Cancel`,
//! `Replay`, `Approve`), parents (`Submit`, `RunCommand`), sessions (`resume_token`,
//! `session_id`), `List` filters, and the workers' requests.

use taskwire_protocol::{SessionId, TaskId, TraceId, pb};
use taskwire_store::TaskRecord;

use crate::auth::Principal;
use crate::submit::ParentInfo;
use crate::{CoordinatorError, State};

/// The task `raw` (field `field`), if the caller's tenant owns it.
pub async fn task(
    state: &State,
    caller: &Principal,
    field: &'static str,
    raw: &str,
) -> Result<TaskRecord, CoordinatorError> {
    let id = TaskId::parse_field(field, raw)?;
    task_by_id(state, caller, id).await
}

/// [`task`], for an id already parsed.
pub async fn task_by_id(
    state: &State,
    caller: &Principal,
    id: TaskId,
) -> Result<TaskRecord, CoordinatorError> {
    state
        .store
        .get_task_for(caller.tenant.as_deref(), id)
        .await?
        .ok_or_else(|| CoordinatorError::NotFound(format!("task {id}")))
}

/// The parent a submit names in `parent_task_id`, if any, checked against the caller's
/// tenant. On an open API a submit that names no tenant runs as its parent's.
pub async fn parent(
    state: &State,
    caller: &Principal,
    req: &mut pb::SubmitRequest,
) -> Result<Option<ParentInfo>, CoordinatorError> {
    if req.parent_task_id.is_empty() {
        return Ok(None);
    }
    let id = TaskId::parse_field("parent_task_id", &req.parent_task_id)?;
    let parent = state
        .store
        .task_request_for(caller.tenant.as_deref(), id)
        .await?
        .ok_or_else(|| CoordinatorError::NotFound(format!("parent task {id}")))?;
    if caller.tenant.is_none() && req.tenant.is_empty() {
        req.tenant.clone_from(&parent.tenant);
    }
    Ok(Some(ParentInfo::of(&parent)))
}

/// Checks that the session a submit resumes exists and belongs to `tenant` (the
/// submit's own, already settled).
pub async fn resumed_session(
    state: &State,
    tenant: &str,
    raw: &str,
) -> Result<(), CoordinatorError> {
    if raw.is_empty() {
        return Ok(());
    }
    let id = SessionId::parse_field("resume_token", raw)?;
    if state.store.session_exists_for(Some(tenant), id).await? {
        Ok(())
    } else {
        Err(CoordinatorError::NotFound(format!("session {id}")))
    }
}

/// A `List` filter's trace id, if some task of the caller's tenant belongs to it.
pub async fn trace(
    state: &State,
    caller: &Principal,
    raw: &str,
) -> Result<Option<TraceId>, CoordinatorError> {
    if raw.is_empty() {
        return Ok(None);
    }
    let id = TraceId::parse_field("trace_id", raw)?;
    if state
        .store
        .trace_exists_for(caller.tenant.as_deref(), id)
        .await?
    {
        Ok(Some(id))
    } else {
        Err(CoordinatorError::NotFound(format!("trace {id}")))
    }
}
