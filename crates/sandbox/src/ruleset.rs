//! The Landlock ruleset of one command: files and TCP ports it may use and the
//! scopes (signals, abstract Unix sockets) it may not leave.
//!
//! Every file access right the kernel knows is handled, so whatever is not granted
//! is denied: `/proc`, `/sys`, `/home`, `/root`, `/tmp`, `/var`, `/run`, other
//! workspaces, the hidden paths of [`crate::paths`]. TCP bind is handled with no rule
//! (never allowed) and TCP connect with at most one (the proxy's port).

use std::os::fd::OwnedFd;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};

use crate::error::SandboxError;
use crate::paths::{Opened, SystemPaths, open};
use crate::policy::{Network, SandboxPolicy};

/// The newest ABI whose rights this crate has been checked against. A newer kernel
/// is used at this level.
const NEWEST_ABI: i32 = 7;
/// Scopes (signals, abstract Unix sockets) arrived with ABI 6.
pub(crate) const SCOPES_ABI: i32 = 6;

pub(crate) fn abi(version: i32) -> ABI {
    match version.min(NEWEST_ABI) {
        ..=0 => ABI::Unsupported,
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        _ => ABI::V7,
    }
}

/// Builds the ruleset for `policy` and returns its fd, ready for
/// `landlock_restrict_self(2)` in the child.
pub(crate) fn build(
    version: i32,
    system: &SystemPaths,
    policy: &SandboxPolicy,
) -> Result<OwnedFd, SandboxError> {
    let abi = abi(version);
    let read = AccessFs::Execute | AccessFs::ReadFile | AccessFs::ReadDir;
    let device_rw = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
    let own = AccessFs::from_all(abi) & !(AccessFs::MakeChar | AccessFs::MakeBlock);

    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))?
        .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    if version >= SCOPES_ABI {
        ruleset = ruleset.scope(Scope::from_all(abi))?;
    }
    // Rights a kernel older than the crate's newest ABI lacks are dropped from each
    // rule rather than failing it; the handled set above is already exact.
    let mut created = ruleset.create()?.set_compatibility(CompatLevel::BestEffort);
    fn rule(abi: ABI, opened: &Opened, access: BitFlags<AccessFs>) -> PathBeneath<&PathFd> {
        let access = if opened.is_dir {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        PathBeneath::new(&opened.fd, access & AccessFs::from_all(abi))
    }
    for opened in &system.read {
        created = created.add_rule(rule(abi, opened, read))?;
    }
    for opened in &system.devices_ro {
        created = created.add_rule(rule(abi, opened, AccessFs::ReadFile.into()))?;
    }
    for opened in &system.devices_rw {
        created = created.add_rule(rule(abi, opened, device_rw))?;
    }
    for dir in &policy.read_only {
        created = created.add_rule(rule(abi, &open(dir)?, read))?;
    }
    for dir in [&policy.workspace, &policy.temp_dir] {
        created = created.add_rule(rule(abi, &open(dir)?, own))?;
    }
    if let Network::Proxy { port } = policy.network {
        created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| SandboxError::Landlock {
        reason: "the kernel did not create a ruleset".into(),
    })
}
