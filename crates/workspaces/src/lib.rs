//! Per-task working copies for taskwire workers.
//!
//! A worker's `--workspace` is a read-only base: every task attempt works in a copy of
//! its own under `--workspaces-dir`, so concurrent tasks never see each other's
//! changes and the base never changes. What a task changed leaves it as a patch (a
//! `git diff --binary`), and a child starts from its parent's changes and hands its own
//! back: edits travel with the task tree, across workers.
//!
//! How a copy is made:
//! - **base is a git repository** (its top level): a checkout of the base's `HEAD`
//!   plus the base's uncommitted changes to tracked files (staged or not; untracked and
//!   ignored files are not copied). The checkout has a `.git` of its own (hard-linked
//!   from the worker's cache, detached at that commit), so the session's git commands
//!   work inside it without reaching the base.
//! - **base is any other directory**: a plain copy (symbolic links kept as links, a
//!   top-level `.git` left out).
//! - **the task names a repository** ([`Source::Git`]): a checkout of the named commit,
//!   through a cache of bare repositories (cloned once, fetched on later use).
//!
//! Then the changes the task inherits (its parent's) are applied. A worker reserves
//! the directory when an attempt starts ([`Workspaces::reserve`]) and fills it
//! ([`Workspaces::prepare`]) only when the session first needs its files.
//!
//! A checkout is a hard-linked clone of the cache repository, not a `git worktree`: a
//! linked worktree keeps its `HEAD` and index in the repository it was added from,
//! outside the task's directory, so a session confined to its directory could not run
//! git in it, and adding one writes to that repository, which for the base must not
//! change.
//!
//! Layout of `--workspaces-dir`: `cache/` (bare repositories and their locks) and
//! `tasks/<worker>/<task>-<attempt>/` (a checkout) beside
//! `tasks/<worker>/<task>-<attempt>.git` (its private repository). A worker holds
//! `tasks/<worker>.lock` while it runs; at start it removes what workers that no longer
//! hold theirs left behind.
//!
//! Modules: [`task`] (one workspace: patches in and out), [`writes`] (what changed
//! since the files were last recorded), `cache` (bare repositories),
//! `conflict` (what a model reads about a conflict), `copy` (plain copies), `git` (the
//! command runner), [`error`].

pub mod error;
pub mod task;
pub mod writes;

mod cache;
mod conflict;
mod copy;
mod git;
mod overlay;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use error::WorkspaceError;
pub use task::{Origin, TaskWorkspace};
pub use writes::Writes;

use crate::cache::Cache;
use crate::git::Git;

/// How long an overlay workspace takes the base's state (its `HEAD`, the cache
/// repository holding it, its uncommitted changes) as last looked at, instead of asking
/// `git` again: three commands, one of which `lstat`s every tracked file, were most of
/// what making an overlay cost. A change to the base reaches the tasks whose files are
/// made at most this long after it.
pub const BASE_STATE_FOR: std::time::Duration = std::time::Duration::from_secs(1);

/// The base's state as looked at: a repository at `commit`, held by the cache
/// repository `repo`, with `uncommitted` changes to its tracked files.
#[derive(Debug, Clone)]
struct BaseState {
    commit: String,
    repo: PathBuf,
    uncommitted: String,
    seen: std::time::Instant,
}

/// Where a task's workspace comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source<'a> {
    /// The worker's base directory.
    Base,
    /// A git repository (URL, `file://` URL or local path) at `reference` (a branch,
    /// a tag or a full commit id; the default branch when `None`).
    Git {
        url: &'a str,
        reference: Option<&'a str>,
    },
}

/// How a worker's workspaces are set up.
#[derive(Debug, Clone)]
pub struct WorkspacesConfig {
    /// The read-only base directory.
    pub base: PathBuf,
    /// Where task workspaces and the repository cache live.
    pub dir: PathBuf,
    /// Keep each workspace after its task instead of removing it.
    pub keep: bool,
    /// The worker's id: its task workspaces go under `tasks/<owner>/`.
    pub owner: String,
    /// Make a git base's workspaces as overlays of one shared checkout (see
    /// [`overlay`](crate::overlay)) where the process may mount them; copies otherwise.
    pub overlays: bool,
}

/// A worker's workspaces. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Workspaces {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    base: PathBuf,
    cache: Cache,
    /// The shared checkouts overlays are mounted on.
    trees: PathBuf,
    tasks: PathBuf,
    keep: bool,
    /// Overlays are tried; turned off for good by the first mount the kernel refuses.
    overlays: std::sync::atomic::AtomicBool,
    /// The base's state as last looked at, for overlay workspaces (see
    /// [`BASE_STATE_FOR`]).
    base_state: tokio::sync::Mutex<Option<BaseState>>,
    /// A look at the base runs in the background (see [`Workspaces::base_state`]).
    looking: std::sync::atomic::AtomicBool,
    /// Held for the worker's life: tells other workers this one's directory is in use.
    _owner_lock: File,
}

impl Workspaces {
    /// Checks the base, creates the directories, takes this worker's lock and removes
    /// what workers that are gone left behind.
    pub async fn open(config: WorkspacesConfig) -> Result<Self, WorkspaceError> {
        let base = tokio::fs::canonicalize(&config.base)
            .await
            .map_err(|e| WorkspaceError::io("open the base", &config.base, e))?;
        if !base.is_dir() {
            return Err(WorkspaceError::io(
                "use as the base",
                &base,
                std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
            ));
        }
        let owner = file_name_of(&config.owner);
        let dir = config.dir.clone();
        let keep = config.keep;
        let (cache, tasks, lock) = tokio::task::spawn_blocking(move || setup(&dir, &owner))
            .await
            .map_err(|e| WorkspaceError::io("set up", &config.dir, std::io::Error::other(e)))??;
        tracing::info!(
            base = %base.display(),
            workspaces = %config.dir.display(),
            keep,
            "workspaces ready"
        );
        Ok(Self {
            inner: Arc::new(Inner {
                base,
                trees: cache.join("trees"),
                cache: Cache::new(cache),
                tasks,
                keep,
                overlays: std::sync::atomic::AtomicBool::new(config.overlays),
                base_state: tokio::sync::Mutex::new(None),
                looking: std::sync::atomic::AtomicBool::new(false),
                _owner_lock: lock,
            }),
        })
    }

    /// The canonical base directory.
    pub fn base(&self) -> &Path {
        &self.inner.base
    }

    /// The directory workspace `name` (unique per task attempt, e.g. `<task>-<attempt>`)
    /// is made in by [`Workspaces::prepare`]: a canonical path, given to a session before
    /// its files exist. Nothing is created here, so a task that never needs files costs
    /// no file system work (what an earlier run of this worker left is removed when the
    /// worker opens its workspaces).
    pub fn path_of(&self, name: &str) -> PathBuf {
        self.inner.tasks.join(file_name_of(name))
    }

    /// [`Workspaces::path_of`] and, beside it, the workspace's git dir (`<path>.git`).
    fn paths(&self, name: &str) -> (PathBuf, PathBuf) {
        let work = self.path_of(name);
        let mut git_dir = work.clone().into_os_string();
        git_dir.push(".git");
        (work, PathBuf::from(git_dir))
    }

    /// Makes the workspace `name` from `source` (in [`Workspaces::path_of`], which must
    /// not exist or be empty), then applies `inherited` (the parent's changes, a
    /// patch relative to the source) as its starting point. On failure the directory
    /// is removed.
    pub async fn prepare(
        &self,
        name: &str,
        source: Source<'_>,
        inherited: &str,
    ) -> Result<TaskWorkspace, WorkspaceError> {
        self.make_named(name, source, inherited, None).await
    }

    /// [`Workspaces::prepare`], with `writes` as the journal the task's tools tell
    /// what they write (see [`Writes`]): recording the files then looks only at those,
    /// walking every file only after a command. A workspace made without one walks
    /// every file each time.
    pub async fn prepare_with(
        &self,
        name: &str,
        source: Source<'_>,
        inherited: &str,
        writes: Arc<Writes>,
    ) -> Result<TaskWorkspace, WorkspaceError> {
        self.make_named(name, source, inherited, Some(writes)).await
    }

    async fn make_named(
        &self,
        name: &str,
        source: Source<'_>,
        inherited: &str,
        writes: Option<Arc<Writes>>,
    ) -> Result<TaskWorkspace, WorkspaceError> {
        let (root, git_dir) = self.paths(name);
        let made = self
            .make(root.clone(), git_dir.clone(), source, inherited, writes)
            .await;
        if made.is_err() {
            let _ = remove_dirs(&[&root, &git_dir]).await;
        }
        made
    }

    async fn make(
        &self,
        root: PathBuf,
        git_dir: PathBuf,
        source: Source<'_>,
        inherited: &str,
        writes: Option<Arc<Writes>>,
    ) -> Result<TaskWorkspace, WorkspaceError> {
        let inner = &self.inner;
        let mut ws = match source {
            // Looked at for every task: the base may become a repository while the
            // worker runs.
            Source::Base => match self.base_state().await? {
                Some(BaseState {
                    commit,
                    repo,
                    uncommitted,
                    ..
                }) => {
                    let origin = Origin::Base {
                        commit: commit.clone(),
                    };
                    if let Some(ws) = self
                        .try_overlay(
                            &repo,
                            &commit,
                            &uncommitted,
                            &root,
                            &git_dir,
                            &origin,
                            &writes,
                        )
                        .await
                    {
                        let mut ws = ws?;
                        ws.inherit(
                            inherited,
                            "the changes the task starts from (its workspace_patch)",
                        )
                        .await?;
                        return Ok(ws);
                    }
                    let mut ws = self
                        .checkout(&repo, &commit, root, git_dir, origin, writes)
                        .await?;
                    if !uncommitted.is_empty() {
                        ws.apply_exactly(&uncommitted, "the base's uncommitted changes")
                            .await?;
                        ws.rebase_source().await?;
                    }
                    ws
                }
                None => {
                    let (from, to) = (inner.base.clone(), root.clone());
                    tokio::task::spawn_blocking(move || copy::copy_tree(&from, &to))
                        .await
                        .map_err(|e| {
                            WorkspaceError::io("copy", &root, std::io::Error::other(e))
                        })??;
                    init_private(&git_dir, &[]).await?;
                    TaskWorkspace::track(root, git_dir, Origin::Copy, inner.keep, true, writes)
                        .await?
                }
            },
            Source::Git { url, reference } => {
                let (repo, commit) = inner.cache.remote(url, reference).await?;
                let origin = Origin::Git {
                    url: url.to_owned(),
                    commit: commit.clone(),
                };
                self.checkout(&repo, &commit, root, git_dir, origin, writes)
                    .await?
            }
        };
        ws.inherit(
            inherited,
            "the changes the task starts from (its workspace_patch)",
        )
        .await?;
        Ok(ws)
    }

    /// The base's state: looked at now for a copy; for an overlay, the last look while
    /// it is younger than [`BASE_STATE_FOR`] (tasks starting together look once).
    /// Past half that age the next look starts in the background, so that a worker
    /// whose tasks keep starting never has one wait for `git`; `None` when the base
    /// is not the top of a git repository with a commit.
    async fn base_state(&self) -> Result<Option<BaseState>, WorkspaceError> {
        use std::sync::atomic::Ordering;
        let inner = &self.inner;
        if !inner.overlays.load(Ordering::Relaxed) {
            return self.look_at_base().await;
        }
        let mut last = inner.base_state.lock().await;
        if let Some(state) = last.as_ref()
            && state.seen.elapsed() < BASE_STATE_FOR
        {
            if state.seen.elapsed() > BASE_STATE_FOR / 2
                && !inner.looking.swap(true, Ordering::AcqRel)
            {
                let this = self.clone();
                tokio::spawn(async move {
                    let looked = this.look_at_base().await;
                    if let Ok(state) = looked {
                        let mut last = this.inner.base_state.lock().await;
                        if last
                            .as_ref()
                            .is_none_or(|l| state.as_ref().is_some_and(|s| s.seen > l.seen))
                        {
                            *last = state;
                        }
                    }
                    this.inner.looking.store(false, Ordering::Release);
                });
            }
            return Ok(Some(state.clone()));
        }
        let state = self.look_at_base().await?;
        last.clone_from(&state);
        Ok(state)
    }

    async fn look_at_base(&self) -> Result<Option<BaseState>, WorkspaceError> {
        let inner = &self.inner;
        let seen = std::time::Instant::now();
        let Some(commit) = base_head(&inner.base).await? else {
            return Ok(None);
        };
        let repo = inner.cache.base(&inner.base, &commit).await?;
        let uncommitted = base_changes(&inner.base, &commit).await?;
        Ok(Some(BaseState {
            commit,
            repo,
            uncommitted,
            seen,
        }))
    }

    /// The workspace as an overlay of the shared checkout of `commit` (with the
    /// base's uncommitted changes), when overlays are on: `None` when they are off, or
    /// when the kernel refused this mount (then off for good, said once).
    #[allow(clippy::too_many_arguments)]
    async fn try_overlay(
        &self,
        repo: &Path,
        commit: &str,
        uncommitted: &str,
        root: &Path,
        git_dir: &Path,
        origin: &Origin,
        writes: &Option<Arc<Writes>>,
    ) -> Option<Result<TaskWorkspace, WorkspaceError>> {
        use std::sync::atomic::Ordering;
        let inner = &self.inner;
        if !inner.overlays.load(Ordering::Relaxed) {
            return None;
        }
        let objects = repo.join("objects");
        let lower = match overlay::lower(&inner.trees, repo, commit, uncommitted, &objects).await {
            Ok(lower) => lower,
            Err(e) => return Some(Err(e)),
        };
        if let Err(e) = overlay::mount(&lower.dir, root).await {
            if inner.overlays.swap(false, Ordering::Relaxed) {
                tracing::warn!(error = %e, "overlay workspaces unavailable: workspaces are copies");
            }
            let (_, _, layers) = overlay::layers_of(root);
            let _ = remove_dirs(&[root, &layers]).await;
            return None;
        }
        let made = async {
            init_private(git_dir, &[&objects, &lower.objects]).await?;
            let index = git_dir.join("index");
            tokio::fs::copy(&lower.index, &index)
                .await
                .map_err(|e| WorkspaceError::io("copy", &lower.index, e))?;
            let (upper, _, _) = overlay::layers_of(root);
            Ok(TaskWorkspace::overlaid(
                root.to_owned(),
                git_dir.to_owned(),
                origin.clone(),
                inner.keep,
                writes.clone(),
                lower.tree.clone(),
                task::Overlay {
                    upper,
                    _in_use: lower.in_use,
                },
            ))
        }
        .await;
        if made.is_err() {
            let root = root.to_owned();
            let _ = tokio::task::spawn_blocking(move || overlay::unmount_and_remove(&root)).await;
        }
        Some(made)
    }

    /// A checkout of `commit` from the cache repository `repo`: a hard-linked clone
    /// for the session (detached at the commit) and a private repository whose index
    /// holds the files.
    async fn checkout(
        &self,
        repo: &Path,
        commit: &str,
        root: PathBuf,
        git_dir: PathBuf,
        origin: Origin,
        writes: Option<Arc<Writes>>,
    ) -> Result<TaskWorkspace, WorkspaceError> {
        {
            let _reading = self.inner.cache.lock(&Cache::key_of(repo), false).await?;
            let args: [std::ffi::OsString; 6] = [
                "clone".into(),
                "--local".into(),
                "--no-checkout".into(),
                "-q".into(),
                repo.into(),
                root.clone().into(),
            ];
            Git::in_dir(&self.inner.tasks)
                .run("clone the workspace", &args)
                .await?;
        }
        init_private(&git_dir, &[&repo.join("objects")]).await?;
        Git::with_work_tree(&git_dir, &root)
            .run(
                "check out the workspace",
                &["read-tree", "--reset", "-u", commit],
            )
            .await?;
        // The session's own repository: at the commit, with an index that matches the
        // files (copied, so its first `git status` does not hash every file again).
        Git::in_dir(&root)
            .run(
                "detach the workspace's HEAD",
                &["update-ref", "--no-deref", "HEAD", commit],
            )
            .await?;
        let (from, to) = (git_dir.join("index"), root.join(".git/index"));
        tokio::fs::copy(&from, &to)
            .await
            .map_err(|e| WorkspaceError::io("copy", &from, e))?;
        TaskWorkspace::track(root, git_dir, origin, self.inner.keep, false, writes).await
    }
}

/// The commit checked out in `dir` when `dir` is the top level of a git work tree
/// with at least one commit; `None` for any other directory.
async fn base_head(dir: &Path) -> Result<Option<String>, WorkspaceError> {
    let out = Git::in_dir(dir)
        .config("safe.directory=*")
        .output(
            &[
                "rev-parse",
                "--show-toplevel",
                "--verify",
                "-q",
                "HEAD^{commit}",
            ],
            None,
        )
        .await?;
    if !out.status.success() {
        return Ok(None);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let (Some(top), Some(commit)) = (lines.next(), lines.next()) else {
        return Ok(None);
    };
    let is_top = std::fs::canonicalize(top).is_ok_and(|top| top == dir);
    Ok(is_top.then(|| commit.trim().to_owned()))
}

/// Removes `dirs` (those that exist).
async fn remove_dirs(dirs: &[&Path]) -> Result<(), WorkspaceError> {
    for dir in dirs {
        match tokio::fs::remove_dir_all(dir).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(WorkspaceError::io("remove", *dir, e)),
        }
    }
    Ok(())
}

/// The base's uncommitted changes to tracked files, relative to `commit`.
async fn base_changes(base: &Path, commit: &str) -> Result<String, WorkspaceError> {
    let out = Git::in_dir(base)
        .config("safe.directory=*")
        .run_with_input(
            "read the base's uncommitted changes",
            &[
                "diff",
                "--binary",
                "--full-index",
                "--no-renames",
                "--no-color",
                "--no-ext-diff",
                "--no-textconv",
                commit,
                "--",
            ],
            &[],
        )
        .await?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Creates the private repository `git_dir`, borrowing objects from each of `objects`
/// (a cache repository's, a shared checkout's: they outlive the workspace).
async fn init_private(git_dir: &Path, objects: &[&Path]) -> Result<(), WorkspaceError> {
    // Written here rather than by `git init`: one process fewer per task. What git
    // needs to take a directory for a repository: `HEAD`, `objects/` and `refs/`.
    let git_dir = git_dir.to_owned();
    let objects: Vec<PathBuf> = objects.iter().map(|o| o.to_path_buf()).collect();
    tokio::task::spawn_blocking(move || {
        let io = |action, path: &Path| {
            let path = path.to_owned();
            move |e| WorkspaceError::io(action, path, e)
        };
        for dir in ["objects/info", "objects/pack", "refs/heads", "refs/tags"] {
            let dir = git_dir.join(dir);
            std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
        }
        let files = [
            ("HEAD", "ref: refs/heads/main\n".to_owned()),
            (
                "config",
                "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
                 [gc]\n\tauto = 0\n"
                    .to_owned(),
            ),
            (
                "objects/info/alternates",
                objects
                    .iter()
                    .map(|o| format!("{}\n", o.display()))
                    .collect(),
            ),
        ];
        for (name, text) in files {
            if name.ends_with("alternates") && text.is_empty() {
                continue;
            }
            let file = git_dir.join(name);
            std::fs::write(&file, text).map_err(io("write", &file))?;
        }
        Ok(())
    })
    .await
    .map_err(|e| WorkspaceError::io("create", Path::new("repository"), std::io::Error::other(e)))?
}

/// Creates `dir/cache` and `dir/tasks/<owner>`, takes `tasks/<owner>.lock`, and removes
/// the task directories of workers whose lock is free (gone, or stopped without
/// cleaning up). Blocking.
fn setup(dir: &Path, owner: &str) -> Result<(PathBuf, PathBuf, File), WorkspaceError> {
    let cache = dir.join("cache");
    let all_tasks = dir.join("tasks");
    for d in [&cache, &all_tasks] {
        std::fs::create_dir_all(d).map_err(|e| WorkspaceError::io("create", d, e))?;
    }
    // Workers starting at once take turns here: one taking its own lock must not be
    // seen, half done, by another that is clearing stopped workers' leftovers.
    let setup_path = all_tasks.join(".setup.lock");
    let setup_lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&setup_path)
        .map_err(|e| WorkspaceError::io("open", &setup_path, e))?;
    setup_lock
        .lock()
        .map_err(|e| WorkspaceError::io("lock", &setup_path, e))?;
    let lock_path = all_tasks.join(format!("{owner}.lock"));
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| WorkspaceError::io("open", &lock_path, e))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(WorkspaceError::InUse {
                dir: dir.to_owned(),
            });
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(WorkspaceError::io("lock", &lock_path, e));
        }
    }
    let entries =
        std::fs::read_dir(&all_tasks).map_err(|e| WorkspaceError::io("read", &all_tasks, e))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(other) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".lock"))
            .filter(|n| !n.starts_with('.'))
        else {
            continue;
        };
        let leftovers = all_tasks.join(other);
        if other == owner {
            remove_leftovers(&leftovers);
            continue;
        }
        let Ok(file) = File::options().write(true).open(&path) else {
            continue;
        };
        if file.try_lock().is_ok() {
            remove_leftovers(&leftovers);
            let _ = std::fs::remove_file(&path);
        }
    }
    let tasks = all_tasks.join(owner);
    std::fs::create_dir_all(&tasks).map_err(|e| WorkspaceError::io("create", &tasks, e))?;
    // Canonical, so that the paths of workspaces not made yet are canonical too.
    let tasks = std::fs::canonicalize(&tasks).map_err(|e| WorkspaceError::io("open", &tasks, e))?;
    Ok((cache, tasks, lock))
}

fn remove_leftovers(dir: &Path) {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {
            tracing::info!(dir = %dir.display(), "removed workspaces left by a stopped worker")
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "failed to remove old workspaces")
        }
    }
}

/// `name` as one path component: letters, digits, `.`, `_` and `-` kept, anything else
/// replaced by `_`.
fn file_name_of(name: &str) -> String {
    // Made at its final size: a char's iterator gives no length to reserve.
    let mut cleaned = String::with_capacity(name.len());
    cleaned.extend(name.chars().map(|c| {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            c
        } else {
            '_'
        }
    }));
    match cleaned.trim_matches('.') {
        "" => "_".to_owned(),
        _ => cleaned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_becomes_a_file_name_of_safe_characters() {
        assert_eq!(file_name_of("task-1_a.b"), "task-1_a.b");
        assert_eq!(file_name_of("a/b c\\d"), "a_b_c_d");
        assert_eq!(file_name_of("café"), "caf_");
        assert_eq!(file_name_of(".."), "_");
        assert_eq!(file_name_of(""), "_");
        assert_eq!(file_name_of("../x"), ".._x");
    }

    /// Workers that start at once, each with its own id, all get their workspaces: none
    /// takes another's lock for a stopped worker's while it is being taken.
    #[test]
    fn workers_starting_at_once_each_get_their_own_lock() {
        let dir = tempfile::tempdir().expect("tempdir");
        for _ in 0..20 {
            let handles: Vec<_> = (0..6)
                .map(|i| {
                    let dir = dir.path().to_owned();
                    std::thread::spawn(move || {
                        setup(&dir, &format!("w{i}")).map(|(_, _, lock)| lock)
                    })
                })
                .collect();
            let locks: Vec<File> = handles
                .into_iter()
                .map(|h| h.join().expect("no panic").expect("set up"))
                .collect();
            drop(locks);
        }
        // The same id twice while the first holds it is refused.
        let held = setup(dir.path(), "w0").expect("set up");
        assert!(matches!(
            setup(dir.path(), "w0"),
            Err(WorkspaceError::InUse { .. })
        ));
        drop(held);
    }
}
