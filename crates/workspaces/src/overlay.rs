//! Workspaces as overlays: every task attempt on a base sees one shared, read-only
//! checkout of it (the *lower* tree, made once per base state) through an overlay
//! mount whose upper layer holds exactly what the task changed. Making one is a
//! mount, whatever the size of the repository; what a command changed is what the
//! upper layer holds, found without walking the tree.
//!
//! Mounting needs a mount namespace of the worker's own
//! (`taskwire_sandbox::mounts::enter_private_mounts`): only the worker and the
//! commands it starts see the mounts. Where the kernel refuses (no user namespaces,
//! a container's policy, no unprivileged overlay before Linux 5.11), the workspace is a
//! copy as before.
//!
//! Layout under the cache: `trees/<key>/` (the lower tree: a checkout with its own
//! `.git`, the base's uncommitted changes applied), `trees/<key>.git` (the private
//! repository that recorded it, whose objects the tasks borrow), `trees/<key>.index`
//! (its index, which each task copies) and `trees/<key>.tree` (the recorded tree),
//! and `trees/<key>.lock`, held shared by every workspace mounted on it. Beside a
//! task's mount point `tasks/<worker>/<name>` lie `<name>.upper/` (the upper layer
//! and the overlay's work directory) and its private repository `<name>.git`.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::WorkspaceError;
use crate::cache::lock_file;
use crate::git::Git;

/// The extended attribute an overlay mounted with `userxattr` marks an opaque
/// directory with (a directory whose lower contents are hidden: removed and made
/// again).
const OPAQUE: &str = "user.overlay.opaque";

/// A lower tree ready to mount, and what a task's private repository starts from.
#[derive(Debug)]
pub(crate) struct Lower {
    /// The checkout.
    pub dir: PathBuf,
    /// Its index, copied into each task's private repository.
    pub index: PathBuf,
    /// The objects its private repository added (blobs of the uncommitted changes).
    pub objects: PathBuf,
    /// The tree it holds, as recorded: the workspace's source.
    pub tree: String,
    /// Held shared while a workspace is mounted on it: a tree no lock holds may go.
    pub in_use: File,
}

/// Where the pieces of the lower tree `key` lie under `trees`.
struct TreePaths {
    dir: PathBuf,
    git: PathBuf,
    index: PathBuf,
    tree: PathBuf,
    lock: PathBuf,
}

impl TreePaths {
    fn of(trees: &Path, key: &str) -> Self {
        Self {
            dir: trees.join(key),
            git: trees.join(format!("{key}.git")),
            index: trees.join(format!("{key}.index")),
            tree: trees.join(format!("{key}.tree")),
            lock: trees.join(format!("{key}.lock")),
        }
    }
}

/// The lower tree of `commit` of the cache repository `repo` with `uncommitted`
/// applied, made the first time (by whichever worker of the cache directory gets
/// there first) and shared after. Lower trees no workspace uses are removed when a
/// new one is made.
pub(crate) async fn lower(
    trees: &Path,
    repo: &Path,
    commit: &str,
    uncommitted: &str,
    alternates: &Path,
) -> Result<Lower, WorkspaceError> {
    let key = crate::cache::key("tree", &format!("{commit}\0{uncommitted}"));
    let paths = TreePaths::of(trees, &key);
    tokio::fs::create_dir_all(trees)
        .await
        .map_err(|e| WorkspaceError::io("create", trees, e))?;
    // Most often the tree is there: held without waiting on `.making`, so tasks
    // starting together never queue behind each other. Removal takes `.lock`
    // exclusively and unmakes `.tree` first, so a tree found whole under the shared
    // hold stays whole.
    if paths.tree.exists() {
        let in_use = lock_file(paths.lock.clone(), false).await?;
        if holds(&in_use, &paths.lock)
            && let Ok(tree) = tokio::fs::read_to_string(&paths.tree).await
        {
            return Ok(Lower {
                dir: paths.dir,
                index: paths.index,
                objects: paths.git.join("objects"),
                tree: tree.trim().to_owned(),
                in_use,
            });
        }
    }
    let lock_path = trees.join(format!("{key}.making"));
    let making = lock_file(lock_path.clone(), true).await?;
    if !paths.tree.exists() {
        make_lower(&paths, repo, commit, uncommitted, alternates).await?;
        remove_unused(trees, &key).await;
    }
    let in_use = lock_file(paths.lock.clone(), false).await?;
    drop(making);
    let tree = tokio::fs::read_to_string(&paths.tree)
        .await
        .map_err(|e| WorkspaceError::io("read", &paths.tree, e))?
        .trim()
        .to_owned();
    Ok(Lower {
        dir: paths.dir,
        index: paths.index,
        objects: paths.git.join("objects"),
        tree,
        in_use,
    })
}

/// Whether `held` is still the lock file at `path` (a removal unlinks it).
fn holds(held: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (held.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Checks `commit` out into a new lower tree (with a `.git` of its own, as a
/// workspace's), applies `uncommitted`, and records it; the last step, writing the
/// tree file, says the tree is whole.
async fn make_lower(
    paths: &TreePaths,
    repo: &Path,
    commit: &str,
    uncommitted: &str,
    alternates: &Path,
) -> Result<(), WorkspaceError> {
    for partial in [&paths.dir, &paths.git] {
        remove_tree(partial).await;
    }
    let parent = paths.dir.parent().unwrap_or(&paths.dir);
    let args: [std::ffi::OsString; 6] = [
        "clone".into(),
        "--local".into(),
        "--no-checkout".into(),
        "-q".into(),
        repo.into(),
        paths.dir.clone().into(),
    ];
    Git::in_dir(parent)
        .run("clone the shared checkout", &args)
        .await?;
    crate::init_private(&paths.git, &[alternates]).await?;
    let private = Git::with_work_tree(&paths.git, &paths.dir);
    private
        .run(
            "check out the shared checkout",
            &["read-tree", "--reset", "-u", commit],
        )
        .await?;
    Git::in_dir(&paths.dir)
        .run(
            "detach the shared checkout's HEAD",
            &["update-ref", "--no-deref", "HEAD", commit],
        )
        .await?;
    let (from, to) = (paths.git.join("index"), paths.dir.join(".git/index"));
    tokio::fs::copy(&from, &to)
        .await
        .map_err(|e| WorkspaceError::io("copy", &from, e))?;
    if !uncommitted.is_empty() {
        let output = private
            .output(
                &["apply", "--index", "--binary", "--whitespace=nowarn", "-"],
                Some(uncommitted.as_bytes()),
            )
            .await?;
        if !output.status.success() {
            return Err(WorkspaceError::DoesNotApply {
                what: "the base's uncommitted changes",
                reason: crate::git::stderr_of(&output),
            });
        }
    }
    let tree = private
        .run("record the shared checkout", &["write-tree"])
        .await?;
    tokio::fs::copy(&from, &paths.index)
        .await
        .map_err(|e| WorkspaceError::io("copy", &from, e))?;
    tokio::fs::write(&paths.tree, format!("{tree}\n"))
        .await
        .map_err(|e| WorkspaceError::io("write", &paths.tree, e))?;
    tracing::info!(tree = %paths.dir.display(), "shared checkout made for overlay workspaces");
    Ok(())
}

/// Removes the lower trees other than `keep` that no mounted workspace holds (their
/// lock is free): the base has moved on from them.
async fn remove_unused(trees: &Path, keep: &str) {
    let Ok(entries) = std::fs::read_dir(trees) else {
        return;
    };
    let keys: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".tree"))
                .map(str::to_owned)
        })
        .filter(|k| k != keep)
        .collect();
    let try_lock = |path: &Path| {
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .ok()?;
        file.try_lock().ok().map(|()| file)
    };
    for key in keys {
        let paths = TreePaths::of(trees, &key);
        // Not while a task is taking it (it holds `.making` from its look until its
        // hold), nor while one is mounted on it (`.lock`).
        let making = trees.join(format!("{key}.making"));
        let (Some(_making), Some(_in_use)) = (try_lock(&making), try_lock(&paths.lock)) else {
            continue;
        };
        // Unmade first, so that a half-removed tree is never taken for a whole one.
        let _ = tokio::fs::remove_file(&paths.tree).await;
        for path in [&paths.dir, &paths.git] {
            remove_tree(path).await;
        }
        for file in [&paths.index, &paths.lock, &making] {
            let _ = tokio::fs::remove_file(file).await;
        }
        tracing::info!(tree = %paths.dir.display(), "unused shared checkout removed");
    }
}

/// The upper layer and the overlay's work directory of the workspace at `root`.
pub(crate) fn layers_of(root: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let mut layers = root.as_os_str().to_owned();
    layers.push(".upper");
    let layers = PathBuf::from(layers);
    (layers.join("upper"), layers.join("work"), layers)
}

/// Mounts an overlay of `lower` at `root` (made here), with its upper layer beside
/// it. Fails where the process may not mount (no private mount namespace) or the
/// kernel has no unprivileged overlay.
pub(crate) async fn mount(lower: &Path, root: &Path) -> Result<(), WorkspaceError> {
    let (upper, work, _) = layers_of(root);
    for dir in [root, &upper, &work] {
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| WorkspaceError::io("create", dir, e))?;
    }
    let options = format!(
        "lowerdir={},upperdir={},workdir={},userxattr",
        escape(lower),
        escape(&upper),
        escape(&work)
    );
    let target = root.to_owned();
    let options = std::ffi::CString::new(options)
        .map_err(|e| WorkspaceError::io("mount an overlay at", root, std::io::Error::other(e)))?;
    tokio::task::spawn_blocking(move || {
        rustix::mount::mount(
            "taskwire-workspace",
            &target,
            "overlay",
            rustix::mount::MountFlags::NOSUID | rustix::mount::MountFlags::NODEV,
            options.as_c_str(),
        )
    })
    .await
    .map_err(|e| WorkspaceError::io("mount", root, std::io::Error::other(e)))?
    .map_err(|e| WorkspaceError::io("mount an overlay at", root, e.into()))
}

/// A path as an overlay option: `,`, `:` and `\` escaped.
fn escape(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        if matches!(c, ',' | ':' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Unmounts the overlay at `root` and removes it, its layers and nothing else.
/// Blocking.
pub(crate) fn unmount_and_remove(root: &Path) {
    if let Err(e) = rustix::mount::unmount(root, rustix::mount::UnmountFlags::DETACH) {
        tracing::warn!(workspace = %root.display(), error = %e, "failed to unmount a workspace");
        return;
    }
    let (_, work, layers) = layers_of(root);
    // The kernel leaves the work directory's own directory unreadable.
    let inner = work.join("work");
    if inner.exists() {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o700));
    }
    for path in [root, layers.as_path()] {
        match std::fs::remove_dir_all(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(workspace = %path.display(), error = %e, "failed to remove a workspace");
            }
        }
    }
}

async fn remove_tree(path: &Path) {
    let path = path.to_owned();
    let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(path)).await;
}

/// What the task changed, as paths relative to the workspace: every file, link and
/// removal (a whiteout) in the upper layer, and each opaque directory (removed and made
/// again) as a whole; the session's own `.git` left out. Blocking; it reads only the
/// upper layer, never the tree.
pub(crate) fn changed_paths(upper: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut changed = Vec::new();
    let mut dirs = vec![PathBuf::new()];
    while let Some(relative) = dirs.pop() {
        for entry in std::fs::read_dir(upper.join(&relative))? {
            let entry = entry?;
            let path = relative.join(entry.file_name());
            if relative.as_os_str().is_empty() && entry.file_name() == ".git" {
                continue;
            }
            if entry.file_type()?.is_dir() {
                if is_opaque(&upper.join(&path)) {
                    changed.push(path);
                } else {
                    dirs.push(path);
                }
            } else {
                changed.push(path);
            }
        }
    }
    changed.sort();
    Ok(changed)
}

fn is_opaque(dir: &Path) -> bool {
    let mut value = [0u8; 4];
    rustix::fs::getxattr(dir, OPAQUE, &mut value[..]).is_ok_and(|n| value[..n].starts_with(b"y"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_paths_escape_what_the_overlay_options_split_on() {
        assert_eq!(escape(Path::new("/a,b:c\\d")), "/a\\,b\\:c\\\\d");
    }

    #[test]
    fn the_upper_layer_lists_files_links_and_removals_but_not_the_sessions_git() {
        let dir = tempfile::tempdir().expect("tempdir");
        let upper = dir.path();
        std::fs::create_dir_all(upper.join("src/deep")).expect("mkdir");
        std::fs::create_dir_all(upper.join(".git")).expect("mkdir");
        std::fs::write(upper.join(".git/index"), "x").expect("write");
        std::fs::write(upper.join("src/deep/new.rs"), "x").expect("write");
        std::fs::write(upper.join("top.txt"), "x").expect("write");
        std::os::unix::fs::symlink("top.txt", upper.join("link")).expect("link");
        assert_eq!(
            changed_paths(upper).expect("listed"),
            [
                PathBuf::from("link"),
                PathBuf::from("src/deep/new.rs"),
                PathBuf::from("top.txt"),
            ]
        );
    }
}
