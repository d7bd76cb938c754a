//! What a task changed in its files since its workspace last recorded them: the paths
//! its tools wrote, or anything at all once a command ran.
//!
//! Recording a workspace (for its patch, the changes a child starts from, a
//! checkpoint) used to walk every file (`git add -A`). With this journal a workspace
//! whose files only the tools' own writes changed records just those paths, and one
//! that nothing changed records nothing; a command (`bash`) may have touched any file,
//! so after one the whole tree is walked again, once.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// The changes since the last record. Shared by the session's tools (which tell it
/// what they write) and the workspace (which takes it when it records the files).
#[derive(Debug, Default)]
pub struct Writes {
    pending: Mutex<Pending>,
}

#[derive(Debug, Default)]
struct Pending {
    paths: BTreeSet<PathBuf>,
    anywhere: bool,
}

/// What changed since the last record, taken from a [`Writes`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Since {
    Nothing,
    /// These files (absolute paths), and nothing else.
    Paths(Vec<PathBuf>),
    /// Possibly anything.
    Anywhere,
}

impl Writes {
    /// A tool wrote the file at `path` (absolute, inside the workspace).
    pub fn path(&self, path: &Path) {
        let mut pending = self.lock();
        if !pending.anywhere {
            pending.paths.insert(path.to_owned());
        }
    }

    /// Any file may have changed (a command ran, or is running).
    pub fn anywhere(&self) {
        let mut pending = self.lock();
        pending.anywhere = true;
        pending.paths.clear();
    }

    /// What changed since the last call, leaving nothing pending.
    pub(crate) fn take(&self) -> Since {
        let pending = std::mem::take(&mut *self.lock());
        if pending.anywhere {
            Since::Anywhere
        } else if pending.paths.is_empty() {
            Since::Nothing
        } else {
            Since::Paths(pending.paths.into_iter().collect())
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_taken_once_and_a_command_stands_for_every_path() {
        let writes = Writes::default();
        assert_eq!(writes.take(), Since::Nothing);
        writes.path(Path::new("/w/b.txt"));
        writes.path(Path::new("/w/a.txt"));
        writes.path(Path::new("/w/a.txt"));
        assert_eq!(
            writes.take(),
            Since::Paths(vec!["/w/a.txt".into(), "/w/b.txt".into()])
        );
        assert_eq!(writes.take(), Since::Nothing, "taken");
        writes.path(Path::new("/w/a.txt"));
        writes.anywhere();
        writes.path(Path::new("/w/c.txt"));
        assert_eq!(writes.take(), Since::Anywhere);
        assert_eq!(writes.take(), Since::Nothing);
    }
}
