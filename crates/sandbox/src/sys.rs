//! The crate's only unsafe code: the raw system calls that query the kernel and the
//! hook that confines a child between `fork` and `exec`.
//!
//! The hook runs in the forked child of a multi-threaded process, where another thread
//! may have held the allocator's lock at the moment of the fork. So it allocates
//! nothing and takes no lock: everything it needs (the Landlock ruleset fd, the
//! compiled seccomp programs, the limits, an open `cgroup.procs`) is built before
//! the spawn, and the hook only makes system calls on it. That is also why the
//! `landlock` crate's `restrict_self` is not called here: it consumes the ruleset and
//! builds a status value; `landlock_restrict_self(2)` on the ruleset's fd is all
//! that is needed.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Arc;

use seccompiler::{BpfProgram, sock_filter};

/// `landlock_create_ruleset(2)` flag that asks for the ABI version.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
/// `seccomp(2)` operations.
const SECCOMP_SET_MODE_FILTER: libc::c_uint = 1;
const SECCOMP_GET_ACTION_AVAIL: libc::c_uint = 2;
/// Every secure bit and its lock except `KEEP_CAPS`: uid 0 gains no capabilities on
/// exec, and nothing can undo that.
const SECURE_BITS: libc::c_ulong = 0xEF;
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// Capability numbers are below 64; `PR_CAPBSET_DROP` says `EINVAL` past the last one.
const MAX_CAPABILITIES: libc::c_ulong = 64;

/// The Landlock ABI version of the running kernel; 0 when Landlock is not there
/// (not built, or not enabled at boot).
pub(crate) fn landlock_abi() -> i32 {
    // SAFETY: a null attribute with size 0 and the VERSION flag only asks for the
    // version; the kernel reads no memory.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(abi).unwrap_or(0).max(0)
}

/// Whether seccomp filters that return an errno can be installed.
pub(crate) fn seccomp_filters_available() -> bool {
    let action: u32 = libc::SECCOMP_RET_ERRNO;
    // SAFETY: the kernel reads one u32 from a valid pointer.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0u32,
            &action as *const u32,
        )
    };
    rc == 0
}

/// One resource limit to set in the child, soft and hard.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limit {
    pub resource: Resource,
    pub soft: u64,
    pub hard: u64,
}

/// `libc`'s resource type differs between C libraries.
#[cfg(target_env = "gnu")]
pub(crate) type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
pub(crate) type Resource = libc::c_int;

/// Everything the child does to itself before `exec`, prepared by the parent.
#[derive(Debug)]
pub(crate) struct ChildSetup {
    pub ruleset: OwnedFd,
    pub filters: Arc<Vec<BpfProgram>>,
    pub limits: Vec<Limit>,
    /// An open `cgroup.procs` of the command's own cgroup; the child writes `0` to it
    /// to move itself in before anything else can fork.
    pub cgroup_procs: Option<OwnedFd>,
    /// Whether the parent runs with capabilities (as root) that must be dropped;
    /// without them the calls that need `CAP_SETPCAP` are expected to fail.
    pub privileged: bool,
}

/// Makes `command` confine its child with `setup` between fork and exec.
pub(crate) fn install(command: &mut Command, setup: ChildSetup) {
    // SAFETY: `enter` is async-signal-safe: it only makes system calls on memory that
    // was allocated before the fork and is kept alive by the closure; it allocates
    // nothing and takes no lock (`io::Error::last_os_error` stores the errno inline).
    unsafe {
        command.pre_exec(move || setup.enter());
    }
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

#[repr(C)]
struct SockFprog {
    len: libc::c_ushort,
    filter: *const sock_filter,
}

fn check(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl ChildSetup {
    /// Runs in the child. Order matters: join the cgroup while writing to it is still
    /// allowed, lower limits, drop capabilities while `CAP_SETPCAP` is still held,
    /// then `no_new_privs` (which Landlock and seccomp require), the Landlock domain,
    /// and last the seccomp filters, which could otherwise deny the calls above.
    fn enter(&self) -> io::Result<()> {
        if let Some(procs) = &self.cgroup_procs {
            // SAFETY: writes one byte from a static buffer to an open fd.
            let written = unsafe { libc::write(procs.as_raw_fd(), b"0".as_ptr().cast(), 1) };
            check(written as libc::c_long)?;
        }
        for limit in &self.limits {
            set_limit(limit)?;
        }
        self.drop_capabilities()?;
        // SAFETY: plain prctl with integer arguments.
        check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }.into())?;
        // SAFETY: the ruleset fd is open (owned by `self`); flags 0.
        check(unsafe {
            libc::syscall(
                libc::SYS_landlock_restrict_self,
                self.ruleset.as_raw_fd(),
                0u32,
            )
        })?;
        for program in self.filters.iter() {
            let len = libc::c_ushort::try_from(program.len())
                .map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
            let fprog = SockFprog {
                len,
                filter: program.as_ptr(),
            };
            // SAFETY: `fprog` points at a live program of `len` instructions; the
            // kernel copies it.
            check(unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    SECCOMP_SET_MODE_FILTER,
                    0u32,
                    &fprog as *const SockFprog,
                )
            })?;
        }
        Ok(())
    }

    /// Leaves the child with no capabilities in any set, unable to regain them by
    /// executing anything (uid 0 included), so root in the sandbox cannot raise its
    /// limits, load modules or override file permissions.
    fn drop_capabilities(&self) -> io::Result<()> {
        let privileged = |rc: io::Result<()>| match rc {
            Err(e) if self.privileged => Err(e),
            _ => Ok(()),
        };
        // SAFETY: plain prctl with integer arguments.
        let rc = unsafe { libc::prctl(libc::PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0) };
        privileged(check(rc.into()))?;
        for cap in 0..MAX_CAPABILITIES {
            // SAFETY: plain prctl with integer arguments.
            let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
            if rc < 0 {
                let err = io::Error::last_os_error();
                if err.raw_os_error() == Some(libc::EINVAL) {
                    break; // past the last capability this kernel knows
                }
                privileged(Err(err))?;
            }
        }
        let clear = libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong;
        // SAFETY: plain prctl with integer arguments.
        let rc = unsafe { libc::prctl(libc::PR_CAP_AMBIENT, clear, 0, 0, 0) };
        check(rc.into())?;
        let header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        // SAFETY: a valid v3 header and the two data words v3 expects.
        check(unsafe {
            libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr())
        })
    }
}

/// Lowers one limit; never raises the hard limit above what the process has (which
/// would fail without `CAP_SYS_RESOURCE`).
fn set_limit(limit: &Limit) -> io::Result<()> {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: writes one rlimit into a valid local.
    check(unsafe { libc::getrlimit(limit.resource, &mut current) }.into())?;
    let hard = limit.hard.min(current.rlim_max);
    let new = libc::rlimit {
        rlim_cur: limit.soft.min(hard),
        rlim_max: hard,
    };
    // SAFETY: reads one rlimit from a valid local.
    check(unsafe { libc::setrlimit(limit.resource, &new) }.into())
}

/// `unshare(CLONE_NEWUSER | CLONE_NEWNS)`: the calling process gets a user namespace
/// and a mount namespace of its own. Must be called while the process has one thread
/// (the kernel refuses a new user namespace otherwise).
pub(crate) fn unshare_user_and_mounts() -> io::Result<()> {
    // SAFETY: no file descriptor table is unshared (`CLONE_FILES` is not given), which
    // is what `unshare_unsafe` asks callers to care about; the namespaces apply to the
    // whole (single-threaded) process.
    unsafe {
        rustix::thread::unshare_unsafe(
            rustix::thread::UnshareFlags::NEWUSER | rustix::thread::UnshareFlags::NEWNS,
        )
    }
    .map_err(io::Error::from)
}
