//! The worker's error type (start-up failures; a task's failure is a result, not an error).

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Bus(#[from] taskwire_bus::BusError),
    #[error("failed to set up the model client: {0}")]
    Model(#[from] taskwire_llm::LlmError),
    #[error("failed to set up task workspaces: {0}")]
    Workspaces(#[from] taskwire_workspaces::WorkspaceError),
    #[error("failed to start the liveness signal: {0}")]
    Liveness(String),
    #[error("failed to listen for http on {addr}: {reason}")]
    Listen {
        addr: std::net::SocketAddr,
        reason: String,
    },
}
