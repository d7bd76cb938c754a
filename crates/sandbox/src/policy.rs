//! What one sandboxed command may do: [`SandboxPolicy`], built per command from the
//! session's workspace and the agent's permission rules.

use std::path::PathBuf;

/// The confinement of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// Readable, writable and executable: the task's workspace.
    pub workspace: PathBuf,
    /// Readable, writable and executable: the command's private temp directory
    /// (`TMPDIR`), see [`crate::PrivateTemp`].
    pub temp_dir: PathBuf,
    /// Readable (and executable), not writable: where a command's program lives when
    /// that is not a system tree (an MCP server's installed package).
    pub read_only: Vec<PathBuf>,
    pub network: Network,
    pub limits: Limits,
}

/// The network a command may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Network {
    /// No sockets but `socketpair(AF_UNIX)`: no TCP, no UDP, no Unix-socket connects
    /// (a Postgres or Docker socket on the machine stays out of reach), no netlink.
    #[default]
    Closed,
    /// TCP streams may be opened, but the only port they may connect to is the
    /// filtering proxy's ([`crate::proxy::Proxy`]); no bind, no UDP, no other family.
    Proxy { port: u16 },
}

/// Resource limits of one command. Each applies per process of the command (they
/// are rlimits) except `processes`, which caps the whole command when a pids cgroup
/// is available (see [`crate::ProcessLimit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// CPU seconds (`RLIMIT_CPU`): SIGXCPU at the limit, SIGKILL a second later.
    /// Default 600, the longest timeout a command can have.
    pub cpu_seconds: u64,
    /// Bytes of data segment and private writable mappings (`RLIMIT_DATA`): an
    /// allocation past it fails. Default 4 GiB. Chosen over `RLIMIT_AS` so that
    /// runtimes reserving large virtual ranges (JVMs, Go, V8) still start.
    pub memory_bytes: u64,
    /// Processes (threads count) the command may have at once. Default 512.
    pub processes: u64,
    /// Largest file a process may write (`RLIMIT_FSIZE`). Default 8 GiB.
    pub file_size_bytes: u64,
    /// Open file descriptors per process (`RLIMIT_NOFILE`). Default 4096.
    pub open_files: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            cpu_seconds: 600,
            memory_bytes: 4 << 30,
            processes: 512,
            file_size_bytes: 8 << 30,
            open_files: 4096,
        }
    }
}
