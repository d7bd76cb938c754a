//! The seccomp filters of a command: system calls that escape the sandbox or spy on
//! other processes fail with `EPERM`; sockets are limited to what the policy's
//! network allows.
//!
//! Two programs are installed. The main one (compiled by `seccompiler`, which also
//! kills a process making system calls of another architecture, such as 32-bit
//! `int 0x80` calls on x86-64) is a deny-list; a deny-list keeps every ordinary tool
//! working, and what it leaves open is confined by Landlock and by the dropped
//! capabilities. The second, written by hand, answers `clone3` with `ENOSYS` (its
//! flags sit behind a pointer a filter cannot read, and C libraries fall back to
//! `clone`, whose flags are checked) and refuses x32 system call numbers, which
//! would otherwise bypass every number-based rule on kernels built with x32.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
};

use crate::error::SandboxError;

/// Denied whatever their arguments.
const DENIED: &[libc::c_long] = &[
    // Reading or writing another process's memory.
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kcmp,
    libc::SYS_pidfd_getfd,
    // Replacing the kernel, changing the file system tree, namespaces.
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    // Kernel attack surface a command has no use for.
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_keyctl,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_syslog,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_fanotify_init,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_vhangup,
    // Leaving the command's process group, which is how a cancelled command is
    // killed as a whole.
    libc::SYS_setsid,
    libc::SYS_setpgid,
];

/// Namespace flags `clone` may not carry.
const CLONE_NAMESPACES: [u64; 8] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
    0x80, // CLONE_NEWTIME
];

/// `personality(2)` values allowed: the default, and the query.
const PER_LINUX: u64 = 0;
const PERSONALITY_QUERY: u64 = 0xffff_ffff;
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541c;
const SOCK_TYPE_MASK: u64 = 0xf;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Both programs for a command with or without TCP (through the proxy).
pub(crate) fn programs(tcp: bool) -> Result<Vec<BpfProgram>, SandboxError> {
    let mut programs = vec![main_program(tcp)?];
    programs.extend(guard_program());
    Ok(programs)
}

fn err(e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Seccomp {
        reason: e.to_string(),
    }
}

fn cond(arg: u8, op: Op, value: u64) -> Result<Cond, SandboxError> {
    Cond::new(arg, Len::Qword, op, value).map_err(err)
}

fn rule(conditions: Vec<Cond>) -> Result<SeccompRule, SandboxError> {
    SeccompRule::new(conditions).map_err(err)
}

fn main_program(tcp: bool) -> Result<BpfProgram, SandboxError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&nr| (nr, Vec::new())).collect();
    rules.insert(
        libc::SYS_clone,
        CLONE_NAMESPACES
            .iter()
            .map(|&flag| rule(vec![cond(0, Op::MaskedEq(flag), flag)?]))
            .collect::<Result<_, _>>()?,
    );
    rules.insert(
        libc::SYS_personality,
        vec![rule(vec![
            cond(0, Op::Ne, PER_LINUX)?,
            cond(0, Op::Ne, PERSONALITY_QUERY)?,
        ])?],
    );
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(1, Op::MaskedEq(0xffff_ffff), TIOCSTI)?])?,
            rule(vec![cond(1, Op::MaskedEq(0xffff_ffff), TIOCLINUX)?])?,
        ],
    );
    // Pairs of connected Unix sockets reach nothing outside the command.
    rules.insert(
        libc::SYS_socketpair,
        vec![rule(vec![cond(0, Op::Ne, libc::AF_UNIX as u64)?])?],
    );
    rules.insert(libc::SYS_socket, socket_rules(tcp)?);
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(err)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(err)?;
    BpfProgram::try_from(filter).map_err(err)
}

/// The rules that deny `socket(2)`: always without TCP; with TCP, every call but an
/// IPv4 or IPv6 stream socket of protocol 0 or TCP (SCTP and MPTCP streams would not
/// be seen by Landlock's TCP rules, datagrams not at all).
fn socket_rules(tcp: bool) -> Result<Vec<SeccompRule>, SandboxError> {
    if !tcp {
        return Ok(Vec::new());
    }
    let mut rules = vec![
        rule(vec![
            cond(0, Op::Ne, libc::AF_INET as u64)?,
            cond(0, Op::Ne, libc::AF_INET6 as u64)?,
        ])?,
        rule(vec![
            cond(2, Op::Ne, 0)?,
            cond(2, Op::Ne, libc::IPPROTO_TCP as u64)?,
        ])?,
    ];
    for kind in 0..=SOCK_TYPE_MASK {
        if kind != libc::SOCK_STREAM as u64 {
            rules.push(rule(vec![cond(1, Op::MaskedEq(SOCK_TYPE_MASK), kind)?])?);
        }
    }
    Ok(rules)
}

/// `clone3` → `ENOSYS`, x32 numbers → `EPERM` (x86-64 only).
fn guard_program() -> Option<BpfProgram> {
    #[cfg(target_arch = "x86_64")]
    {
        const LD_W_ABS: u16 = 0x20;
        const JEQ_K: u16 = 0x15;
        const JGE_K: u16 = 0x35;
        const RET_K: u16 = 0x06;
        const ARCH_OFFSET: u32 = 4;
        const NR_OFFSET: u32 = 0;
        const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
        use seccompiler::sock_filter;
        let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
        let clone3 = u32::try_from(libc::SYS_clone3).unwrap_or(u32::MAX);
        Some(vec![
            op(LD_W_ABS, 0, 0, ARCH_OFFSET),
            op(JEQ_K, 0, 5, AUDIT_ARCH_X86_64), // other arch: the main program kills
            op(LD_W_ABS, 0, 0, NR_OFFSET),
            op(JGE_K, 2, 0, X32_SYSCALL_BIT),
            op(JEQ_K, 0, 2, clone3),
            op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
            op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
            op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        ])
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}
