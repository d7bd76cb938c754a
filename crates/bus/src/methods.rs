//! The table of worker requests: for each [`Method`], its subject, how long a try
//! waits for an answer, and whether an unanswered try may be repeated.
//!
//! | method | subject | timeout per try | retry when unanswered |
//! |---|---|---|---|
//! | `claim` | `<P>.rpc.claim` | 10 s (the worker's `claim_timeout`) | never: the message is offered again later |
//! | `claim_batch` | `<P>.rpc.claims` | 10 s (the worker's `claim_timeout`) | never: each message is offered again later |
//! | `child_submit` | `<P>.worker.child` | 3 s | 3 tries: idempotent by its key `child:<parent>:<call id>` |
//! | `task_lookup` | `<P>.worker.task` | 3 s | 3 tries: a read |
//! | `agent_spec` | `<P>.worker.spec` | 3 s | 3 tries: a read |
//! | `session_load` | `<P>.worker.session.load` | 3 s | 3 tries: a read |
//! | `session_save` | `<P>.worker.session.save` | 3 s | 3 tries: the same transcript, fenced by the claim |
//! | `approval_ask` | `<P>.worker.approval` | 3 s | 3 tries: keyed by the request id |
//! | `approval_check` | `<P>.worker.approval` | 3 s | 3 tries: a read |
//! | `approval_timeout` | `<P>.worker.approval` | 3 s | 3 tries: closing a closed ask returns its answer |
//!
//! Only a try that got no answer (a timeout, no coordinator listening) is repeated,
//! after 0.5 s, then 1 s: an answer, even a refusal, is the coordinator's decision.
//! A request that is never answered fails `UNAVAILABLE`.

use backon::BackoffBuilder as _;
use std::fmt;
use std::time::Duration;

use crate::Subjects;

/// A request from a worker to the coordinators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Claim,
    /// The claims one worker had waiting at once, in one request.
    ClaimBatch,
    ChildSubmit,
    TaskLookup,
    AgentSpec,
    SessionLoad,
    SessionSave,
    ApprovalAsk,
    ApprovalCheck,
    ApprovalTimeout,
}

/// Whether a request that got no answer may be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Never: a repeat would not be the same request (a claim makes a new epoch).
    Never,
    /// Up to `tries` in all, waiting `backoff`, then twice as long each time, in
    /// between: the request is idempotent.
    Idempotent { tries: u32, backoff: Duration },
}

impl Retry {
    /// How many tries in all.
    pub fn tries(self) -> u32 {
        match self {
            Self::Never => 1,
            Self::Idempotent { tries, .. } => tries.max(1),
        }
    }

    /// The waits between the tries.
    pub fn delays(self) -> backon::ExponentialBackoff {
        let backoff = match self {
            Self::Never => Duration::ZERO,
            Self::Idempotent { backoff, .. } => backoff,
        };
        backon::ExponentialBuilder::new()
            .with_min_delay(backoff)
            .with_factor(2.0)
            .with_max_times(self.tries().saturating_sub(1) as usize)
            .build()
    }
}

const TRY_TIMEOUT: Duration = Duration::from_secs(3);
const IDEMPOTENT: Retry = Retry::Idempotent {
    tries: 3,
    backoff: Duration::from_millis(500),
};

impl Method {
    pub const ALL: [Method; 10] = [
        Self::Claim,
        Self::ClaimBatch,
        Self::ChildSubmit,
        Self::TaskLookup,
        Self::AgentSpec,
        Self::SessionLoad,
        Self::SessionSave,
        Self::ApprovalAsk,
        Self::ApprovalCheck,
        Self::ApprovalTimeout,
    ];

    /// Its name in logs and errors.
    pub fn name(self) -> &'static str {
        match self {
            Self::Claim => "claim",
            Self::ClaimBatch => "claim_batch",
            Self::ChildSubmit => "child_submit",
            Self::TaskLookup => "task_lookup",
            Self::AgentSpec => "agent_spec",
            Self::SessionLoad => "session_load",
            Self::SessionSave => "session_save",
            Self::ApprovalAsk => "approval_ask",
            Self::ApprovalCheck => "approval_check",
            Self::ApprovalTimeout => "approval_timeout",
        }
    }

    /// The last subject token(s) after `<prefix>.worker.`; `None` for claims, which have
    /// their own subjects (their responder batches).
    pub fn worker_token(self) -> Option<&'static str> {
        match self {
            Self::Claim | Self::ClaimBatch => None,
            Self::ChildSubmit => Some("child"),
            Self::TaskLookup => Some("task"),
            Self::AgentSpec => Some("spec"),
            Self::SessionLoad => Some("session.load"),
            Self::SessionSave => Some("session.save"),
            Self::ApprovalAsk | Self::ApprovalCheck | Self::ApprovalTimeout => Some("approval"),
        }
    }

    /// Where it is sent.
    pub fn subject(self, subjects: &Subjects) -> String {
        match (self, self.worker_token()) {
            (Self::ClaimBatch, _) => subjects.claims(),
            (_, None) => subjects.claim(),
            (_, Some(token)) => subjects.rpc(token),
        }
    }

    /// How long one try waits for an answer.
    pub fn timeout(self) -> Duration {
        match self {
            Self::Claim | Self::ClaimBatch => Duration::from_secs(10),
            _ => TRY_TIMEOUT,
        }
    }

    /// Whether an unanswered try is repeated.
    pub fn retry(self) -> Retry {
        match self {
            Self::Claim | Self::ClaimBatch => Retry::Never,
            _ => IDEMPOTENT,
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The kind of request a message on `<prefix>.worker.<token>` is, by its token. The
/// three approval requests share `approval` (the message tells them apart), reported
/// as [`Method::ApprovalAsk`].
pub(crate) fn of_worker_token(token: &str) -> Option<Method> {
    Method::ALL
        .into_iter()
        .find(|m| m.worker_token() == Some(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_worker_subject_is_under_the_rendered_worker_permissions() {
        let s = Subjects::new("tw");
        for m in Method::ALL {
            let subject = m.subject(&s);
            match m {
                Method::Claim => assert_eq!(subject, "tw.rpc.claim"),
                Method::ClaimBatch => assert_eq!(subject, "tw.rpc.claims"),
                _ => assert!(subject.starts_with("tw.worker."), "{m}: {subject}"),
            }
        }
        assert_eq!(Method::SessionLoad.subject(&s), "tw.worker.session.load");
        assert_eq!(Method::ChildSubmit.subject(&s), "tw.worker.child");
        assert_eq!(Method::AgentSpec.subject(&s), "tw.worker.spec");
    }

    #[test]
    fn a_worker_subject_token_finds_its_method() {
        for m in Method::ALL
            .into_iter()
            .filter(|m| !matches!(m, Method::Claim | Method::ClaimBatch))
        {
            let found = of_worker_token(m.worker_token().expect("a worker request"));
            let expected = match m {
                Method::ApprovalCheck | Method::ApprovalTimeout => Method::ApprovalAsk,
                other => other,
            };
            assert_eq!(found, Some(expected), "{m}");
        }
        assert_eq!(of_worker_token("nonsense"), None);
    }

    #[test]
    fn only_a_claim_is_never_repeated() {
        for m in Method::ALL {
            match m {
                Method::Claim | Method::ClaimBatch => assert_eq!(m.retry().tries(), 1),
                _ => assert_eq!(m.retry().tries(), 3, "{m}"),
            }
            assert!(m.timeout() >= Duration::from_secs(3), "{m}");
        }
        assert_eq!(Method::Claim.timeout(), Duration::from_secs(10));
    }
}
