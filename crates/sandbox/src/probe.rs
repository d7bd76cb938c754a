//! What the kernel offers the sandbox: [`probe`] and its [`Support`] report.

use crate::cgroup::PidsCgroup;
use crate::error::SandboxError;
use crate::ruleset::SCOPES_ABI;
use crate::sys;

/// Landlock ABI with TCP rules (Linux 6.7): below it the network cannot be closed.
pub const MIN_LANDLOCK_ABI: i32 = 4;

/// The confinement mechanisms of the running kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// Landlock ABI version; 0 when Landlock is absent or disabled.
    pub landlock_abi: i32,
    /// Whether seccomp filters can be installed.
    pub seccomp: bool,
    pub process_limit: ProcessLimit,
}

/// How the number of processes of one command is limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessLimit {
    /// A pids cgroup per command: exact, whatever the user.
    Cgroup,
    /// `RLIMIT_NPROC`: counts every process of the worker's user, not of one command.
    Rlimit,
    /// Neither: the worker runs as root (exempt from `RLIMIT_NPROC`) without a
    /// writable pids cgroup. A fork bomb then runs until the command's timeout.
    Unenforced,
}

impl Support {
    /// The mechanisms the sandbox cannot do without, each with what it is for; empty
    /// when commands can be confined.
    pub fn missing(&self) -> Vec<String> {
        let mut missing = Vec::new();
        match self.landlock_abi {
            0 => missing.push("landlock (not built into or not enabled in this kernel)".into()),
            abi if abi < MIN_LANDLOCK_ABI => missing.push(format!(
                "landlock abi {MIN_LANDLOCK_ABI} for network rules (this kernel has abi {abi})"
            )),
            _ => {}
        }
        if !self.seccomp {
            missing.push("seccomp filters".into());
        }
        missing
    }

    /// Protections that are weaker on this machine, for a warning at start.
    pub fn degraded(&self) -> Vec<String> {
        let mut degraded = Vec::new();
        if (MIN_LANDLOCK_ABI..SCOPES_ABI).contains(&self.landlock_abi) {
            degraded.push(format!(
                "landlock abi {SCOPES_ABI} scopes: signals to processes outside the sandbox \
                 are not blocked"
            ));
        }
        if self.process_limit == ProcessLimit::Unenforced {
            degraded.push(
                "a process limit: no writable pids cgroup, and RLIMIT_NPROC does not apply to \
                 root"
                    .into(),
            );
        }
        degraded
    }

    /// `Ok` when commands can be confined, else the error naming what is missing.
    pub fn check(&self) -> Result<(), SandboxError> {
        let missing = self.missing();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(SandboxError::Unavailable {
                missing: missing.join(", "),
            })
        }
    }
}

/// Asks the kernel what it supports. Cheap (a few system calls and, to test the pids
/// controller, one cgroup made and removed); call it once at start.
pub fn probe() -> Support {
    let process_limit = if PidsCgroup::create().is_some() {
        ProcessLimit::Cgroup
    } else if rustix::process::geteuid().is_root() {
        ProcessLimit::Unenforced
    } else {
        ProcessLimit::Rlimit
    };
    Support {
        landlock_abi: sys::landlock_abi(),
        seccomp: sys::seccomp_filters_available(),
        process_limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn support(landlock_abi: i32, seccomp: bool) -> Support {
        Support {
            landlock_abi,
            seccomp,
            process_limit: ProcessLimit::Cgroup,
        }
    }

    #[test]
    fn missing_names_each_absent_mechanism() {
        assert!(support(7, true).missing().is_empty());
        assert!(support(7, true).check().is_ok());
        let none = support(0, false).check().expect_err("nothing is there");
        let text = none.to_string();
        assert!(
            text.contains("landlock") && text.contains("seccomp"),
            "{text}"
        );
        let old = support(3, true).missing();
        assert_eq!(old.len(), 1);
        assert!(
            old[0].contains("abi 4") && old[0].contains("abi 3"),
            "{old:?}"
        );
    }

    #[test]
    fn degraded_names_weaker_protections() {
        assert!(support(7, true).degraded().is_empty());
        assert_eq!(support(5, true).degraded().len(), 1);
        let mut root = support(7, true);
        root.process_limit = ProcessLimit::Unenforced;
        assert!(root.degraded()[0].contains("process limit"));
    }
}
