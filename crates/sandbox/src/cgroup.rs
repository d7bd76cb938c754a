//! A process limit per command through the pids cgroup controller.
//!
//! `RLIMIT_NPROC` counts every process of the user, not of one command, and the
//! kernel does not apply it to uid 0 at all, so a worker running as root needs
//! another mechanism to stop a fork bomb: each command gets its own cgroup with
//! `pids.max`, which the child joins before it can fork (it writes `0` to
//! `cgroup.procs`, opened by the parent). Either a cgroup v2 hierarchy where the
//! worker may enable the pids controller for a child, or a v1 pids hierarchy, will
//! do; without either the worker falls back to `RLIMIT_NPROC` (see
//! [`crate::ProcessLimit`]).

use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process};

/// The worker's own directory in a pids hierarchy; commands get children of it.
/// Removed (when empty) on drop.
#[derive(Debug)]
pub(crate) struct PidsCgroup {
    base: PathBuf,
}

/// Numbers commands' cgroups; process-wide, since every `PidsCgroup` of a process
/// shares its base directory.
static NEXT_COMMAND: AtomicU64 = AtomicU64::new(0);

impl PidsCgroup {
    /// Creates `taskwire-<pid>` in the worker's pids cgroup, or `None` when no pids
    /// hierarchy is writable.
    pub(crate) fn create() -> Option<Self> {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
        let membership = fs::read_to_string("/proc/self/cgroup").ok()?;
        candidates(&mountinfo, &membership)
            .into_iter()
            .find_map(|(dir, v2)| Self::create_in(&dir, v2))
    }

    fn create_in(dir: &Path, v2: bool) -> Option<Self> {
        if v2 {
            // Fails unless the worker's cgroup may have the controller in its subtree
            // (the root cgroup, or a delegated one holding no processes itself).
            let _ = fs::write(dir.join("cgroup.subtree_control"), "+pids");
        }
        remove_stale(dir);
        let base = dir.join(format!("taskwire-{}", std::process::id()));
        match fs::create_dir(&base) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(_) => return None,
        }
        if v2 {
            let _ = fs::write(base.join("cgroup.subtree_control"), "+pids");
        }
        let cgroup = Self { base };
        // Prove a command's cgroup can be made and limited before relying on it.
        match cgroup.command(1) {
            Ok(_) => Some(cgroup),
            Err(_) => None,
        }
    }

    /// A new cgroup for one command, allowing `processes` at once.
    pub(crate) fn command(&self, processes: u64) -> io::Result<CommandCgroup> {
        let n = NEXT_COMMAND.fetch_add(1, Ordering::Relaxed);
        let dir = self.base.join(format!("cmd-{n}"));
        fs::create_dir(&dir)?;
        let mut group = CommandCgroup { dir, procs: None };
        fs::write(group.dir.join("pids.max"), processes.to_string())?;
        let procs = fs::OpenOptions::new()
            .write(true)
            .open(group.dir.join("cgroup.procs"))?;
        group.procs = Some(procs.into());
        Ok(group)
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.base);
    }
}

/// Removes the directories of workers that are gone (a process that exits without
/// dropping its sandbox leaves its directory behind); a cgroup with processes in it
/// cannot be removed, so nothing alive is touched.
fn remove_stale(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("taskwire-"))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let stale = entry.path();
        if let Ok(children) = fs::read_dir(&stale) {
            for child in children.filter_map(Result::ok) {
                if child.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = fs::remove_dir(child.path());
                }
            }
        }
        let _ = fs::remove_dir(&stale);
    }
}

/// One command's cgroup: whatever is still in it is killed and the directory removed
/// on drop.
#[derive(Debug)]
pub(crate) struct CommandCgroup {
    dir: PathBuf,
    procs: Option<OwnedFd>,
}

impl CommandCgroup {
    /// The open `cgroup.procs` for the child to join through.
    pub(crate) fn take_procs(&mut self) -> Option<OwnedFd> {
        self.procs.take()
    }
}

impl Drop for CommandCgroup {
    fn drop(&mut self) {
        let kill = self.dir.join("cgroup.kill");
        if fs::write(&kill, "1").is_err() {
            // v1 has no cgroup.kill: signal each member.
            if let Ok(pids) = fs::read_to_string(self.dir.join("cgroup.procs")) {
                for pid in pids.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
                    if let Some(pid) = Pid::from_raw(pid) {
                        let _ = kill_process(pid, Signal::KILL);
                    }
                }
            }
        }
        // The killed processes leave the cgroup once the kernel has reaped their
        // resources, which takes a moment; until then rmdir says EBUSY.
        for attempt in 0..50 {
            match fs::remove_dir(&self.dir) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && attempt < 49 => {
                    std::thread::sleep(Duration::from_micros(100 << attempt.min(8)));
                }
                _ => return,
            }
        }
    }
}

/// Directories of the worker's cgroups that have a pids controller: the v2 one
/// first, then v1's. `true` marks v2.
fn candidates(mountinfo: &str, membership: &str) -> Vec<(PathBuf, bool)> {
    let mut found = Vec::new();
    for line in mountinfo.lines() {
        // id parent dev root mountpoint options [optional...] - fstype source super
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let rest: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(mount), Some(fstype)) = (fields.get(3), fields.get(4), rest.first())
        else {
            continue;
        };
        let options = rest.get(2).copied().unwrap_or_default();
        let (path, v2) = match *fstype {
            "cgroup2" => (member_path(membership, |c| c.is_empty(), true), true),
            "cgroup" if options.split(',').any(|o| o == "pids") => (
                member_path(membership, |c| c.split(',').any(|c| c == "pids"), false),
                false,
            ),
            _ => continue,
        };
        let Some(path) = path else { continue };
        let relative = match path.strip_prefix(root.trim_end_matches('/')) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => rest.trim_start_matches('/'),
            _ => continue,
        };
        found.push((Path::new(mount).join(relative), v2));
    }
    found.sort_by_key(|(_, v2)| !v2);
    found
}

/// The cgroup path of the line in `/proc/self/cgroup` whose controller list passes
/// `controllers` (`0::/path` for v2).
fn member_path(membership: &str, controllers: impl Fn(&str) -> bool, v2: bool) -> Option<&str> {
    membership.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let hierarchy = parts.next()?;
        let list = parts.next()?;
        let path = parts.next()?;
        ((hierarchy == "0") == v2 && controllers(list)).then_some(path)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_come_from_mountinfo_and_membership() {
        let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
31 25 0:27 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
32 25 0:28 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        let membership = "8:pids:/a/b\n4:memory:/m\n0::/c\n";
        assert_eq!(
            candidates(mountinfo, membership),
            [
                (PathBuf::from("/sys/fs/cgroup/unified/c"), true),
                (PathBuf::from("/sys/fs/cgroup/pids/a/b"), false),
            ]
        );
    }

    #[test]
    fn a_cgroup_namespace_root_is_stripped() {
        let mountinfo = "40 30 0:30 /ns /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            candidates(mountinfo, "0::/ns/worker\n"),
            [(PathBuf::from("/sys/fs/cgroup/worker"), true)]
        );
        assert!(candidates(mountinfo, "0::/elsewhere\n").is_empty());
    }
}
