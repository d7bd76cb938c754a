//! A mount namespace of the worker's own, in which it may mount what its task
//! workspaces need (overlays) without privileges: the process enters a user namespace
//! that maps its own user and group to themselves, and a mount namespace owned by it.
//! Nothing it mounts is seen outside the process and the commands it starts, and all
//! of it goes away with them.
//!
//! Entered once, at start, while the process still has a single thread. Where the
//! kernel or a container's policy forbids it, the worker goes on without (its
//! workspaces are then copies).

use std::io;
use std::sync::{Arc, OnceLock};

use crate::SandboxError;

/// How [`enter_private_mounts`] went, if it was called.
static ENTERED: OnceLock<Result<(), Arc<SandboxError>>> = OnceLock::new();

/// Whether this process is in a mount namespace of its own; why not, otherwise:
/// [`SandboxError::MountsNotEntered`], or the failure of [`enter_private_mounts`]
/// ([`SandboxError::Recorded`]).
pub fn private_mounts() -> Result<(), SandboxError> {
    match ENTERED.get() {
        Some(entered) => entered.clone().map_err(SandboxError::Recorded),
        None => Err(SandboxError::MountsNotEntered),
    }
}

/// Enters a user and mount namespace of the process's own, mapping its user and group
/// to themselves (other users' files show as owned by the overflow user), with mounts
/// private to it. Call it
/// before any thread is started.
///
/// A failure is recorded for [`private_mounts`] and returned as
/// [`SandboxError::Recorded`], whose message is the failure's own.
pub fn enter_private_mounts() -> Result<(), SandboxError> {
    let entered = enter().map_err(Arc::new);
    let _ = ENTERED.set(entered.clone());
    entered.map_err(SandboxError::Recorded)
}

fn enter() -> Result<(), SandboxError> {
    let (uid, gid) = (rustix::process::getuid(), rustix::process::getgid());
    // Checked before: once in the new user namespace, a map that cannot be written
    // would leave the process with no user at all.
    let maps = identity_maps(uid.as_raw(), gid.as_raw());
    crate::sys::unshare_user_and_mounts()
        .map_err(SandboxError::io("enter a user and mount namespace"))?;
    // What a process must give up to map its group from inside the namespace.
    std::fs::write("/proc/self/setgroups", "deny")
        .map_err(SandboxError::io("deny setgroups in the user namespace"))?;
    std::fs::write("/proc/self/uid_map", &maps.0)
        .map_err(SandboxError::io("map the user into the user namespace"))?;
    std::fs::write("/proc/self/gid_map", &maps.1)
        .map_err(SandboxError::io("map the group into the user namespace"))?;
    rustix::mount::mount_change(
        "/",
        rustix::mount::MountPropagationFlags::PRIVATE | rustix::mount::MountPropagationFlags::REC,
    )
    .map_err(|e| SandboxError::Io {
        action: "make the process's mounts private",
        source: io::Error::from(e),
    })
}

/// The `uid_map` and `gid_map` lines: the process's own user and group, mapped to
/// themselves (all a process may map from inside its new namespace, root included).
fn identity_maps(uid: u32, gid: u32) -> (String, String) {
    (format!("{uid} {uid} 1\n"), format!("{gid} {gid} 1\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_maps_its_own_user_and_group_to_themselves() {
        assert_eq!(identity_maps(0, 0).0, "0 0 1\n");
        assert_eq!(
            identity_maps(10001, 10002),
            ("10001 10001 1\n".to_owned(), "10002 10002 1\n".to_owned())
        );
    }

    #[test]
    fn a_process_that_did_not_enter_says_so() {
        // No test of this binary enters: it would change the test process itself.
        let error = private_mounts().expect_err("not entered");
        assert!(matches!(error, SandboxError::MountsNotEntered), "{error:?}");
        assert_eq!(error.to_string(), "not entered at start");
    }

    #[test]
    fn a_recorded_failure_reads_as_the_failure_itself() {
        let failure = || SandboxError::Io {
            action: "deny setgroups in the user namespace",
            source: io::Error::from(io::ErrorKind::PermissionDenied),
        };
        let recorded = SandboxError::Recorded(Arc::new(failure()));
        assert_eq!(recorded.to_string(), failure().to_string());
    }
}
