//! What one session run remembers between tool calls: the todo list, the usage of
//! its child tasks, the approvals granted with `Always`, the recent calls the
//! doom-loop guard compares against, and the background children.
//!
//! Shared by the concurrently running calls of a turn, so every field sits behind its
//! own short-held lock; none is held across an await.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use taskwire_llm::Usage;

use crate::tools::Todo;
use taskwire_definitions::permission::Approvals;

/// How many identical calls in a row are refused: the third is not run (OpenCode's
/// doom-loop threshold).
pub(crate) const DOOM_LOOP_THRESHOLD: usize = 3;

/// Per-session state the tools and the session loop share.
#[derive(Debug, Default)]
pub struct SessionState {
    todos: Mutex<Vec<Todo>>,
    child_usage: Mutex<Usage>,
    approvals: Mutex<Approvals>,
    /// `(tool, input)` of the latest calls, newest last, at most the threshold - 1.
    recent_calls: Mutex<Vec<(String, Value)>>,
    /// One approval question at a time, so an `Always` answer covers the calls still
    /// waiting behind it and a person is never asked in parallel.
    pub(crate) approval_turn: tokio::sync::Mutex<()>,
    approval_seq: AtomicU64,
    /// The `task` calls that run in the background, and their results.
    pub background: super::background::Background,
    /// The conversation a `task` call with `fork: true` hands its child, taken when
    /// the step calling it started its calls.
    fork: Mutex<Option<std::sync::Arc<crate::fork::Fork>>>,
}

/// A poisoned lock only means another call panicked mid-update of plain data; the
/// data is still the best we have.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SessionState {
    pub fn new() -> Self {
        Self::default()
    }

    /// A state that starts from a resumed session's todo list.
    pub fn with_todos(todos: Vec<Todo>) -> Self {
        let state = Self::default();
        state.set_todos(todos);
        state
    }

    /// The current todo list.
    pub fn todos(&self) -> Vec<Todo> {
        lock(&self.todos).clone()
    }

    /// Replaces the todo list (`todowrite` always sends the whole list).
    pub fn set_todos(&self, todos: Vec<Todo>) {
        *lock(&self.todos) = todos;
    }

    /// Adds a finished child task's usage, so the session reports its whole tree.
    pub fn add_child_usage(&self, usage: Usage) {
        *lock(&self.child_usage) += usage;
    }

    /// Keeps the conversation this step's forked children start from.
    pub(crate) fn set_fork(&self, fork: crate::fork::Fork) {
        *lock(&self.fork) = Some(std::sync::Arc::new(fork));
    }

    /// The conversation a forked child starts from (this step's).
    pub(crate) fn fork(&self) -> Option<std::sync::Arc<crate::fork::Fork>> {
        lock(&self.fork).clone()
    }

    /// Usage of all child tasks so far.
    pub fn child_usage(&self) -> Usage {
        *lock(&self.child_usage)
    }

    pub(crate) fn approvals(&self) -> MutexGuard<'_, Approvals> {
        lock(&self.approvals)
    }

    /// A request id unique within this run.
    pub(crate) fn next_approval_id(&self, call_id: &str) -> String {
        let seq = self.approval_seq.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{call_id}#{seq}")
    }

    /// Records a call and says whether it repeats the previous calls often enough to
    /// be refused: the same tool with the same input [`DOOM_LOOP_THRESHOLD`] times in
    /// a row. Refused calls are recorded too, so a fourth identical call is refused
    /// as well.
    pub(crate) fn record_call(&self, tool: &str, input: &Value) -> bool {
        let mut recent = lock(&self.recent_calls);
        let looping = recent.len() == DOOM_LOOP_THRESHOLD - 1
            && recent
                .iter()
                .all(|(name, previous)| name == tool && previous == input);
        recent.push((tool.to_owned(), input.clone()));
        if recent.len() > DOOM_LOOP_THRESHOLD - 1 {
            recent.remove(0);
        }
        looping
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn third_identical_call_in_a_row_is_a_loop() {
        let state = SessionState::new();
        let input = json!({"filePath": "a"});
        assert!(!state.record_call("read", &input));
        assert!(!state.record_call("read", &input));
        assert!(state.record_call("read", &input));
        assert!(state.record_call("read", &input), "still looping");
    }

    #[test]
    fn a_different_call_in_between_resets_the_count() {
        let state = SessionState::new();
        let a = json!({"filePath": "a"});
        let b = json!({"filePath": "b"});
        assert!(!state.record_call("read", &a));
        assert!(!state.record_call("read", &a));
        assert!(!state.record_call("read", &b));
        assert!(!state.record_call("read", &a));
        assert!(!state.record_call("grep", &a));
        assert!(!state.record_call("read", &a));
    }

    #[test]
    fn child_usage_adds_up() {
        let state = SessionState::new();
        state.add_child_usage(Usage::tokens(3, 1));
        state.add_child_usage(Usage::tokens(2, 2));
        assert_eq!(state.child_usage(), Usage::tokens(5, 3));
    }

    #[test]
    fn approval_ids_are_unique() {
        let state = SessionState::new();
        assert_ne!(state.next_approval_id("c1"), state.next_approval_id("c1"));
    }
}
