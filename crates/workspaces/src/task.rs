//! One task attempt's workspace: its files, the private repository that tracks them,
//! and the patches that go in and out.
//!
//! The files are what the session's tools see. Beside them lies a private git
//! directory (`<name>.git`) that records two trees: the *source* (what the workspace
//! was made from: a commit, plus the base's uncommitted changes) and the *start* (the
//! source plus the changes the task inherited from its parent). The task's patch is
//! the difference from the start; what a child starts from is the difference from the
//! source.
//!
//! The private repository is the only one the worker runs git on once the session has
//! started: a checkout's own `.git` belongs to the session, which could set hooks,
//! `core.fsmonitor` or filters in its config, and the worker must never run what a
//! model wrote outside the sandbox the model's commands run in. Its index is a private
//! file too, so git commands the session runs see their own index untouched.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};

use tokio::sync::Mutex;

use crate::WorkspaceError;
use crate::conflict;
use crate::git::{Git, stderr_of};
use crate::writes::{Since, Writes};

/// What a workspace was made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The worker's base repository at its `HEAD`, with the base's uncommitted changes
    /// to tracked files.
    Base { commit: String },
    /// A copy of the worker's base directory (not a git repository).
    Copy,
    /// A commit of a repository a task named.
    Git { url: String, commit: String },
}

/// A task attempt's working copy. Removed when dropped unless kept (see
/// [`TaskWorkspace::remove`] to remove it without blocking the caller).
#[derive(Debug)]
pub struct TaskWorkspace {
    root: PathBuf,
    git_dir: PathBuf,
    origin: Origin,
    source: String,
    start: String,
    keep: bool,
    removed: bool,
    /// Index work (patches in and out) one at a time: a turn's parallel `task` calls
    /// return together.
    busy: Mutex<()>,
    /// What the task's tools changed since the files were last recorded; without a
    /// journal, anything may have.
    writes: Option<Arc<Writes>>,
    /// The tree the private index held when it was last written, while nothing has
    /// changed it since.
    recorded: std::sync::Mutex<Option<String>>,
    /// Set when the files are an overlay of a shared checkout.
    overlay: Option<Overlay>,
}

/// A workspace's overlay: its upper layer, and its hold on the shared checkout under it.
#[derive(Debug)]
pub(crate) struct Overlay {
    /// Exactly what the task changed (files, links, whiteouts for removals).
    pub upper: PathBuf,
    /// Held shared while mounted: the shared checkout stays.
    pub _in_use: std::fs::File,
}

/// Options of every diff this crate makes: whole object ids (so a patch can be
/// applied three-way), binary files included, renames as delete and add (applies
/// the same anywhere), and nothing a user's configuration could add.
const DIFF: [&str; 7] = [
    "diff",
    "--binary",
    "--full-index",
    "--no-renames",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
];

impl TaskWorkspace {
    /// A workspace whose files are in `root`, tracked by the private repository
    /// `git_dir`; its source and start are the files as they are. `record` adds them
    /// to the index first (a fresh checkout's index has them already).
    pub(crate) async fn track(
        root: PathBuf,
        git_dir: PathBuf,
        origin: Origin,
        keep: bool,
        record: bool,
        writes: Option<Arc<Writes>>,
    ) -> Result<Self, WorkspaceError> {
        let mut ws = Self {
            root,
            git_dir,
            origin,
            source: String::new(),
            start: String::new(),
            keep,
            removed: false,
            busy: Mutex::new(()),
            writes,
            recorded: std::sync::Mutex::new(None),
            overlay: None,
        };
        if record {
            ws.add_all().await?;
        }
        ws.source = ws.tree().await?;
        ws.start = ws.source.clone();
        Ok(ws)
    }

    /// A workspace mounted at `root` as `overlay`, its private index a copy of the
    /// shared checkout's (whose recorded tree is `tree`).
    pub(crate) fn overlaid(
        root: PathBuf,
        git_dir: PathBuf,
        origin: Origin,
        keep: bool,
        writes: Option<Arc<Writes>>,
        tree: String,
        overlay: Overlay,
    ) -> Self {
        Self {
            root,
            git_dir,
            origin,
            source: tree.clone(),
            start: tree.clone(),
            keep,
            removed: false,
            busy: Mutex::new(()),
            writes,
            recorded: std::sync::Mutex::new(Some(tree)),
            overlay: Some(overlay),
        }
    }

    /// The directory the session works in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What the workspace was made from.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    fn git(&self) -> Git {
        Git::with_work_tree(&self.git_dir, &self.root)
    }

    /// Records the files as they are now in the private index; the tree's id. Only
    /// what changed since the last record is looked at ([`Writes`]): the paths the
    /// tools wrote, every file after a command, nothing (and no git at all) when
    /// nothing changed.
    async fn snapshot(&self) -> Result<String, WorkspaceError> {
        let since = self.writes.as_ref().map_or(Since::Anywhere, |w| w.take());
        match since {
            Since::Nothing => {
                if let Some(tree) = self.recorded() {
                    return Ok(tree);
                }
            }
            Since::Paths(paths) => {
                if let Err(e) = self.add_paths(&paths).await {
                    // An ignored file, or one a command removed meanwhile: the walk
                    // records them as `add -A` always did.
                    tracing::debug!(workspace = %self.root.display(), error = %e, "recording the written paths failed, walking the files");
                    self.add_all().await?;
                }
            }
            Since::Anywhere => match &self.overlay {
                Some(overlay) => self.add_changed(overlay).await?,
                None => self.add_all().await?,
            },
        }
        self.tree().await
    }

    /// Records what the overlay's upper layer holds and what the index already has
    /// apart from the source (a file made, then removed by a command, leaves the upper
    /// layer but must leave the index too); the tree itself is never walked.
    async fn add_changed(&self, overlay: &Overlay) -> Result<(), WorkspaceError> {
        let upper = overlay.upper.clone();
        let mut paths = tokio::task::spawn_blocking(move || crate::overlay::changed_paths(&upper))
            .await
            .map_err(|e| WorkspaceError::io("read", &overlay.upper, std::io::Error::other(e)))?
            .map_err(|e| WorkspaceError::io("read", &overlay.upper, e))?;
        let recorded = self
            .git()
            .run_with_input(
                "list the recorded changes",
                &[
                    "diff",
                    "--cached",
                    "--name-only",
                    "-z",
                    "--no-renames",
                    &self.source,
                    "--",
                ],
                &[],
            )
            .await?;
        paths.extend(
            recorded
                .split(|b| *b == 0)
                .filter(|n| !n.is_empty())
                .map(|n| PathBuf::from(String::from_utf8_lossy(n).into_owned())),
        );
        paths.sort();
        paths.dedup();
        if paths.is_empty() {
            return Ok(());
        }
        let absolute: Vec<PathBuf> = paths.iter().map(|p| self.root.join(p)).collect();
        if let Err(e) = self.add_paths(&absolute).await {
            tracing::debug!(workspace = %self.root.display(), error = %e, "recording the upper layer's paths failed, walking the files");
            self.add_all().await?;
        }
        Ok(())
    }

    /// Records every file (a walk of the whole tree).
    async fn add_all(&self) -> Result<(), WorkspaceError> {
        self.forget_tree();
        self.git()
            .run("record the workspace", &["add", "-A", "--", "."])
            .await
            .map(drop)
    }

    /// Records the files at `paths` (absolute, inside the root) and nothing else.
    async fn add_paths(&self, paths: &[PathBuf]) -> Result<(), WorkspaceError> {
        self.forget_tree();
        let mut list = Vec::new();
        for path in paths {
            let relative = path
                .strip_prefix(&self.root)
                .map_err(|_| WorkspaceError::Git {
                    action: "record the workspace".to_owned(),
                    stderr: format!("{} is outside the workspace", path.display()),
                })?;
            list.extend_from_slice(relative.as_os_str().as_encoded_bytes());
            list.push(0);
        }
        self.git()
            .literal_pathspecs()
            .config("advice.addIgnoredFile=false")
            .run_with_input(
                "record the written files",
                &["add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"],
                &list,
            )
            .await
            .map(drop)
    }

    /// The tree of the private index as it is.
    async fn tree(&self) -> Result<String, WorkspaceError> {
        let tree = self
            .git()
            .run("record the workspace", &["write-tree"])
            .await?;
        *self.recorded_lock() = Some(tree.clone());
        Ok(tree)
    }

    fn recorded(&self) -> Option<String> {
        self.recorded_lock().clone()
    }

    /// The private index is about to change: its tree must be written again.
    fn forget_tree(&self) {
        *self.recorded_lock() = None;
    }

    fn recorded_lock(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.recorded.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn diff(&self, from: &str, to: &str) -> Result<Vec<u8>, WorkspaceError> {
        let mut args = DIFF.to_vec();
        args.extend([from, to, "--"]);
        self.git()
            .run_with_input("make the workspace's patch", &args, &[])
            .await
    }

    /// The task's own change: a `git diff --binary` from its start (the source plus
    /// what it inherited) to its files now, new files included. Empty when nothing
    /// changed. Files the workspace's `.gitignore` ignores are left out.
    pub async fn patch(&self) -> Result<String, WorkspaceError> {
        let _busy = self.busy.lock().await;
        let now = self.snapshot().await?;
        self.diff_utf8(&self.start, &now).await
    }

    /// Everything changed since the source: what a child must start from to see the
    /// files as they are now (the task's inherited changes and its own).
    pub async fn changes(&self) -> Result<String, WorkspaceError> {
        let _busy = self.busy.lock().await;
        let now = self.snapshot().await?;
        self.diff_utf8(&self.source, &now).await
    }

    async fn diff_utf8(&self, from: &str, to: &str) -> Result<String, WorkspaceError> {
        if from == to {
            return Ok(String::new());
        }
        match String::from_utf8(self.diff(from, to).await?) {
            Ok(patch) => Ok(patch),
            // Text in another encoding than UTF-8 cannot travel in a protobuf string.
            Err(_) => self.diff_with_binary_fallback(from, to).await,
        }
    }

    /// A diff in which files whose text is not UTF-8 are binary patches, so that the
    /// whole patch is UTF-8 (it travels as a protobuf string).
    async fn diff_with_binary_fallback(
        &self,
        from: &str,
        to: &str,
    ) -> Result<String, WorkspaceError> {
        let mut args = DIFF.to_vec();
        args.extend(["-z", "--name-only", from, to, "--"]);
        let names = self
            .git()
            .run_with_input("list the changed files", &args, &[])
            .await?;
        let mut attributes = Vec::new();
        for name in names.split(|b| *b == 0).filter(|n| !n.is_empty()) {
            let mut one = DIFF.to_vec();
            let path = String::from_utf8_lossy(name).into_owned();
            one.extend([from, to, "--", &path]);
            let section = self
                .git()
                .run_with_input("make the workspace's patch", &one, &[])
                .await?;
            if std::str::from_utf8(&section).is_err() {
                attributes.extend_from_slice(b"/");
                for byte in name {
                    if b"*?[]\\ \t\"#!".contains(byte) {
                        attributes.push(b'\\');
                    }
                    attributes.push(*byte);
                }
                attributes.extend_from_slice(b" -diff\n");
            }
        }
        let info = self.git_dir.join("info");
        let file = info.join("attributes");
        tokio::fs::create_dir_all(&info)
            .await
            .map_err(|e| WorkspaceError::io("create", &info, e))?;
        tokio::fs::write(&file, &attributes)
            .await
            .map_err(|e| WorkspaceError::io("write", &file, e))?;
        let patch = self.diff(from, to).await;
        let _ = tokio::fs::remove_file(&file).await;
        String::from_utf8(patch?).map_err(|_| WorkspaceError::Git {
            action: "make the workspace's patch".to_owned(),
            stderr: "the patch is not UTF-8 even with such files as binary".to_owned(),
        })
    }

    /// Applies `patch` exactly (no merge) and makes the result the start: the task's
    /// own patch begins after it. `what` names the changes in errors.
    pub(crate) async fn inherit(
        &mut self,
        patch: &str,
        what: &'static str,
    ) -> Result<(), WorkspaceError> {
        if patch.is_empty() {
            return Ok(());
        }
        // `apply --index` leaves the index matching the files.
        self.apply_exactly(patch, what).await?;
        self.start = self.tree().await?;
        Ok(())
    }

    /// Makes the current files the source as well as the start (after the base's
    /// uncommitted changes were copied in).
    pub(crate) async fn rebase_source(&mut self) -> Result<(), WorkspaceError> {
        self.source = self.tree().await?;
        self.start = self.source.clone();
        Ok(())
    }

    /// Applies `patch` exactly (no merge), as part of the task's own change: an
    /// earlier attempt's changes, restored before the session goes on from its
    /// checkpoint. `what` names the changes in errors.
    pub async fn restore(&self, patch: &str, what: &'static str) -> Result<(), WorkspaceError> {
        let _busy = self.busy.lock().await;
        self.apply_exactly(patch, what).await
    }

    pub(crate) async fn apply_exactly(
        &self,
        patch: &str,
        what: &'static str,
    ) -> Result<(), WorkspaceError> {
        if patch.is_empty() {
            return Ok(());
        }
        self.forget_tree();
        let output = self
            .git()
            .output(
                &["apply", "--index", "--binary", "--whitespace=nowarn", "-"],
                Some(patch.as_bytes()),
            )
            .await?;
        if output.status.success() {
            Ok(())
        } else {
            Err(WorkspaceError::DoesNotApply {
                what,
                reason: stderr_of(&output),
            })
        }
    }

    /// Applies a child's `patch` to the files as they are now, merging three-way where
    /// both changed a file. On a conflict nothing changes and the error's report shows
    /// the conflicting hunks.
    pub async fn apply(&self, patch: &str) -> Result<(), WorkspaceError> {
        if patch.is_empty() {
            return Ok(());
        }
        let _busy = self.busy.lock().await;
        let before = self.snapshot().await?;
        // The merge runs on a copy of the index, so a conflict leaves no trace; the
        // files change only once it succeeded.
        let scratch = self.git_dir.join("merge-index");
        let index = self.git_dir.join("index");
        tokio::fs::copy(&index, &scratch)
            .await
            .map_err(|e| WorkspaceError::io("copy", &index, e))?;
        let merging = self.git().index(&scratch);
        let merged = merging
            .output(
                &[
                    "apply",
                    "--3way",
                    "--cached",
                    "--binary",
                    "--whitespace=nowarn",
                    "-",
                ],
                Some(patch.as_bytes()),
            )
            .await?;
        let result = if merged.status.success() {
            match merging.run("merge the patch", &["write-tree"]).await {
                Ok(after) => {
                    self.forget_tree();
                    self.git()
                        .run(
                            "update the workspace's files",
                            &["read-tree", "-m", "-u", &before, &after],
                        )
                        .await
                        .map(|_| *self.recorded_lock() = Some(after))
                }
                Err(e) => Err(e),
            }
        } else {
            Err(WorkspaceError::Conflict {
                report: conflict::report(&merging, patch, &stderr_of(&merged)).await,
            })
        };
        let _ = tokio::fs::remove_file(&scratch).await;
        result
    }

    /// Keeps the workspace after its task, whatever the worker's setting (its changes
    /// could not be carried away).
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// Removes the workspace's files and private repository now (unless it is to be
    /// kept), on the blocking pool.
    pub async fn remove(mut self) {
        if self.keep {
            tracing::info!(workspace = %self.root.display(), "workspace kept");
            self.removed = true;
            return;
        }
        let paths = [self.root.clone(), self.git_dir.clone()];
        let overlay = self.overlay.is_some();
        self.removed = true;
        let _ = tokio::task::spawn_blocking(move || remove_files(&paths, overlay)).await;
    }
}

impl Drop for TaskWorkspace {
    fn drop(&mut self) {
        if self.removed || self.keep {
            return;
        }
        let paths = [self.root.clone(), self.git_dir.clone()];
        let overlay = self.overlay.is_some();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(move || remove_files(&paths, overlay));
            }
            Err(_) => remove_files(&paths, overlay),
        }
    }
}

/// Removes a workspace's files and private repository (`[root, git_dir]`), unmounting
/// the files first when they are an overlay.
fn remove_files(paths: &[PathBuf; 2], overlay: bool) {
    if overlay {
        crate::overlay::unmount_and_remove(&paths[0]);
        remove_all(&paths[1..]);
    } else {
        remove_all(paths);
    }
}

fn remove_all(paths: &[PathBuf]) {
    for path in paths {
        match std::fs::remove_dir_all(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(workspace = %path.display(), error = %e, "failed to remove a workspace");
            }
        }
    }
}
