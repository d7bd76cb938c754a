//! A task's status: the names it has in the database, on the wire and in the CLI. How
//! a task moves between them is [`crate::lifecycle`]'s.

use crate::{ProtocolError, pb};

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
    /// Waiting for its delayed start (`not_before`): stored, not yet dispatched.
    Scheduled,
}

impl TaskStatus {
    pub const ALL: [TaskStatus; 12] = [
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
        Self::Scheduled,
    ];

    /// A terminal task never changes again.
    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            Self::Queued | Self::Running | Self::AwaitingApproval | Self::Scheduled
        )
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
            Self::Scheduled => "scheduled",
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
            TaskStatus::Scheduled => Self::Scheduled,
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
            pb::TaskStatus::Scheduled => Self::Scheduled,
        })
    }
}

/// A result webhook's wire state as its lowercase name (`delivered`), as the CLI, the
/// HTTP API and the SDKs show it; `unknown` for a value this version does not know.
pub fn webhook_state_name(value: i32) -> &'static str {
    match crate::pb::WebhookState::try_from(value) {
        Ok(crate::pb::WebhookState::Waiting) => "waiting",
        Ok(crate::pb::WebhookState::Pending) => "pending",
        Ok(crate::pb::WebhookState::Delivered) => "delivered",
        Ok(crate::pb::WebhookState::Failed) => "failed",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn status_names_round_trip(s in proptest::sample::select(TaskStatus::ALL.to_vec())) {
            prop_assert_eq!(s.as_str().parse::<TaskStatus>().expect("known"), s);
            prop_assert_eq!(TaskStatus::from_wire("status", pb::TaskStatus::from(s) as i32).expect("known"), s);
        }
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
