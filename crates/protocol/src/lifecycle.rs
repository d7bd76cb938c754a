//! The task lifecycle: every state a task can be in, every event that moves it, and
//! what must happen after each move, as one pure function ([`apply`]).
//!
//! The store writes a status only through statements whose allowed from-states are
//! [`sources`] and whose new states come from here; the worker and the coordinator
//! perform the [`Effect`]s this module names (see docs/architecture.md).
//!
//! | event | from | to | effects |
//! |---|---|---|---|
//! | submit | (none) | queued | dispatch |
//! | submit with a delayed start (`not_before` ahead) | (none) | scheduled | — |
//! | due (`not_before` reached) | scheduled | queued | dispatch |
//! | claim (an attempt starts; a redelivery too) | queued, running, awaiting_approval | running, epoch and attempt + 1 | record attempt |
//! | claim, deadline passed | queued, running, awaiting_approval | deadline_exceeded | stop worker, notify watchers, cancel descendants |
//! | claim, attempt budget spent | queued, running, awaiting_approval | dead_lettered | stop worker, notify watchers, cancel descendants |
//! | ask approval (fenced by epoch) | running, awaiting_approval | awaiting_approval | — |
//! | approval closed (answered or timed out), none left pending | awaiting_approval | running | — |
//! | await rate limit (fenced by epoch) | running | running (the task's `wait`, not a status) | — |
//! | finish (fenced by epoch) with any result status | running, awaiting_approval | that status | record attempt, notify watchers, cancel descendants |
//! | finish with a retryable error, attempts left | running, awaiting_approval | queued (a retry) | record attempt, redeliver |
//! | finish with a retryable error, budget spent | running, awaiting_approval | dead_lettered | record attempt, notify watchers, cancel descendants |
//! | dead-letter (the bus gave up delivering it) | queued, running, awaiting_approval | dead_lettered | stop worker, notify watchers, cancel descendants |
//! | expire (deadline) | scheduled, queued, running, awaiting_approval | deadline_exceeded | stop worker, notify watchers, cancel descendants |
//! | cancel (own, or an ancestor ended) | scheduled, queued, running, awaiting_approval | cancelled | stop worker, notify watchers, cancel descendants |
//! | replay | dead_lettered, error | queued, a fresh attempt budget | dispatch |
//!
//! A terminal state absorbs every event ([`absorbs`]) but a replay, which
//! `dead_lettered` and `error` accept and the others refuse. An absorbed event is not an error (at-least-once
//! delivery makes duplicates normal): it changes nothing and has no effects. Events
//! that are wrong for the state (a result of a stale claim, a replay of a completed
//! task) are an [`InvalidTransition`]. The attempt and the epoch never decrease.
//!
//! Budget exhaustion is the worker's result status `budget_exceeded` (a finish): the
//! worker measures the spend.

use crate::{ClaimEpoch, TaskStatus};

/// The part of a task's row the lifecycle reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskState {
    pub status: TaskStatus,
    /// Attempts started since submit (a replay keeps counting).
    pub attempt: u32,
    /// `attempt` as of the last replay: the attempt budget counts from it.
    pub attempt_base: u32,
    /// The attempt budget: how many attempts may start after submit or a replay.
    pub max_attempts: u32,
    /// The epoch of the newest claim: only its attempt may report.
    pub epoch: ClaimEpoch,
}

impl TaskState {
    /// A task just submitted, with its attempt budget.
    pub fn submitted(max_attempts: u32) -> Self {
        Self {
            status: TaskStatus::Queued,
            attempt: 0,
            attempt_base: 0,
            max_attempts,
            epoch: ClaimEpoch(0),
        }
    }

    /// Whether another attempt may start after the current one.
    pub fn attempts_left(&self) -> bool {
        self.attempt.saturating_sub(self.attempt_base) < self.max_attempts
    }
}

/// How an attempt ended, as its worker reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// The status the session ended with (a terminal status).
    pub status: TaskStatus,
    /// The attempt failed for a reason that may pass (an `error` only).
    pub retryable: bool,
}

/// Why a task was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelCause {
    /// A caller cancelled it (or a tree above it, in the same request).
    Requested,
    /// A task above it ended while it was live.
    AncestorEnded,
}

/// Something that happens to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskEvent {
    /// A worker asks to run it: its first delivery or a redelivery. `deadline_passed`
    /// is read from the clock as the claim is made.
    Claim { deadline_passed: bool },
    /// The session of the attempt `epoch` asks a person to approve a tool call.
    AskApproval { epoch: ClaimEpoch },
    /// One of its approvals was answered or timed out; `others_pending`: some are not.
    ApprovalClosed { others_pending: bool },
    /// The session of the attempt `epoch` waits for a model's rate-limit permit.
    RateLimitWait { epoch: ClaimEpoch },
    /// The worker of the attempt `epoch` reports how it ended.
    Finish { epoch: ClaimEpoch, report: Report },
    /// The deadline passed while it was live (the sweeper).
    Expire,
    /// Its message was delivered as often as the bus allows, never settled.
    DeadLetter,
    /// It is cancelled.
    Cancel(CancelCause),
    /// An operator queues a failed task again.
    Replay,
    /// Its delayed start (`not_before`) came: it goes to the workers.
    Due,
}

/// The kinds of [`TaskEvent`], for tables keyed by event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    Claim,
    AskApproval,
    ApprovalClosed,
    RateLimitWait,
    Finish,
    Expire,
    DeadLetter,
    Cancel,
    Replay,
    Due,
}

impl EventKind {
    pub const ALL: [EventKind; 10] = [
        Self::Claim,
        Self::AskApproval,
        Self::ApprovalClosed,
        Self::RateLimitWait,
        Self::Finish,
        Self::Expire,
        Self::DeadLetter,
        Self::Cancel,
        Self::Replay,
        Self::Due,
    ];
}

impl TaskEvent {
    pub fn kind(&self) -> EventKind {
        match self {
            Self::Claim { .. } => EventKind::Claim,
            Self::AskApproval { .. } => EventKind::AskApproval,
            Self::ApprovalClosed { .. } => EventKind::ApprovalClosed,
            Self::RateLimitWait { .. } => EventKind::RateLimitWait,
            Self::Finish { .. } => EventKind::Finish,
            Self::Expire => EventKind::Expire,
            Self::DeadLetter => EventKind::DeadLetter,
            Self::Cancel(_) => EventKind::Cancel,
            Self::Replay => EventKind::Replay,
            Self::Due => EventKind::Due,
        }
    }
}

/// What must happen after a transition, and who does it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Its request goes to the workers: an outbox row, written by the store in the
    /// transition's own transaction.
    Dispatch,
    /// The attempt's row: a new one for a claim (the one it supersedes abandoned), its
    /// outcome for a finish; written by the store in the transition's statement.
    RecordAttempt,
    /// The worker offers the task again after its retry backoff (a nak with a delay).
    Redeliver,
    /// A worker still running it must stop (a cancel notice; coordinator).
    StopWorker,
    /// Those watching it learn it finished (a finished notice; coordinator).
    NotifyWatchers,
    /// Its live descendants are cancelled, each with [`CancelCause::AncestorEnded`]
    /// (coordinator).
    CancelDescendants,
}

/// An event that is wrong for the task's state; nothing changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTransition {
    #[error("the attempt of epoch {} is not the current one ({})", given.0, current.0)]
    StaleEpoch {
        given: ClaimEpoch,
        current: ClaimEpoch,
    },
    #[error("no attempt of the task is running")]
    NotRunning,
    #[error("`{0}` is not how an attempt ends")]
    NotAResult(TaskStatus),
    #[error("the task is {0}; only dead_lettered or error tasks can be replayed")]
    NotReplayable(TaskStatus),
}

/// A transition's outcome: the new state and what must happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub state: TaskState,
    pub effects: &'static [Effect],
}

impl Step {
    fn stay(state: TaskState) -> Self {
        Self {
            state,
            effects: &[],
        }
    }
}

/// The statuses of a dispatched task that has not ended.
pub const LIVE: [TaskStatus; 3] = [
    TaskStatus::Queued,
    TaskStatus::Running,
    TaskStatus::AwaitingApproval,
];

/// The statuses a task may be in while it can still change: [`LIVE`], and waiting for
/// its delayed start.
pub const UNFINISHED: [TaskStatus; 4] = [
    TaskStatus::Scheduled,
    TaskStatus::Queued,
    TaskStatus::Running,
    TaskStatus::AwaitingApproval,
];

/// The statuses in which an attempt is running (a worker holds it).
const CLAIMED: [TaskStatus; 2] = [TaskStatus::Running, TaskStatus::AwaitingApproval];

/// The statuses from which an event of `kind` may be applied (the others absorb it
/// or refuse it): the fence of every statement that writes a status.
pub fn sources(kind: EventKind) -> &'static [TaskStatus] {
    match kind {
        EventKind::Claim | EventKind::DeadLetter => &LIVE,
        EventKind::Expire | EventKind::Cancel => &UNFINISHED,
        EventKind::Due => &[TaskStatus::Scheduled],
        EventKind::AskApproval | EventKind::Finish => &CLAIMED,
        EventKind::ApprovalClosed => &[TaskStatus::AwaitingApproval],
        EventKind::RateLimitWait => &[TaskStatus::Running],
        EventKind::Replay => &[TaskStatus::DeadLettered, TaskStatus::Error],
    }
}

/// Whether `status` absorbs events of `kind`: they change nothing, and are no error.
/// A terminal state absorbs everything but a replay (a person's request: refused with
/// the reason unless the task failed).
pub fn absorbs(status: TaskStatus, kind: EventKind) -> bool {
    status.is_terminal() && kind != EventKind::Replay
}

/// What follows a transition of `kind` into `to`: the same for every from-state, so a
/// statement that returns only the new status can tell its effects.
pub fn effects(kind: EventKind, to: TaskStatus) -> &'static [Effect] {
    use Effect::*;
    match (kind, to) {
        (EventKind::Claim, TaskStatus::Running) => &[RecordAttempt],
        (EventKind::Finish, TaskStatus::Queued) => &[RecordAttempt, Redeliver],
        (EventKind::Finish, to) if to.is_terminal() => {
            &[RecordAttempt, NotifyWatchers, CancelDescendants]
        }
        (EventKind::Claim | EventKind::Expire | EventKind::DeadLetter | EventKind::Cancel, to)
            if to.is_terminal() =>
        {
            &[StopWorker, NotifyWatchers, CancelDescendants]
        }
        (EventKind::Replay | EventKind::Due, TaskStatus::Queued) => &[Dispatch],
        _ => &[],
    }
}

/// A submitted task's first state, and what must follow.
pub fn submit(max_attempts: u32) -> Step {
    Step {
        state: TaskState::submitted(max_attempts),
        effects: &[Effect::Dispatch],
    }
}

/// A task submitted with a delayed start still ahead: stored, dispatched when due.
pub fn schedule(max_attempts: u32) -> Step {
    Step {
        state: TaskState {
            status: TaskStatus::Scheduled,
            ..TaskState::submitted(max_attempts)
        },
        effects: &[],
    }
}

/// The status an attempt's report leads to: a retryable error is retried while
/// `attempts_left`, else dead-lettered; any other report is the status it names.
pub fn after_attempt(report: Report, attempts_left: bool) -> Result<TaskStatus, InvalidTransition> {
    match report.status {
        TaskStatus::Error if report.retryable && attempts_left => Ok(TaskStatus::Queued),
        TaskStatus::Error if report.retryable => Ok(TaskStatus::DeadLettered),
        s if s.is_terminal() => Ok(s),
        s => Err(InvalidTransition::NotAResult(s)),
    }
}

/// The transition function: `event` applied to a task in `state`.
pub fn apply(state: TaskState, event: TaskEvent) -> Result<Step, InvalidTransition> {
    use TaskStatus::*;
    let kind = event.kind();
    if absorbs(state.status, kind) {
        return Ok(Step::stay(state));
    }
    let fenced = |epoch: ClaimEpoch| {
        if !CLAIMED.contains(&state.status) {
            Err(InvalidTransition::NotRunning)
        } else if epoch != state.epoch {
            Err(InvalidTransition::StaleEpoch {
                given: epoch,
                current: state.epoch,
            })
        } else {
            Ok(())
        }
    };
    let to = |status: TaskStatus, next: TaskState| Step {
        state: TaskState { status, ..next },
        effects: effects(kind, status),
    };
    Ok(match event {
        // Nothing of a dispatched task's happens before it is dispatched.
        TaskEvent::Claim { .. } | TaskEvent::DeadLetter if state.status == Scheduled => {
            Step::stay(state)
        }
        TaskEvent::Due => match state.status {
            Scheduled => to(Queued, state),
            _ => Step::stay(state),
        },
        TaskEvent::Claim { deadline_passed } => {
            if deadline_passed {
                to(DeadlineExceeded, state)
            } else if !state.attempts_left() {
                to(DeadLettered, state)
            } else {
                let claimed = TaskState {
                    attempt: state.attempt + 1,
                    epoch: ClaimEpoch(state.epoch.0 + 1),
                    ..state
                };
                to(Running, claimed)
            }
        }
        TaskEvent::AskApproval { epoch } => {
            fenced(epoch)?;
            to(AwaitingApproval, state)
        }
        TaskEvent::ApprovalClosed { others_pending } => match state.status {
            AwaitingApproval if !others_pending => to(Running, state),
            _ => Step::stay(state),
        },
        TaskEvent::RateLimitWait { epoch } => {
            fenced(epoch)?;
            if state.status != Running {
                return Err(InvalidTransition::NotRunning);
            }
            Step::stay(state)
        }
        TaskEvent::Finish { epoch, report } => {
            fenced(epoch)?;
            to(after_attempt(report, state.attempts_left())?, state)
        }
        TaskEvent::Expire => to(DeadlineExceeded, state),
        TaskEvent::DeadLetter => to(DeadLettered, state),
        TaskEvent::Cancel(_) => to(Cancelled, state),
        TaskEvent::Replay => {
            if !sources(kind).contains(&state.status) {
                return Err(InvalidTransition::NotReplayable(state.status));
            }
            let replayed = TaskState {
                attempt_base: state.attempt,
                ..state
            };
            to(Queued, replayed)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn status() -> impl Strategy<Value = TaskStatus> {
        proptest::sample::select(TaskStatus::ALL.to_vec())
    }

    fn event() -> impl Strategy<Value = TaskEvent> {
        let epoch = (0u64..5).prop_map(ClaimEpoch);
        prop_oneof![
            any::<bool>().prop_map(|deadline_passed| TaskEvent::Claim { deadline_passed }),
            epoch
                .clone()
                .prop_map(|epoch| TaskEvent::AskApproval { epoch }),
            any::<bool>().prop_map(|others_pending| TaskEvent::ApprovalClosed { others_pending }),
            epoch
                .clone()
                .prop_map(|epoch| TaskEvent::RateLimitWait { epoch }),
            (epoch, status(), any::<bool>()).prop_map(|(epoch, status, retryable)| {
                TaskEvent::Finish {
                    epoch,
                    report: Report { status, retryable },
                }
            }),
            Just(TaskEvent::Expire),
            Just(TaskEvent::DeadLetter),
            Just(TaskEvent::Cancel(CancelCause::Requested)),
            Just(TaskEvent::Cancel(CancelCause::AncestorEnded)),
            Just(TaskEvent::Replay),
            Just(TaskEvent::Due),
        ]
    }

    fn state() -> impl Strategy<Value = TaskState> {
        (status(), 0u32..6, 0u32..3, 1u32..4, 0u64..6).prop_map(
            |(status, attempt, base, max_attempts, epoch)| TaskState {
                status,
                attempt,
                attempt_base: base.min(attempt),
                max_attempts,
                epoch: ClaimEpoch(epoch),
            },
        )
    }

    proptest! {
        #[test]
        fn a_terminal_state_changes_only_by_a_replay(events in proptest::collection::vec(event(), 0..40)) {
            let mut state = TaskState::submitted(3);
            for ev in events {
                let Ok(step) = apply(state, ev) else { continue };
                if state.status.is_terminal() && step.state != state {
                    prop_assert_eq!(ev, TaskEvent::Replay);
                    prop_assert!(matches!(state.status, TaskStatus::DeadLettered | TaskStatus::Error));
                }
                state = step.state;
            }
        }

        #[test]
        fn attempt_and_epoch_never_decrease(events in proptest::collection::vec(event(), 0..40)) {
            let mut state = TaskState::submitted(3);
            for ev in events {
                if let Ok(step) = apply(state, ev) {
                    prop_assert!(step.state.attempt >= state.attempt);
                    prop_assert!(step.state.epoch >= state.epoch);
                    prop_assert!(step.state.attempt_base <= step.state.attempt);
                    state = step.state;
                }
            }
        }

        /// The tables the store and the coordinator use agree with `apply`: a status
        /// changes only from the event's sources, an event a terminal state absorbs
        /// changes nothing, and the effects are those `effects` names for the new status.
        #[test]
        fn the_tables_agree_with_the_transition_function(state in state(), ev in event()) {
            let kind = ev.kind();
            match apply(state, ev) {
                Ok(step) => {
                    if step.state.status != state.status {
                        prop_assert!(sources(kind).contains(&state.status), "{:?} from {:?}", kind, state.status);
                    }
                    if absorbs(state.status, kind) {
                        prop_assert_eq!(&step, &Step::stay(state));
                    }
                    if step.state != state {
                        prop_assert_eq!(step.effects, effects(kind, step.state.status));
                    } else {
                        prop_assert!(step.effects.is_empty());
                    }
                }
                Err(_) => prop_assert!(!absorbs(state.status, kind)),
            }
        }

        /// A task ends with a result, a deadline, a dead letter or a cancel; whichever,
        /// its subtree ends and its watchers hear of it.
        #[test]
        fn every_way_into_a_terminal_state_ends_the_subtree(state in state(), ev in event()) {
            if let Ok(step) = apply(state, ev)
                && step.state.status.is_terminal()
                && !state.status.is_terminal()
            {
                prop_assert!(step.effects.contains(&Effect::CancelDescendants));
                prop_assert!(step.effects.contains(&Effect::NotifyWatchers));
            }
        }
    }

    fn running(attempt: u32, max_attempts: u32) -> TaskState {
        TaskState {
            status: TaskStatus::Running,
            attempt,
            attempt_base: 0,
            max_attempts,
            epoch: ClaimEpoch(u64::from(attempt)),
        }
    }

    fn finish(
        state: TaskState,
        status: TaskStatus,
        retryable: bool,
    ) -> Result<Step, InvalidTransition> {
        apply(
            state,
            TaskEvent::Finish {
                epoch: state.epoch,
                report: Report { status, retryable },
            },
        )
    }

    #[test]
    fn a_retryable_error_is_a_retry_while_attempts_last_and_a_dead_letter_after() {
        let retry = finish(running(1, 2), TaskStatus::Error, true).expect("valid");
        assert_eq!(retry.state.status, TaskStatus::Queued);
        assert_eq!(retry.effects, &[Effect::RecordAttempt, Effect::Redeliver]);
        let spent = finish(running(2, 2), TaskStatus::Error, true).expect("valid");
        assert_eq!(spent.state.status, TaskStatus::DeadLettered);
        assert!(spent.effects.contains(&Effect::CancelDescendants));
        let fatal = finish(running(1, 2), TaskStatus::Error, false).expect("valid");
        assert_eq!(fatal.state.status, TaskStatus::Error);
    }

    #[test]
    fn a_result_of_a_stale_claim_or_of_a_queued_task_is_refused() {
        let state = running(2, 3);
        let stale = apply(
            state,
            TaskEvent::Finish {
                epoch: ClaimEpoch(1),
                report: Report {
                    status: TaskStatus::Completed,
                    retryable: false,
                },
            },
        );
        assert_eq!(
            stale,
            Err(InvalidTransition::StaleEpoch {
                given: ClaimEpoch(1),
                current: ClaimEpoch(2)
            })
        );
        let queued = TaskState {
            status: TaskStatus::Queued,
            ..state
        };
        assert_eq!(
            finish(queued, TaskStatus::Completed, false),
            Err(InvalidTransition::NotRunning)
        );
        assert_eq!(
            finish(state, TaskStatus::Running, false),
            Err(InvalidTransition::NotAResult(TaskStatus::Running))
        );
    }

    #[test]
    fn a_claim_past_the_deadline_or_the_budget_ends_the_task() {
        let expired = apply(
            running(1, 3),
            TaskEvent::Claim {
                deadline_passed: true,
            },
        )
        .expect("valid");
        assert_eq!(expired.state.status, TaskStatus::DeadlineExceeded);
        let spent = apply(
            running(3, 3),
            TaskEvent::Claim {
                deadline_passed: false,
            },
        )
        .expect("valid");
        assert_eq!(spent.state.status, TaskStatus::DeadLettered);
        assert_eq!(spent.state.epoch, ClaimEpoch(3), "no attempt starts");
        let again = apply(
            running(1, 3),
            TaskEvent::Claim {
                deadline_passed: false,
            },
        )
        .expect("valid");
        assert_eq!((again.state.attempt, again.state.epoch), (2, ClaimEpoch(2)));
    }

    #[test]
    fn a_replay_restarts_the_budget_of_a_failed_task_only() {
        let failed = TaskState {
            status: TaskStatus::DeadLettered,
            ..running(3, 3)
        };
        let replayed = apply(failed, TaskEvent::Replay).expect("valid");
        assert_eq!(replayed.state.status, TaskStatus::Queued);
        assert!(replayed.state.attempts_left());
        assert_eq!(replayed.effects, &[Effect::Dispatch]);
        let done = TaskState {
            status: TaskStatus::Completed,
            ..failed
        };
        assert_eq!(
            apply(done, TaskEvent::Replay),
            Err(InvalidTransition::NotReplayable(TaskStatus::Completed))
        );
        assert_eq!(
            apply(running(1, 3), TaskEvent::Replay),
            Err(InvalidTransition::NotReplayable(TaskStatus::Running))
        );
    }

    #[test]
    fn a_scheduled_task_is_dispatched_when_due_and_may_be_cancelled_or_expire_before() {
        let scheduled = schedule(3);
        assert_eq!(scheduled.state.status, TaskStatus::Scheduled);
        assert!(scheduled.effects.is_empty(), "nothing is dispatched yet");
        let due = apply(scheduled.state, TaskEvent::Due).expect("valid");
        assert_eq!(due.state.status, TaskStatus::Queued);
        assert_eq!(due.effects, &[Effect::Dispatch]);
        let again = apply(due.state, TaskEvent::Due).expect("valid");
        assert_eq!(again, Step::stay(due.state), "a second due changes nothing");
        for (event, to) in [
            (
                TaskEvent::Cancel(CancelCause::Requested),
                TaskStatus::Cancelled,
            ),
            (TaskEvent::Expire, TaskStatus::DeadlineExceeded),
        ] {
            let ended = apply(scheduled.state, event).expect("valid");
            assert_eq!(ended.state.status, to);
            assert!(ended.effects.contains(&Effect::NotifyWatchers));
        }
        let claimed = apply(
            scheduled.state,
            TaskEvent::Claim {
                deadline_passed: false,
            },
        )
        .expect("valid");
        assert_eq!(
            claimed,
            Step::stay(scheduled.state),
            "never claimed before it is due"
        );
    }

    #[test]
    fn the_last_approval_closed_resumes_the_task() {
        let asked = apply(
            running(1, 3),
            TaskEvent::AskApproval {
                epoch: ClaimEpoch(1),
            },
        )
        .expect("valid");
        assert_eq!(asked.state.status, TaskStatus::AwaitingApproval);
        let one = apply(
            asked.state,
            TaskEvent::ApprovalClosed {
                others_pending: true,
            },
        )
        .expect("valid");
        assert_eq!(one.state.status, TaskStatus::AwaitingApproval);
        let last = apply(
            asked.state,
            TaskEvent::ApprovalClosed {
                others_pending: false,
            },
        )
        .expect("valid");
        assert_eq!(last.state.status, TaskStatus::Running);
    }
}
