//! Subject and stream names, all derived from one prefix.

use taskwire_protocol::TaskId;

/// The queue group in which coordinators answer claims and worker requests.
pub const COORDINATORS_GROUP: &str = "taskwire-coordinators";
/// The coordinators' durable consumer on the results stream.
pub const RESULTS_CONSUMER: &str = "aggregator";
/// The coordinators' durable consumer on the dead-letter stream.
pub const DEAD_LETTERS_CONSUMER: &str = "dead-letters";
/// The coordinators' durable consumer on the advisories stream.
pub const ADVISORIES_CONSUMER: &str = "advisories";

/// The names of one deployment's subjects and streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subjects {
    prefix: String,
    stream_prefix: String,
}

impl Subjects {
    /// `prefix` is a subject token such as `taskwire` (the default) or `t42`.
    pub fn new(prefix: &str) -> Self {
        let stream_prefix = prefix
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        Self {
            prefix: prefix.to_owned(),
            stream_prefix,
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Where tasks for `queue` are dispatched.
    pub fn tasks(&self, queue: &str) -> String {
        format!("{}.tasks.{queue}", self.prefix)
    }
    pub fn tasks_all(&self) -> String {
        format!("{}.tasks.>", self.prefix)
    }
    /// Progress events of one task.
    pub fn progress(&self, task: TaskId) -> String {
        format!("{}.progress.{task}", self.prefix)
    }
    pub fn progress_all(&self) -> String {
        format!("{}.progress.>", self.prefix)
    }
    /// Results of one task's attempts.
    pub fn result(&self, task: TaskId) -> String {
        format!("{}.results.{task}", self.prefix)
    }
    pub fn results_all(&self) -> String {
        format!("{}.results.>", self.prefix)
    }
    /// Dead letters reported by workers.
    pub fn dead_letters(&self) -> String {
        format!("{}.dlq", self.prefix)
    }
    /// Claim requests (request/reply to the coordinators' queue group).
    pub fn claim(&self) -> String {
        format!("{}.rpc.claim", self.prefix)
    }
    /// Batches of one worker's claims (request/reply to the coordinators' queue group).
    pub fn claims(&self) -> String {
        format!("{}.rpc.claims", self.prefix)
    }
    /// Worker requests to the coordinators (request/reply, queue group): `child`,
    /// `task`, `session.load`, `session.save`, `approval`. Claims have their own subject
    /// and responder (they are batched).
    pub fn rpc(&self, method: &str) -> String {
        format!("{}.worker.{method}", self.prefix)
    }
    pub fn rpc_all(&self) -> String {
        format!("{}.worker.>", self.prefix)
    }
    /// Approval decisions for one task's worker.
    pub fn approval(&self, task: TaskId) -> String {
        format!("{}.approval.{task}", self.prefix)
    }
    pub fn approval_all(&self) -> String {
        format!("{}.approval.*", self.prefix)
    }
    /// Cancel notice for one running task.
    pub fn cancel(&self, task: TaskId) -> String {
        format!("{}.cancel.{task}", self.prefix)
    }
    pub fn cancel_all(&self) -> String {
        format!("{}.cancel.*", self.prefix)
    }
    /// "This task is finished" notice, published after the result is recorded.
    pub fn finished(&self, task: TaskId) -> String {
        format!("{}.finished.{task}", self.prefix)
    }
    pub fn finished_all(&self) -> String {
        format!("{}.finished.*", self.prefix)
    }
    /// Coordinators share their samples of the fleet's backlog here.
    pub fn backlog(&self) -> String {
        format!("{}.backlog", self.prefix)
    }

    pub fn tasks_stream(&self) -> String {
        format!("{}_TASKS", self.stream_prefix)
    }
    pub fn events_stream(&self) -> String {
        format!("{}_EVENTS", self.stream_prefix)
    }
    pub fn results_stream(&self) -> String {
        format!("{}_RESULTS", self.stream_prefix)
    }
    /// JetStream's max-deliveries advisories for the tasks stream.
    pub fn max_deliveries_advisories(&self) -> String {
        format!(
            "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{}.*",
            self.tasks_stream()
        )
    }
    /// Keeps those advisories until a coordinator has handled them (they are plain
    /// NATS messages, lost when no coordinator is listening).
    pub fn advisories_stream(&self) -> String {
        format!("{}_ADVISORIES", self.stream_prefix)
    }
    pub fn dead_letter_stream(&self) -> String {
        format!("{}_DLQ", self.stream_prefix)
    }
    /// The object store bucket for patches too large for a message.
    pub fn patches_bucket(&self) -> String {
        format!("{}_PATCHES", self.stream_prefix)
    }
    /// The stream behind [`Self::patches_bucket`] (JetStream names it `OBJ_<bucket>`).
    pub fn patches_stream(&self) -> String {
        format!("OBJ_{}", self.patches_bucket())
    }
    /// The subjects of the patch bucket's chunks and descriptions.
    pub fn patches_objects(&self) -> [String; 2] {
        let bucket = self.patches_bucket();
        [format!("$O.{bucket}.C.>"), format!("$O.{bucket}.M.>")]
    }
    /// The key-value bucket of the models' rate budgets (see [`crate::limits`]).
    pub fn limits_bucket(&self) -> String {
        format!("{}_LIMITS", self.stream_prefix)
    }
    /// The stream behind [`Self::limits_bucket`] (JetStream names it `KV_<bucket>`).
    pub fn limits_stream(&self) -> String {
        format!("KV_{}", self.limits_bucket())
    }
    /// The subjects of the limits bucket's keys.
    pub fn limits_keys(&self) -> String {
        format!("$KV.{}.>", self.limits_bucket())
    }
    /// The durable consumer shared by all workers of `queue`.
    pub fn workers_consumer(&self, queue: &str) -> String {
        format!("workers-{queue}")
    }
}

impl Default for Subjects {
    fn default() -> Self {
        Self::new("taskwire")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_names_are_upper_case_and_safe() {
        let s = Subjects::new("tw-test.1");
        assert_eq!(s.tasks_stream(), "TW_TEST_1_TASKS");
        assert_eq!(s.tasks("default"), "tw-test.1.tasks.default");
        assert_eq!(s.patches_bucket(), "TW_TEST_1_PATCHES");
        assert_eq!(s.patches_stream(), "OBJ_TW_TEST_1_PATCHES");
    }
}
