//! A plain copy of a base directory that is not a git repository.

use std::path::Path;

use crate::WorkspaceError;

/// Copies the tree at `from` into `to` (missing, or an empty directory): directories, regular
/// files with their permissions, and symbolic links as links (never followed: a link
/// out of the base stays a link, which the tools refuse to follow). Other file types
/// (sockets, devices) are skipped, and so is a top-level `.git`. Blocking.
pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<(), WorkspaceError> {
    copy_dir(from, to, true)
}

fn copy_dir(from: &Path, to: &Path, top: bool) -> Result<(), WorkspaceError> {
    let created = if top {
        std::fs::create_dir_all(to)
    } else {
        std::fs::create_dir(to)
    };
    created.map_err(|e| WorkspaceError::io("create", to, e))?;
    let entries = std::fs::read_dir(from).map_err(|e| WorkspaceError::io("read", from, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| WorkspaceError::io("read", from, e))?;
        let name = entry.file_name();
        if top && name == ".git" {
            continue;
        }
        let (source, target) = (entry.path(), to.join(&name));
        let kind = entry
            .file_type()
            .map_err(|e| WorkspaceError::io("read", &source, e))?;
        if kind.is_dir() {
            copy_dir(&source, &target, false)?;
        } else if kind.is_file() {
            std::fs::copy(&source, &target).map_err(|e| WorkspaceError::io("copy", &source, e))?;
        } else if kind.is_symlink() {
            let link = std::fs::read_link(&source)
                .map_err(|e| WorkspaceError::io("read link", &source, e))?;
            std::os::unix::fs::symlink(&link, &target)
                .map_err(|e| WorkspaceError::io("create link", &target, e))?;
        }
    }
    let permissions = std::fs::metadata(from)
        .map_err(|e| WorkspaceError::io("read", from, e))?
        .permissions();
    std::fs::set_permissions(to, permissions).map_err(|e| WorkspaceError::io("copy", from, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_links_and_modes_are_copied_and_git_is_not() {
        let dir = tempfile::tempdir().expect("temp dir");
        let from = dir.path().join("from");
        std::fs::create_dir_all(from.join("sub/.git")).expect("mkdir");
        std::fs::create_dir_all(from.join(".git")).expect("mkdir");
        std::fs::write(from.join("sub/run.sh"), "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(
            from.join("sub/run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        std::os::unix::fs::symlink("/etc/passwd", from.join("out")).expect("symlink");
        let to = dir.path().join("to");
        copy_tree(&from, &to).expect("copied");
        let mode = std::fs::metadata(to.join("sub/run.sh"))
            .expect("copied file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        assert_eq!(
            std::fs::read_link(to.join("out")).expect("a link"),
            Path::new("/etc/passwd")
        );
        assert!(!to.join(".git").exists(), "the top-level .git is skipped");
        assert!(to.join("sub/.git").is_dir(), "only the top-level one");
    }
}
