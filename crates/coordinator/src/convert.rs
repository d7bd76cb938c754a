//! Store records to API messages.

use taskwire_protocol::{TaskStatus, Usage, pb, time};
use taskwire_store::{AttemptRecord, TaskRecord};

/// The API view of a task with its subtree's usage (recorded results of it and every
/// descendant; see `Store::subtree_usage`).
pub fn task_with_subtree(r: &TaskRecord, subtree: Option<Usage>) -> pb::Task {
    pb::Task {
        subtree_usage: Some(pb::Usage::from(&subtree.unwrap_or(r.own_usage))),
        ..task_of(r)
    }
}

/// The API view of a task; its subtree usage is its own (see [`task_with_subtree`]).
pub fn task_of(r: &TaskRecord) -> pb::Task {
    pb::Task {
        task_id: r.task_id.to_string(),
        parent_task_id: r.parent_task_id.map(|p| p.to_string()).unwrap_or_default(),
        trace_id: r.trace_id.to_string(),
        tenant: r.tenant.clone(),
        agent: r.agent.clone(),
        prompt: r.prompt.clone(),
        status: pb::TaskStatus::from(r.status) as i32,
        attempt: r.attempt,
        created_at: Some(time::to_wire(r.created_at)),
        updated_at: Some(time::to_wire(r.updated_at)),
        deadline: r.deadline.map(time::to_wire),
        result: r.status.is_terminal().then(|| result_of(r)),
        depth: r.depth,
        max_attempts: r.max_attempts,
        attempts: r.attempts.iter().map(attempt_of).collect(),
        title: r.title.clone().unwrap_or_default(),
        usage: Some(pb::Usage::from(&r.own_usage)),
        subtree_usage: Some(pb::Usage::from(&r.own_usage)),
        max_cost_usd: r.budget.max_cost_usd(),
        max_tokens: r.budget.max_tokens,
    }
}

fn attempt_of(a: &AttemptRecord) -> pb::Attempt {
    // `abandoned` (a vanished worker) has no wire status of its own: it is an error.
    let status = match a.status.as_str() {
        "abandoned" => TaskStatus::Error,
        s => s.parse().unwrap_or(TaskStatus::Error),
    };
    pb::Attempt {
        attempt: u32::try_from(a.attempt).unwrap_or_default(),
        worker_id: a.worker_id.clone(),
        status: pb::TaskStatus::from(status) as i32,
        error: a.error.clone().unwrap_or_default(),
        retryable: a.retryable,
        started_at: Some(time::to_wire(a.started_at)),
        finished_at: a.finished_at.map(time::to_wire),
    }
}

/// The result of a finished task: the one a worker reported, or, for a task stopped
/// without one (cancelled, expired), a result that carries only the status.
pub fn result_of(r: &TaskRecord) -> pb::TaskResult {
    match &r.result {
        Some(result) => {
            let mut wire = pb::TaskResult::from(result);
            // The recorded status wins: a task cancelled after its result arrived keeps it.
            wire.status = pb::TaskStatus::from(r.status) as i32;
            wire
        }
        None => pb::TaskResult {
            task_id: r.task_id.to_string(),
            trace_id: r.trace_id.to_string(),
            attempt: r.attempt,
            claim_epoch: r.claim_epoch.0,
            status: pb::TaskStatus::from(r.status) as i32,
            errors: stop_reason(r).into_iter().collect(),
            ..Default::default()
        },
    }
}

/// Why a task was stopped without a result of its own, when that is recorded: only a
/// task cancelled because its parent ended has a reason (`Cancel` clears it).
fn stop_reason(r: &TaskRecord) -> Option<pb::TaskError> {
    let reason = r
        .last_error
        .as_ref()
        .filter(|_| r.status == TaskStatus::Cancelled)?;
    Some(pb::TaskError {
        code: "parent_ended".to_owned(),
        message: reason.clone(),
        retryable: false,
    })
}
