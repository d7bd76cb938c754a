//! Running sessions by task id, so cancel notices, deadlines and shutdown can stop them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use taskwire_bus::Subscription;
use taskwire_bus::messages::CancelNotice;
use taskwire_protocol::TaskId;
use tokio_util::sync::CancellationToken;

/// Why a session was stopped from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A client cancelled the task (or an ancestor).
    Cancelled,
    /// The task's deadline passed.
    Deadline,
    /// This worker is shutting down: release the task for another worker.
    Shutdown,
}

/// One running session's stop switch.
#[derive(Clone)]
pub struct StopHandle {
    token: CancellationToken,
    reason: Arc<Mutex<Option<StopReason>>>,
}

impl StopHandle {
    fn new() -> Self {
        Self {
            token: CancellationToken::new(),
            reason: Arc::new(Mutex::new(None)),
        }
    }

    /// Stops the session; the first reason given is kept.
    pub fn stop(&self, reason: StopReason) {
        let mut r = self
            .reason
            .lock()
            .expect("stop reason lock is never poisoned");
        r.get_or_insert(reason);
        self.token.cancel();
    }

    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    pub fn reason(&self) -> Option<StopReason> {
        *self
            .reason
            .lock()
            .expect("stop reason lock is never poisoned")
    }
}

/// The sessions this worker is running.
#[derive(Clone, Default)]
pub struct Running {
    inner: Arc<Mutex<HashMap<TaskId, StopHandle>>>,
}

impl Running {
    /// Registers a session; it is removed when the guard drops.
    pub fn register(&self, task: TaskId) -> RunningGuard {
        let handle = StopHandle::new();
        self.inner
            .lock()
            .expect("running map lock is never poisoned")
            .insert(task, handle.clone());
        RunningGuard {
            running: self.clone(),
            task,
            handle,
        }
    }

    pub fn stop(&self, task: TaskId, reason: StopReason) -> bool {
        let map = self
            .inner
            .lock()
            .expect("running map lock is never poisoned");
        map.get(&task).map(|h| h.stop(reason)).is_some()
    }

    pub fn stop_all(&self, reason: StopReason) {
        for h in self
            .inner
            .lock()
            .expect("running map lock is never poisoned")
            .values()
        {
            h.stop(reason);
        }
    }

    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .expect("running map lock is never poisoned")
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Keeps a session registered while it runs.
pub struct RunningGuard {
    running: Running,
    task: TaskId,
    pub handle: StopHandle,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.running
            .inner
            .lock()
            .expect("running map lock is never poisoned")
            .remove(&self.task);
    }
}

/// Listens for cancel notices until `shutdown`; stops matching sessions.
/// Failure policy: the subscription is re-established by the client on reconnect; if
/// it ends, the loop logs and returns (deadlines and the coordinator's fenced writes
/// still bound the damage).
pub async fn listen(
    notices: Subscription<CancelNotice>,
    running: Running,
    shutdown: CancellationToken,
) {
    let mut notices = std::pin::pin!(notices.take_until(shutdown.cancelled_owned()));
    while let Some(notice) = notices.next().await {
        match notice {
            Ok(CancelNotice { task, reason }) => {
                if running.stop(task, StopReason::Cancelled) {
                    tracing::info!(task.id = %task, reason = %reason, "stopping cancelled session");
                }
            }
            Err(m) => tracing::warn!(error = %m.error, "ignoring malformed cancel notice"),
        }
    }
}
