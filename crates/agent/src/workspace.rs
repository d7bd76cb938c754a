//! The directory a session may touch, and the one function that turns a model-given
//! path into a real one.
//!
//! Every tool resolves paths through [`Workspace::resolve`]; nothing else in the crate
//! joins model input onto the file system. Checks are made on the canonical path
//! (symlinks and `..` resolved), so `../x`, `/etc/passwd` and `link -> /` are all
//! refused. The check and the later open are not atomic: a process racing to swap a
//! directory for a symlink can still win, which is why workers should also run in a
//! sandbox; this guard is about model mistakes and prompt injection, not local
//! attackers.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::error::ToolError;

/// A canonical root directory that confines all tool paths. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: Arc<PathBuf>,
    /// Told of what the tools write, when the host keeps track of it.
    writes: Option<Arc<dyn WriteLog>>,
}

impl PartialEq for Workspace {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root
    }
}

impl Eq for Workspace {}

/// What a host learns of the session's writes, so that recording the files later
/// looks only at what changed (a worker's workspace otherwise walks every file).
pub trait WriteLog: Send + Sync + std::fmt::Debug {
    /// A tool is writing the file at `path` (canonical, inside the root).
    fn wrote(&self, path: &Path);
    /// Any file may change: a command runs.
    fn wrote_anywhere(&self);
}

impl Workspace {
    /// Opens `root`, which must be an existing directory. Blocking (one canonicalize).
    pub fn new(root: impl AsRef<Path>) -> Result<Self, ToolError> {
        let shown = root.as_ref().display().to_string();
        let root = std::fs::canonicalize(root.as_ref())
            .map_err(|source| ToolError::io("open workspace", &shown, source))?;
        if !root.is_dir() {
            return Err(ToolError::Refused {
                action: "use",
                path: shown,
                reason: "the workspace root is not a directory".into(),
            });
        }
        Ok(Self {
            root: Arc::new(root),
            writes: None,
        })
    }

    /// A workspace at `root`, a canonical directory that need not exist yet: it must
    /// exist before a tool resolves a path in it, which the session makes sure of
    /// through [`SessionHost::ensure_workspace`](crate::SessionHost::ensure_workspace)
    /// before its first tool call. No file system access.
    pub fn planned(root: PathBuf) -> Self {
        debug_assert!(root.is_absolute(), "a workspace root is canonical");
        Self {
            root: Arc::new(root),
            writes: None,
        }
    }

    /// The same workspace, its tools' writes told to `log`.
    pub fn with_write_log(mut self, log: Arc<dyn WriteLog>) -> Self {
        self.writes = Some(log);
        self
    }

    /// Tells the host's log (if any) that a tool is writing `path`.
    pub fn wrote(&self, path: &Path) {
        if let Some(log) = &self.writes {
            log.wrote(path);
        }
    }

    /// Tells the host's log (if any) that any file may change.
    pub fn wrote_anywhere(&self) {
        if let Some(log) = &self.writes {
            log.wrote_anywhere();
        }
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a model-given path (relative to the root, or absolute inside it) to a
    /// canonical absolute path inside the workspace. The target need not exist (a
    /// later write tool creates files), but its longest existing prefix is
    /// canonicalized so that symlinks and `..` cannot lead outside. Blocking.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        let outside = || ToolError::PathOutsideWorkspace {
            path: path.to_owned(),
        };
        let given = Path::new(path);
        let joined = if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.root.join(given)
        };

        // Walk up to the longest prefix that exists and canonicalize it; the missing
        // tail is then normalized lexically (it has no symlinks, since it does not exist).
        let mut tail = Vec::new();
        let mut prefix = joined.as_path();
        let canonical = loop {
            match std::fs::canonicalize(prefix) {
                Ok(canonical) => break canonical,
                Err(_) if std::fs::symlink_metadata(prefix).is_ok() => {
                    // Exists but cannot be resolved: a dangling symlink. Its target
                    // could be anywhere, and a write through it would land there.
                    return Err(outside());
                }
                Err(_) => {
                    // Keep `..` in the tail too (`new/../x` with `new` missing); the
                    // lexical pass below applies it.
                    let last = prefix.components().next_back().ok_or_else(outside)?;
                    tail.push(last.as_os_str().to_owned());
                    prefix = prefix.parent().ok_or_else(outside)?;
                }
            }
        };
        let mut resolved = canonical;
        for part in tail.iter().rev() {
            resolved.push(part);
        }
        let resolved = normalize(&resolved).ok_or_else(outside)?;
        if resolved.starts_with(self.root.as_path()) {
            Ok(resolved)
        } else {
            Err(outside())
        }
    }

    /// `path` (absolute, inside the root) relative to the root, with `/` separators;
    /// `.` for the root itself. Used in tool output so the model sees short paths.
    pub fn relative(&self, path: &Path) -> String {
        match path.strip_prefix(self.root.as_path()) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => path.to_string_lossy().into_owned(),
        }
    }

    /// The permission subject for a model-given path: the lexically normalized path
    /// relative to the root (absolute if it points outside), so that `./src/a.rs`,
    /// `src/../src/a.rs` and `/root/src/a.rs` all meet the same rules as `src/a.rs`.
    /// Touches no file system; the real check is [`Workspace::resolve`].
    pub fn subject(&self, path: &str) -> String {
        let given = Path::new(path);
        let joined = if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.root.join(given)
        };
        match normalize(&joined) {
            Some(normal) => self.relative(&normal),
            None => path.to_owned(),
        }
    }
}

/// Lexical normalization of an absolute path: drops `.`, applies `..`. `None` if `..`
/// climbs above `/`.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("ws/src")).expect("mkdir");
        std::fs::write(dir.path().join("ws/src/lib.rs"), "fn main() {}\n").expect("write");
        std::fs::write(dir.path().join("secret.txt"), "outside\n").expect("write");
        let ws = Workspace::new(dir.path().join("ws")).expect("workspace");
        (dir, ws)
    }

    fn is_outside(result: Result<PathBuf, ToolError>) -> bool {
        matches!(result, Err(ToolError::PathOutsideWorkspace { .. }))
    }

    #[test]
    fn relative_paths_resolve_inside_the_root() {
        let (_dir, ws) = setup();
        assert_eq!(
            ws.resolve("src/lib.rs").expect("inside"),
            ws.root().join("src/lib.rs")
        );
        assert_eq!(
            ws.resolve("./src/../src/lib.rs").expect("inside"),
            ws.root().join("src/lib.rs")
        );
        assert_eq!(ws.resolve(".").expect("root"), ws.root());
        assert_eq!(ws.resolve("").expect("root"), ws.root());
    }

    #[test]
    fn missing_files_inside_resolve_for_later_creation() {
        let (_dir, ws) = setup();
        assert_eq!(
            ws.resolve("new/dir/file.rs").expect("inside"),
            ws.root().join("new/dir/file.rs")
        );
        assert_eq!(
            ws.resolve("new/../other.rs").expect("inside"),
            ws.root().join("other.rs")
        );
    }

    #[test]
    fn dotdot_escape_is_refused() {
        let (_dir, ws) = setup();
        assert!(is_outside(ws.resolve("../secret.txt")));
        assert!(is_outside(ws.resolve("src/../../secret.txt")));
        assert!(is_outside(ws.resolve("../missing/file")));
        assert!(is_outside(ws.resolve("missing/../../secret.txt")));
        let err = ws.resolve("../x").expect_err("outside");
        assert_eq!(err.to_string(), "path ../x is outside the workspace");
    }

    #[test]
    fn absolute_paths_are_accepted_only_inside_the_root() {
        let (dir, ws) = setup();
        let inside = ws.root().join("src/lib.rs");
        assert_eq!(
            ws.resolve(&inside.to_string_lossy()).expect("inside"),
            inside
        );
        assert!(is_outside(
            ws.resolve(&dir.path().join("secret.txt").to_string_lossy())
        ));
        assert!(is_outside(ws.resolve("/etc/passwd")));
        assert!(is_outside(ws.resolve("/")));
    }

    #[test]
    fn symlink_outside_workspace_is_refused() {
        let (dir, ws) = setup();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), ws.root().join("leak"))
            .expect("symlink");
        std::os::unix::fs::symlink(dir.path(), ws.root().join("up")).expect("symlink");
        assert!(is_outside(ws.resolve("leak")));
        assert!(is_outside(ws.resolve("up/secret.txt")));
        assert!(is_outside(ws.resolve("up/not-yet-created")));
    }

    #[test]
    fn symlink_inside_workspace_is_followed() {
        let (_dir, ws) = setup();
        std::os::unix::fs::symlink(ws.root().join("src"), ws.root().join("alias"))
            .expect("symlink");
        assert_eq!(
            ws.resolve("alias/lib.rs").expect("inside"),
            ws.root().join("src/lib.rs")
        );
    }

    #[test]
    fn dangling_symlink_is_refused() {
        let (dir, ws) = setup();
        std::os::unix::fs::symlink(dir.path().join("nowhere"), ws.root().join("dangling"))
            .expect("symlink");
        assert!(is_outside(ws.resolve("dangling")));
    }

    #[test]
    fn subject_is_normalized_and_relative() {
        let (_dir, ws) = setup();
        assert_eq!(ws.subject("./src/../src/lib.rs"), "src/lib.rs");
        assert_eq!(ws.subject(&ws.root().join("src").to_string_lossy()), "src");
        assert_eq!(ws.subject(""), ".");
        assert_eq!(ws.subject("/etc/passwd"), "/etc/passwd");
    }

    #[test]
    fn root_must_be_a_directory() {
        let (dir, _ws) = setup();
        assert!(Workspace::new(dir.path().join("secret.txt")).is_err());
        assert!(matches!(
            Workspace::new(dir.path().join("nope")),
            Err(ToolError::NotFound { .. })
        ));
    }
}
