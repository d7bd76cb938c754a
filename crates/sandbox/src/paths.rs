//! The system files a sandboxed command may read, opened once per worker.
//!
//! Landlock only adds access, it cannot carve an exception out of a granted tree. So
//! a tree that holds something to hide is granted piece by piece instead: its
//! children one by one, descending only into the directories on the way to a hidden
//! path. Hidden are the paths the worker names (its credentials and keys, its config
//! file) and, under `/etc`, everything not readable by all users (`shadow`,
//! `sudoers`, `ssl/private`, ssh host keys). Symbolic links need no grant of their
//! own: Landlock judges the file a path resolves to, so a link is followed into a
//! tree only when that tree is granted.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use landlock::PathFd;

use crate::error::SandboxError;

/// Trees commands read and execute from.
const SYSTEM_TREES: [&str; 8] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];
/// Under these trees, files that are not world-readable are hidden as well.
const WORLD_READABLE_ONLY: [&str; 1] = ["/etc"];
/// Devices commands read and write.
const DEVICES_RW: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/full"];
/// Devices commands only read.
const DEVICES_RO: [&str; 2] = ["/dev/random", "/dev/urandom"];

/// An open path and whether it is a directory (files take only file rights).
#[derive(Debug)]
pub(crate) struct Opened {
    pub fd: PathFd,
    pub is_dir: bool,
}

/// Open handles on what every command may read, and the paths kept out.
#[derive(Debug)]
pub(crate) struct SystemPaths {
    /// Read, list and execute.
    pub read: Vec<Opened>,
    pub devices_rw: Vec<Opened>,
    pub devices_ro: Vec<Opened>,
}

impl SystemPaths {
    /// Opens the system trees, leaving out `hidden` (which need not exist).
    pub(crate) fn open(hidden: &[PathBuf]) -> Result<Self, SandboxError> {
        let mut hidden: Vec<PathBuf> = hidden
            .iter()
            .map(|path| fs::canonicalize(path).unwrap_or_else(|_| path.clone()))
            .collect();
        for tree in WORLD_READABLE_ONLY {
            collect_unreadable(Path::new(tree), &mut hidden);
        }
        let mut read = Vec::new();
        for tree in SYSTEM_TREES {
            let tree = Path::new(tree);
            // `/bin -> usr/bin` and the like are covered by their target.
            match fs::symlink_metadata(tree) {
                Ok(meta) if meta.is_dir() => {}
                _ => continue,
            }
            for path in cover(tree, &hidden) {
                read.push(open(&path)?);
            }
        }
        let existing = |paths: &[&str]| -> Result<Vec<Opened>, SandboxError> {
            paths
                .iter()
                .map(Path::new)
                .filter(|path| path.exists())
                .map(open)
                .collect()
        };
        Ok(Self {
            read,
            devices_rw: existing(&DEVICES_RW)?,
            devices_ro: existing(&DEVICES_RO)?,
        })
    }
}

pub(crate) fn open(path: &Path) -> Result<Opened, SandboxError> {
    let failed = |source| SandboxError::Path {
        path: path.to_owned(),
        source,
    };
    let is_dir = fs::metadata(path).map_err(failed)?.is_dir();
    let fd = PathFd::new(path).map_err(|e| failed(std::io::Error::other(e.to_string())))?;
    Ok(Opened { fd, is_dir })
}

/// The fewest paths that together cover `root` without any of `hidden` (or anything
/// below a hidden directory). Reads only the directories on the way to a hidden path.
pub(crate) fn cover(root: &Path, hidden: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    cover_into(root, hidden, &mut out);
    out
}

fn cover_into(dir: &Path, hidden: &[PathBuf], out: &mut Vec<PathBuf>) {
    if hidden.iter().any(|h| dir.starts_with(h)) {
        return;
    }
    if !hidden.iter().any(|h| h.starts_with(dir)) {
        out.push(dir.to_owned());
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut children: Vec<_> = entries.filter_map(Result::ok).collect();
    children.sort_by_key(|entry| entry.file_name());
    for entry in children {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() {
            cover_into(&path, hidden, out);
        } else if !kind.is_symlink() && !hidden.contains(&path) {
            out.push(path);
        }
    }
}

/// Adds the entries under `tree` that other users could not read (for a directory:
/// not both readable and searchable), without following links.
fn collect_unreadable(tree: &Path, hidden: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(tree) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        let mode = meta.permissions().mode();
        let path = entry.path();
        if meta.is_dir() {
            if mode & 0o005 != 0o005 {
                hidden.push(path);
            } else {
                collect_unreadable(&path, hidden);
            }
        } else if !meta.file_type().is_symlink() && mode & 0o004 == 0 {
            hidden.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cover_grants_whole_trees_without_hidden_paths_and_splits_the_others() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        for path in ["a/x", "b/c/secret", "b/c/ok", "b/d"] {
            let path = root.join(path);
            fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
            fs::write(&path, "x").expect("write");
        }
        let hidden = [root.join("b/c/secret")];
        assert_eq!(
            cover(root, &hidden),
            [root.join("a"), root.join("b/c/ok"), root.join("b/d")]
        );
        assert_eq!(cover(root, &[]), [root.to_owned()]);
        assert!(cover(root, &[root.to_owned()]).is_empty());
    }

    #[test]
    fn files_others_cannot_read_are_hidden() {
        let dir = tempfile::tempdir().expect("temp dir");
        let secret = dir.path().join("secret");
        fs::write(&secret, "x").expect("write");
        fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).expect("chmod");
        fs::write(dir.path().join("public"), "x").expect("write");
        fs::set_permissions(dir.path().join("public"), fs::Permissions::from_mode(0o644))
            .expect("chmod");
        let mut hidden = Vec::new();
        collect_unreadable(dir.path(), &mut hidden);
        assert_eq!(hidden, [secret]);
    }
}
