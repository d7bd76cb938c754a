//! Store records to API messages.

use taskwire_protocol::cost::TaskUsage;
use taskwire_protocol::{TaskStatus, Usage, pb, time};
use taskwire_store::{AttemptRecord, TaskRecord};

/// The task's [`TaskUsage`]: its own usage from its row, its subtree's as summed by
/// `Store::subtree_usage` (the row's own when the sum did not find it).
pub fn usage_of(r: &TaskRecord, subtree: Option<Usage>) -> TaskUsage {
    TaskUsage {
        own: r.own_usage,
        subtree: subtree.unwrap_or(r.own_usage),
    }
}

/// The API view of a task with its usage, on the task and on its result (see
/// [`TaskUsage`]): what `Get`, `List` and `Replay` answer.
pub fn task_with_subtree(r: &TaskRecord, subtree: Option<Usage>) -> pb::Task {
    let mut task = task_of(r);
    usage_of(r, subtree).set_on_task(&mut task);
    task
}

/// The API view of a task, its usage left unset (see [`task_with_subtree`]).
fn task_of(r: &TaskRecord) -> pb::Task {
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
        usage: None,
        subtree_usage: None,
        max_cost_usd: r.budget.max_cost_usd(),
        max_tokens: r.budget.max_tokens,
        wait: String::new(),
        wait_until: None,
        priority: r.priority.into(),
        // Read separately by `Get` (a table of its own).
        webhook: None,
        not_before: r.not_before.map(taskwire_protocol::time::to_wire),
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

/// The result of a finished task: the one a worker reported (its `usage` the attempt's
/// own report), or, for a task stopped without one (cancelled, expired), a result that
/// carries only the status. A view's result carries the task's [`TaskUsage`] instead
/// ([`task_with_subtree`], `Watch`).
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
        code: taskwire_protocol::ResultErrorCode::ParentEnded
            .as_str()
            .to_owned(),
        message: reason.clone(),
        retryable: false,
    })
}
