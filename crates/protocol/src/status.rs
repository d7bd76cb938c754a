//! Task lifecycle: the status enum and the pure state machine the store mirrors.
//!
//! ```text
//! queued ──claim──▶ running ──finish(epoch)──▶ completed | error | max_steps | budget_exceeded | ...
//!    │                │  ▲ claim (redelivery: new epoch, attempt + 1)
//!    │                └──┘
//!    └──cancel / expire──▶ cancelled | deadline_exceeded     (from any live state)
//! ```
//! Terminal states absorb every event; the attempt and the epoch never decrease.

use crate::{ClaimEpoch, ProtocolError, pb};

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Queued,
    Running,
    AwaitingApproval,
    Completed,
    Error,
    Cancelled,
    DeadlineExceeded,
    MaxSteps,
    Rejected,
    DeadLettered,
    /// The tree spent its budget: a partial, resumable result, like `MaxSteps`.
    BudgetExceeded,
}

impl TaskStatus {
    pub const ALL: [TaskStatus; 11] = [
        Self::Queued,
        Self::Running,
        Self::AwaitingApproval,
        Self::Completed,
        Self::Error,
        Self::Cancelled,
        Self::DeadlineExceeded,
        Self::MaxSteps,
        Self::Rejected,
        Self::DeadLettered,
        Self::BudgetExceeded,
    ];

    /// A terminal task never changes again.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Queued | Self::Running | Self::AwaitingApproval)
    }

    /// The name used in the database, logs, JSON output and CLI flags.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::AwaitingApproval => "awaiting_approval",
            Self::Completed => "completed",
            Self::Error => "error",
            Self::Cancelled => "cancelled",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::MaxSteps => "max_steps",
            Self::Rejected => "rejected",
            Self::DeadLettered => "dead_lettered",
            Self::BudgetExceeded => "budget_exceeded",
        }
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TaskStatus {
    type Err = ProtocolError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| ProtocolError::invalid("status", format!("unknown status {s:?}")))
    }
}

impl From<TaskStatus> for pb::TaskStatus {
    fn from(s: TaskStatus) -> Self {
        match s {
            TaskStatus::Queued => Self::Queued,
            TaskStatus::Running => Self::Running,
            TaskStatus::AwaitingApproval => Self::AwaitingApproval,
            TaskStatus::Completed => Self::Completed,
            TaskStatus::Error => Self::Error,
            TaskStatus::Cancelled => Self::Cancelled,
            TaskStatus::DeadlineExceeded => Self::DeadlineExceeded,
            TaskStatus::MaxSteps => Self::MaxSteps,
            TaskStatus::Rejected => Self::Rejected,
            TaskStatus::DeadLettered => Self::DeadLettered,
            TaskStatus::BudgetExceeded => Self::BudgetExceeded,
        }
    }
}

impl TaskStatus {
    /// Reads the wire enum; `UNSPECIFIED` and unknown numbers are errors.
    pub fn from_wire(field: &'static str, value: i32) -> Result<Self, ProtocolError> {
        let s = pb::TaskStatus::try_from(value).map_err(|_| ProtocolError::UnknownEnum(field))?;
        Ok(match s {
            pb::TaskStatus::Unspecified => return Err(ProtocolError::UnknownEnum(field)),
            pb::TaskStatus::Queued => Self::Queued,
            pb::TaskStatus::Running => Self::Running,
            pb::TaskStatus::AwaitingApproval => Self::AwaitingApproval,
            pb::TaskStatus::Completed => Self::Completed,
            pb::TaskStatus::Error => Self::Error,
            pb::TaskStatus::Cancelled => Self::Cancelled,
            pb::TaskStatus::DeadlineExceeded => Self::DeadlineExceeded,
            pb::TaskStatus::MaxSteps => Self::MaxSteps,
            pb::TaskStatus::Rejected => Self::Rejected,
            pb::TaskStatus::DeadLettered => Self::DeadLettered,
            pb::TaskStatus::BudgetExceeded => Self::BudgetExceeded,
        })
    }
}

/// The part of a task's row the state machine reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskState {
    pub status: TaskStatus,
    pub attempt: u32,
    pub epoch: ClaimEpoch,
}

impl TaskState {
    /// A freshly submitted task.
    pub fn queued() -> Self {
        Self {
            status: TaskStatus::Queued,
            attempt: 0,
            epoch: ClaimEpoch(0),
        }
    }
}

/// Something that happens to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskEvent {
    /// A worker asks to run the task (first delivery or a redelivery).
    Claim,
    /// A worker reports how the attempt fenced by `epoch` ended.
    Finish {
        epoch: ClaimEpoch,
        status: TaskStatus,
    },
    /// A client cancels the task.
    Cancel,
    /// The deadline passed.
    Expire,
}

/// What the caller must do after a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The new state; persist it.
    Changed(TaskState),
    /// Nothing changes (a stale result, an event on a finished task); not an error:
    /// at-least-once delivery makes these normal.
    Ignored(&'static str),
}

/// The pure transition function.
pub fn apply(state: TaskState, event: TaskEvent) -> Transition {
    use TaskStatus::*;
    if state.status.is_terminal() {
        return Transition::Ignored("task is already finished");
    }
    match event {
        TaskEvent::Claim => Transition::Changed(TaskState {
            status: Running,
            attempt: state.attempt + 1,
            epoch: ClaimEpoch(state.epoch.0 + 1),
        }),
        TaskEvent::Finish { epoch, status } => {
            if epoch != state.epoch || state.status == Queued {
                Transition::Ignored("result is from a stale claim")
            } else if !status.is_terminal() {
                Transition::Ignored("a result must carry a terminal status")
            } else {
                Transition::Changed(TaskState { status, ..state })
            }
        }
        TaskEvent::Cancel => Transition::Changed(TaskState {
            status: Cancelled,
            ..state
        }),
        TaskEvent::Expire => Transition::Changed(TaskState {
            status: DeadlineExceeded,
            ..state
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn status() -> impl Strategy<Value = TaskStatus> {
        proptest::sample::select(TaskStatus::ALL.to_vec())
    }

    fn event() -> impl Strategy<Value = TaskEvent> {
        prop_oneof![
            Just(TaskEvent::Claim),
            Just(TaskEvent::Cancel),
            Just(TaskEvent::Expire),
            (0u64..5, status()).prop_map(|(e, s)| TaskEvent::Finish {
                epoch: ClaimEpoch(e),
                status: s
            }),
        ]
    }

    proptest! {
        #[test]
        fn no_event_leaves_a_terminal_state(events in proptest::collection::vec(event(), 0..40)) {
            let mut state = TaskState::queued();
            let mut finished: Option<TaskState> = None;
            for ev in events {
                if let Transition::Changed(next) = apply(state, ev) {
                    prop_assert!(finished.is_none(), "changed after terminal {:?}", finished);
                    state = next;
                }
                if state.status.is_terminal() && finished.is_none() {
                    finished = Some(state);
                }
            }
            if let Some(f) = finished {
                prop_assert_eq!(f, state);
            }
        }

        #[test]
        fn attempt_and_epoch_never_decrease(events in proptest::collection::vec(event(), 0..40)) {
            let mut state = TaskState::queued();
            for ev in events {
                if let Transition::Changed(next) = apply(state, ev) {
                    prop_assert!(next.attempt >= state.attempt);
                    prop_assert!(next.epoch >= state.epoch);
                    state = next;
                }
            }
        }

        #[test]
        fn status_names_round_trip(s in status()) {
            prop_assert_eq!(s.as_str().parse::<TaskStatus>().expect("known"), s);
            prop_assert_eq!(TaskStatus::from_wire("status", pb::TaskStatus::from(s) as i32).expect("known"), s);
        }
    }

    #[test]
    fn stale_epoch_result_is_ignored() {
        let s1 = match apply(TaskState::queued(), TaskEvent::Claim) {
            Transition::Changed(s) => s,
            other => panic!("claim should change state, got {other:?}"),
        };
        let s2 = match apply(s1, TaskEvent::Claim) {
            Transition::Changed(s) => s,
            other => panic!("reclaim should change state, got {other:?}"),
        };
        assert_eq!(s2.attempt, 2);
        let stale = apply(
            s2,
            TaskEvent::Finish {
                epoch: s1.epoch,
                status: TaskStatus::Completed,
            },
        );
        assert!(matches!(stale, Transition::Ignored(_)));
        let fresh = apply(
            s2,
            TaskEvent::Finish {
                epoch: s2.epoch,
                status: TaskStatus::Completed,
            },
        );
        assert!(matches!(
            fresh,
            Transition::Changed(TaskState {
                status: TaskStatus::Completed,
                ..
            })
        ));
    }

    #[test]
    fn unspecified_wire_status_is_an_error() {
        assert_eq!(
            TaskStatus::from_wire("status", 0),
            Err(ProtocolError::UnknownEnum("status"))
        );
        assert_eq!(
            TaskStatus::from_wire("status", 999),
            Err(ProtocolError::UnknownEnum("status"))
        );
    }
}
