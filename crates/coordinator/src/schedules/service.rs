//! The schedule RPCs (`CreateSchedule` … `TriggerSchedule`), for gRPC and the HTTP API:
//! each takes the caller, resolves the tenant as a submit does (a token acts for its
//! own tenant only), and answers in protobuf types.

use taskwire_protocol::pb;

use super::spec::{self, check, check_name};
use crate::auth::Principal;
use crate::{CoordinatorError, State};

/// Runs shown by `GetSchedule`.
const RUNS_IN_GET: i64 = 20;
/// Runs shown per schedule by `ListSchedules`.
const RUNS_IN_LIST: i64 = 3;
/// Next fire times shown.
const NEXT_FIRES: usize = 5;

fn not_found(name: &str) -> CoordinatorError {
    CoordinatorError::NotFound(format!("schedule `{name}`"))
}

async fn show(
    state: &State,
    s: &taskwire_store::schedules::ScheduleRecord,
    runs: i64,
) -> Result<pb::Schedule, CoordinatorError> {
    let recent = state.store.schedule_runs(s.schedule_id, runs).await?;
    let now = state.store.now().await?;
    spec::to_pb(s, &recent, now, NEXT_FIRES)
}

/// `CreateSchedule`: the first tick is the first one after now.
pub async fn create(
    state: &State,
    caller: &Principal,
    spec: Option<pb::ScheduleSpec>,
) -> Result<pb::Schedule, CoordinatorError> {
    let spec = spec.ok_or_else(|| CoordinatorError::invalid("spec", "is required"))?;
    let checked = check(state, caller, spec)?;
    let now = state.store.now().await?;
    let next = checked.timing.next_after(now);
    let id = uuid::Uuid::now_v7();
    if !state.store.create_schedule(id, &checked.row, next).await? {
        return Err(CoordinatorError::AlreadyExists(format!(
            "schedule `{}` already exists in tenant `{}`",
            checked.row.name, checked.row.tenant
        )));
    }
    tracing::info!(schedule = %checked.row.name, tenant = %checked.row.tenant, cadence = %checked.timing.describe(), "schedule created");
    get(state, caller, &checked.row.name, &checked.row.tenant).await
}

/// `UpdateSchedule`: the spec replaced, the next tick computed anew from now.
pub async fn update(
    state: &State,
    caller: &Principal,
    spec: Option<pb::ScheduleSpec>,
) -> Result<pb::Schedule, CoordinatorError> {
    let spec = spec.ok_or_else(|| CoordinatorError::invalid("spec", "is required"))?;
    let checked = check(state, caller, spec)?;
    let now = state.store.now().await?;
    let next = checked.timing.next_after(now);
    let s = state
        .store
        .update_schedule(&checked.row, next)
        .await?
        .ok_or_else(|| not_found(&checked.row.name))?;
    tracing::info!(schedule = %s.name, tenant = %s.tenant, "schedule updated");
    show(state, &s, RUNS_IN_GET).await
}

/// `GetSchedule`.
pub async fn get(
    state: &State,
    caller: &Principal,
    name: &str,
    tenant: &str,
) -> Result<pb::Schedule, CoordinatorError> {
    check_name(name)?;
    let tenant = caller.tenant_for_submit(tenant)?;
    let s = state
        .store
        .schedule(&tenant, name)
        .await?
        .ok_or_else(|| not_found(name))?;
    show(state, &s, RUNS_IN_GET).await
}

/// `ListSchedules`: the caller's tenant's; with authentication off and no tenant
/// named, every tenant's.
pub async fn list(
    state: &State,
    caller: &Principal,
    tenant: &str,
) -> Result<pb::ListSchedulesResponse, CoordinatorError> {
    let tenant = if caller.tenant.is_none() && tenant.is_empty() {
        None
    } else {
        Some(caller.tenant_for_submit(tenant)?)
    };
    let mut schedules = Vec::new();
    for s in state.store.list_schedules(tenant.as_deref()).await? {
        schedules.push(show(state, &s, RUNS_IN_LIST).await?);
    }
    Ok(pb::ListSchedulesResponse { schedules })
}

/// `PauseSchedule` (`paused`) and `ResumeSchedule`: a resumed schedule starts from the
/// first tick after now; ticks while it was paused never fire.
pub async fn set_paused(
    state: &State,
    caller: &Principal,
    name: &str,
    tenant: &str,
    paused: bool,
) -> Result<pb::Schedule, CoordinatorError> {
    check_name(name)?;
    let tenant = caller.tenant_for_submit(tenant)?;
    let next = if paused {
        None
    } else {
        let s = state
            .store
            .schedule(&tenant, name)
            .await?
            .ok_or_else(|| not_found(name))?;
        let now = state.store.now().await?;
        spec::Stored::of(&s)?.timing.next_after(now)
    };
    let s = state
        .store
        .set_schedule_paused(&tenant, name, paused, next)
        .await?
        .ok_or_else(|| not_found(name))?;
    tracing::info!(schedule = %name, tenant = %tenant, paused, "schedule paused or resumed");
    show(state, &s, RUNS_IN_GET).await
}

/// `DeleteSchedule`.
pub async fn delete(
    state: &State,
    caller: &Principal,
    name: &str,
    tenant: &str,
) -> Result<(), CoordinatorError> {
    check_name(name)?;
    let tenant = caller.tenant_for_submit(tenant)?;
    if !state.store.delete_schedule(&tenant, name).await? {
        return Err(not_found(name));
    }
    tracing::info!(schedule = %name, tenant = %tenant, "schedule deleted");
    Ok(())
}

/// `TriggerSchedule`.
pub async fn trigger(
    state: &State,
    caller: &Principal,
    name: &str,
    tenant: &str,
) -> Result<pb::SubmitResponse, CoordinatorError> {
    check_name(name)?;
    let tenant = caller.tenant_for_submit(tenant)?;
    let (task_id, trace_id) = super::scheduler::trigger(state, &tenant, name).await?;
    Ok(pb::SubmitResponse {
        task_id: task_id.to_string(),
        trace_id: trace_id.to_string(),
        created: true,
        session_id: String::new(),
    })
}
