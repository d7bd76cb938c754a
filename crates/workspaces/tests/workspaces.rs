//! Workspaces against the real `git` binary and real files.

use std::path::{Path, PathBuf};

use taskwire_test_support::files::{git, snapshot};

use taskwire_workspaces::{Origin, Source, WorkspaceError, Workspaces, WorkspacesConfig};

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A base repository with one commit (`a.txt`, `lib/b.txt`) and an uncommitted
    /// change to `a.txt`.
    fn git_base(&self) -> PathBuf {
        let base = self.path("base");
        std::fs::create_dir_all(base.join("lib")).expect("mkdir");
        git(&base, &["init", "-q", "-b", "main"]);
        std::fs::write(base.join("a.txt"), "one\ntwo\nthree\n").expect("write");
        std::fs::write(base.join("lib/b.txt"), "bee\n").expect("write");
        git(&base, &["add", "."]);
        git(&base, &["commit", "-q", "-m", "start"]);
        std::fs::write(base.join("a.txt"), "one\ntwo\nthree\nuncommitted\n").expect("write");
        base
    }

    async fn open(&self, base: &Path, owner: &str, keep: bool) -> Workspaces {
        Workspaces::open(WorkspacesConfig {
            base: base.to_owned(),
            dir: self.path("workspaces"),
            keep,
            owner: owner.to_owned(),
            overlays: false,
        })
        .await
        .expect("workspaces open")
    }
}

fn read(root: &Path, file: &str) -> String {
    std::fs::read_to_string(root.join(file)).expect("readable")
}

#[tokio::test]
async fn concurrent_workspaces_see_only_their_own_changes_and_the_base_never_changes() {
    let setup = Setup::new();
    let base = setup.git_base();
    let before = snapshot(&base);
    let workspaces = setup.open(&base, "w1", false).await;

    let (one, two) = tokio::join!(
        workspaces.prepare("t1-1", Source::Base, ""),
        workspaces.prepare("t2-1", Source::Base, "")
    );
    let (one, two) = (one.expect("first"), two.expect("second"));
    assert_ne!(one.root(), two.root());
    for ws in [&one, &two] {
        assert_eq!(
            read(ws.root(), "a.txt"),
            "one\ntwo\nthree\nuncommitted\n",
            "HEAD plus the base's uncommitted change"
        );
        assert!(
            matches!(ws.origin(), Origin::Base { commit } if commit.len() == 40),
            "{:?}",
            ws.origin()
        );
    }
    std::fs::write(one.root().join("same.txt"), "from one\n").expect("write");
    std::fs::write(two.root().join("same.txt"), "from two\n").expect("write");
    assert_eq!(read(one.root(), "same.txt"), "from one\n");
    assert_eq!(read(two.root(), "same.txt"), "from two\n");

    let patch = one.patch().await.expect("patch");
    assert!(
        patch.contains("diff --git a/same.txt b/same.txt\nnew file mode 100644"),
        "{patch}"
    );
    assert!(patch.contains("+from one"), "{patch}");
    assert!(
        !patch.contains("uncommitted") && !patch.contains("from two"),
        "only the task's own change: {patch}"
    );
    // The session's own git sees the base's commit and the change.
    assert_eq!(
        git(one.root(), &["rev-parse", "HEAD"]),
        git(&base, &["rev-parse", "HEAD"])
    );
    let status = git(one.root(), &["status", "--porcelain"]);
    assert!(
        status.contains("M a.txt") && status.contains("?? same.txt"),
        "{status}"
    );

    let (root_one, root_two) = (one.root().to_owned(), two.root().to_owned());
    one.remove().await;
    two.remove().await;
    assert!(
        !root_one.exists() && !root_two.exists(),
        "removed after use"
    );
    let after = snapshot(&base);
    let changed: Vec<_> = after
        .iter()
        .filter(|(path, bytes)| before.get(*path) != Some(bytes))
        .map(|(path, _)| path)
        .chain(before.keys().filter(|path| !after.contains_key(*path)))
        .collect();
    assert!(
        changed.is_empty(),
        "the base is byte-for-byte unchanged: {changed:?}"
    );
}

#[tokio::test]
async fn a_plain_base_is_copied_and_the_patch_has_new_changed_and_deleted_files() {
    let setup = Setup::new();
    let base = setup.path("plain");
    std::fs::create_dir_all(base.join("docs")).expect("mkdir");
    std::fs::write(base.join("docs/keep.md"), "keep\n").expect("write");
    std::fs::write(base.join("gone.txt"), "gone\n").expect("write");
    std::fs::write(base.join("edit.txt"), "before\n").expect("write");
    let before = snapshot(&base);
    let workspaces = setup.open(&base, "w1", false).await;
    let ws = workspaces
        .prepare("t1-1", Source::Base, "")
        .await
        .expect("copy");
    assert_eq!(ws.origin(), &Origin::Copy);
    assert!(
        !ws.root().join(".git").exists(),
        "a copy is not a repository"
    );
    assert_eq!(ws.patch().await.expect("patch"), "", "nothing changed yet");

    std::fs::remove_file(ws.root().join("gone.txt")).expect("rm");
    std::fs::write(ws.root().join("edit.txt"), "after\n").expect("write");
    std::fs::write(ws.root().join("docs/new.md"), "new\n").expect("write");
    std::fs::write(ws.root().join("blob.bin"), [0u8, 159, 146, 150, 0, 1]).expect("write");
    std::fs::write(ws.root().join("latin1.txt"), b"caf\xe9\n").expect("write");
    let patch = ws.patch().await.expect("patch");
    for expected in [
        "diff --git a/gone.txt b/gone.txt\ndeleted file mode",
        "-before\n+after",
        "diff --git a/docs/new.md b/docs/new.md\nnew file mode",
        "GIT binary patch",
    ] {
        assert!(patch.contains(expected), "{expected:?} in {patch}");
    }

    // The patch rebuilds the same files on a fresh copy.
    let again = workspaces
        .prepare("t1-2", Source::Base, "")
        .await
        .expect("copy");
    again
        .restore(&patch, "the earlier attempt's changes")
        .await
        .expect("applies");
    assert_eq!(read(again.root(), "edit.txt"), "after\n");
    assert!(!again.root().join("gone.txt").exists());
    assert_eq!(
        std::fs::read(again.root().join("blob.bin")).expect("binary"),
        [0u8, 159, 146, 150, 0, 1]
    );
    assert_eq!(
        std::fs::read(again.root().join("latin1.txt")).expect("latin1"),
        b"caf\xe9\n"
    );
    assert_eq!(
        again.patch().await.expect("patch"),
        patch,
        "restored changes are the task's own"
    );
    drop(ws);
    drop(again);
    assert_eq!(snapshot(&base), before);
}

#[tokio::test]
async fn a_child_starts_from_its_parents_changes_and_its_patch_returns_to_the_parent() {
    let setup = Setup::new();
    let base = setup.git_base();
    let parent_side = setup.open(&base, "w1", false).await;
    let child_side = Workspaces::open(WorkspacesConfig {
        base: base.clone(),
        dir: setup.path("other-workspaces"),
        keep: false,
        owner: "w2".into(),
        overlays: false,
    })
    .await
    .expect("a second worker");

    let parent = parent_side
        .prepare("p-1", Source::Base, "")
        .await
        .expect("parent");
    std::fs::write(parent.root().join("notes.txt"), "parent notes\n").expect("write");
    let handed_down = parent.changes().await.expect("changes");
    assert!(handed_down.contains("+parent notes"), "{handed_down}");

    let child = child_side
        .prepare("c-1", Source::Base, &handed_down)
        .await
        .expect("child");
    assert_eq!(read(child.root(), "notes.txt"), "parent notes\n");
    std::fs::write(child.root().join("lib/b.txt"), "bee\nchild line\n").expect("write");
    let child_patch = child.patch().await.expect("patch");
    assert!(child_patch.contains("+child line"), "{child_patch}");
    assert!(
        !child_patch.contains("notes.txt"),
        "the child's patch holds only its own change: {child_patch}"
    );
    // A grandchild starts from everything: the parent's change and the child's.
    let everything = child.changes().await.expect("changes");
    assert!(everything.contains("parent notes") && everything.contains("child line"));

    // Meanwhile the parent changed another part of the tree; both survive.
    std::fs::write(
        parent.root().join("a.txt"),
        "ONE\ntwo\nthree\nuncommitted\n",
    )
    .expect("write");
    parent.apply(&child_patch).await.expect("no conflict");
    assert_eq!(read(parent.root(), "lib/b.txt"), "bee\nchild line\n");
    let whole = parent.patch().await.expect("patch");
    for expected in ["+parent notes", "+child line", "+ONE"] {
        assert!(whole.contains(expected), "{expected} in {whole}");
    }
}

#[tokio::test]
async fn a_conflicting_child_patch_changes_nothing_and_shows_the_conflict() {
    let setup = Setup::new();
    let base = setup.git_base();
    let workspaces = setup.open(&base, "w1", false).await;
    let parent = workspaces
        .prepare("p-1", Source::Base, "")
        .await
        .expect("parent");
    let child = workspaces
        .prepare(
            "c-1",
            Source::Base,
            &parent.changes().await.expect("changes"),
        )
        .await
        .expect("child");
    std::fs::write(
        child.root().join("a.txt"),
        "one\nchild two\nthree\nuncommitted\n",
    )
    .expect("write");
    std::fs::write(child.root().join("other.txt"), "fine\n").expect("write");
    let child_patch = child.patch().await.expect("patch");
    std::fs::write(
        parent.root().join("a.txt"),
        "one\nparent two\nthree\nuncommitted\n",
    )
    .expect("write");
    let before = snapshot(parent.root());

    let err = parent.apply(&child_patch).await.expect_err("conflict");
    let WorkspaceError::Conflict { report } = &err else {
        panic!("a conflict, got {err:?}");
    };
    for expected in [
        "conflict in a.txt",
        "<<<<<<< your workspace\nparent two\n=======\nchild two\n>>>>>>> subagent",
        "@@ -1,4 +1,4 @@",
        "-two\n+child two",
    ] {
        assert!(report.contains(expected), "{expected:?} in {report}");
    }
    assert_eq!(snapshot(parent.root()), before, "nothing was applied");
    assert!(!parent.root().join("other.txt").exists());
}

#[tokio::test]
async fn a_named_repository_is_checked_out_at_its_ref_and_fetched_again_later() {
    let setup = Setup::new();
    let origin = setup.git_base();
    git(&origin, &["checkout", "-q", "--", "a.txt"]);
    git(&origin, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(origin.join("feature.txt"), "feature v1\n").expect("write");
    git(&origin, &["add", "feature.txt"]);
    git(&origin, &["commit", "-q", "-m", "feature"]);
    git(&origin, &["tag", "v1"]);
    git(&origin, &["checkout", "-q", "main"]);
    let bare = setup.path("remote.git");
    let bare_str = bare.to_string_lossy().into_owned();
    git(
        setup.dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            &origin.to_string_lossy(),
            &bare_str,
        ],
    );

    let plain_base = setup.path("empty-base");
    std::fs::create_dir_all(&plain_base).expect("mkdir");
    let workspaces = setup.open(&plain_base, "w1", false).await;
    let url = format!("file://{bare_str}");
    let ws = workspaces
        .prepare(
            "t-1",
            Source::Git {
                url: &url,
                reference: Some("feature"),
            },
            "",
        )
        .await
        .expect("checkout");
    assert_eq!(read(ws.root(), "feature.txt"), "feature v1\n");
    assert_eq!(
        read(ws.root(), "a.txt"),
        "one\ntwo\nthree\n",
        "committed files only"
    );
    let Origin::Git { commit, .. } = ws.origin().clone() else {
        panic!("a git origin: {:?}", ws.origin());
    };

    // The branch moves on: the next task fetches it; the tag and the commit id stay.
    git(&origin, &["checkout", "-q", "feature"]);
    std::fs::write(origin.join("feature.txt"), "feature v2\n").expect("write");
    git(&origin, &["commit", "-q", "-am", "v2"]);
    git(&origin, &["push", "-q", &bare_str, "feature"]);
    let newer = workspaces
        .prepare(
            "t-2",
            Source::Git {
                url: &url,
                reference: Some("feature"),
            },
            "",
        )
        .await
        .expect("checkout");
    assert_eq!(read(newer.root(), "feature.txt"), "feature v2\n");
    for (name, reference) in [("t-3", "v1"), ("t-4", commit.as_str())] {
        let pinned = workspaces
            .prepare(
                name,
                Source::Git {
                    url: &url,
                    reference: Some(reference),
                },
                "",
            )
            .await
            .expect("checkout");
        assert_eq!(
            read(pinned.root(), "feature.txt"),
            "feature v1\n",
            "{reference}"
        );
    }
    let default = workspaces
        .prepare(
            "t-5",
            Source::Git {
                url: &bare_str,
                reference: None,
            },
            "",
        )
        .await
        .expect("a local path and the default branch");
    assert_eq!(read(default.root(), "a.txt"), "one\ntwo\nthree\n");

    let err = workspaces
        .prepare(
            "t-6",
            Source::Git {
                url: &url,
                reference: Some("nope"),
            },
            "",
        )
        .await
        .expect_err("no such ref");
    assert!(matches!(err, WorkspaceError::RefNotFound { .. }), "{err}");
    assert!(!err.is_retryable());
    let err = workspaces
        .prepare(
            "t-7",
            Source::Git {
                url: "file:///nonexistent/repo.git",
                reference: None,
            },
            "",
        )
        .await
        .expect_err("no such repository");
    assert!(matches!(err, WorkspaceError::Fetch { .. }), "{err}");
}

#[tokio::test]
async fn workspaces_are_kept_when_asked_and_a_gone_workers_leftovers_are_removed() {
    let setup = Setup::new();
    let base = setup.git_base();
    let kept_root = {
        let workspaces = setup.open(&base, "keeper", true).await;
        let ws = workspaces
            .prepare("t-1", Source::Base, "")
            .await
            .expect("ws");
        let root = ws.root().to_owned();
        ws.remove().await;
        assert!(root.join("a.txt").exists(), "kept");
        root
    };
    // Another worker with the same id and directory is refused while one runs.
    let running = setup.open(&base, "w1", false).await;
    let err = Workspaces::open(WorkspacesConfig {
        base: base.clone(),
        dir: setup.path("workspaces"),
        keep: false,
        owner: "w1".into(),
        overlays: false,
    })
    .await
    .expect_err("in use");
    assert!(matches!(err, WorkspaceError::InUse { .. }), "{err}");
    // The keeper is gone: the next worker to start clears what it left.
    let _another = setup.open(&base, "w2", false).await;
    assert!(
        !kept_root.exists(),
        "a stopped worker's workspaces are removed"
    );
    drop(running);
}

#[tokio::test]
async fn changes_that_do_not_apply_are_a_clear_error() {
    let setup = Setup::new();
    let base = setup.git_base();
    let workspaces = setup.open(&base, "w1", false).await;
    let foreign = "diff --git a/missing.txt b/missing.txt\nindex 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222 100644\n--- a/missing.txt\n+++ b/missing.txt\n@@ -1 +1 @@\n-x\n+y\n";
    let err = workspaces
        .prepare("t-1", Source::Base, foreign)
        .await
        .expect_err("does not apply");
    let message = err.to_string();
    assert!(
        message.starts_with(
            "the changes the task starts from (its workspace_patch) do not apply to this workspace"
        ) && message.contains("missing.txt"),
        "{message}"
    );
}

#[tokio::test]
async fn a_workspace_path_is_canonical_and_nothing_is_made_until_prepared() {
    let setup = Setup::new();
    let base = setup.git_base();
    let workspaces = setup.open(&base, "w1", false).await;
    let root = workspaces.path_of("t-1");
    assert!(!root.exists(), "not made before it is prepared");
    assert_eq!(
        std::fs::canonicalize(root.parent().expect("a parent")).expect("the tasks directory"),
        root.parent().expect("a parent"),
        "canonical"
    );

    let root = workspaces.path_of("t-2");
    let ws = workspaces
        .prepare("t-2", Source::Base, "")
        .await
        .expect("prepared at its path");
    assert_eq!(ws.root(), root);
    assert_eq!(read(&root, "a.txt"), "one\ntwo\nthree\nuncommitted\n");

    // A failed prepare leaves nothing behind, and the next try works.
    let root = workspaces.path_of("t-3");
    let err = workspaces
        .prepare("t-3", Source::Base, "not a patch")
        .await
        .expect_err("a bad patch");
    assert!(matches!(err, WorkspaceError::DoesNotApply { .. }), "{err}");
    assert!(!root.exists(), "removed after the failure");
    workspaces
        .prepare("t-3", Source::Base, "")
        .await
        .expect("the next try");
}

/// With a journal, recording the files looks only at what the tools said they wrote
/// (an unreported change stays unseen until a command runs), and a command makes the
/// next record walk every file.
#[tokio::test]
async fn a_journaled_workspace_records_the_written_paths_and_walks_only_after_a_command() {
    let setup = Setup::new();
    let base = setup.git_base();
    std::fs::write(base.join(".gitignore"), "*.log\n").expect("write");
    git(&base, &["add", ".gitignore"]);
    git(&base, &["commit", "-q", "-m", "ignore logs"]);
    let workspaces = setup.open(&base, "w1", false).await;
    let writes = std::sync::Arc::new(taskwire_workspaces::Writes::default());
    let ws = workspaces
        .prepare_with("t1-1", Source::Base, "", writes.clone())
        .await
        .expect("checkout");
    let root = ws.root().to_owned();
    assert_eq!(ws.patch().await.expect("patch"), "", "nothing written yet");

    // A tool's write, reported; a name git would take for a pattern is a file here.
    std::fs::write(root.join("lib/[x]*.txt"), "literal\n").expect("write");
    writes.path(&root.join("lib/[x]*.txt"));
    std::fs::write(root.join("lib/b.txt"), "bee\nchanged\n").expect("write");
    writes.path(&root.join("lib/b.txt"));
    // A change no tool reported (it could only come from a command).
    std::fs::write(root.join("a.txt"), "unreported\n").expect("write");
    let patch = ws.patch().await.expect("patch");
    assert!(
        patch.contains("diff --git a/lib/[x]*.txt b/lib/[x]*.txt\nnew file mode"),
        "{patch}"
    );
    assert!(patch.contains("+changed"), "{patch}");
    assert!(
        !patch.contains("a.txt"),
        "only the reported paths were looked at: {patch}"
    );

    // An ignored file reported by a tool is left out, as the walk leaves it out.
    std::fs::write(root.join("run.log"), "log\n").expect("write");
    writes.path(&root.join("run.log"));
    let patch = ws.patch().await.expect("patch");
    assert!(!patch.contains("run.log"), "{patch}");

    // After a command, every file is looked at again.
    writes.anywhere();
    let patch = ws.patch().await.expect("patch");
    assert!(patch.contains("+unreported"), "the walk found it: {patch}");
    assert!(
        patch.contains("lib/[x]*.txt") && patch.contains("+changed"),
        "{patch}"
    );
    assert!(!patch.contains("run.log"), "{patch}");
    // The changes a child starts from say the same.
    let changes = ws.changes().await.expect("changes");
    assert!(
        changes.contains("+unreported") && changes.contains("+changed"),
        "{changes}"
    );
}
