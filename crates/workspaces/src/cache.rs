//! The worker's cache of bare repositories: one per git source (the base, each
//! repository URL tasks name), cloned once and fetched on later use, from which every
//! task's checkout is cloned with hard links.
//!
//! Each repository has a lock file beside it: taken exclusively to clone or fetch, and
//! shared to clone a task's checkout from it, so a checkout never copies a pack that a
//! fetch is still writing. The locks are `flock`s: they hold between the workers of one
//! machine that share a `--workspaces-dir`, and between the tasks of one worker.

use std::fs::File;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::WorkspaceError;
use crate::git::{Git, stderr_of};

/// Where the base's `HEAD` is fetched to in its cache repository.
const BASE_REF: &str = "refs/taskwire/base";

/// The bare repositories under one directory.
#[derive(Debug, Clone)]
pub(crate) struct Cache {
    dir: PathBuf,
}

/// A held lock; released when dropped.
#[derive(Debug)]
pub(crate) struct Lock {
    _file: File,
}

impl Cache {
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// The cache repository of the base `base` (a repository's top level), holding
    /// `commit`: cloned the first time, fetched when the base has moved since.
    ///
    /// Tasks on a base that has not moved only look: the repository appears whole (a
    /// clone is renamed into place) and a fetch adds objects before it moves a ref, so
    /// reading it needs no lock, and concurrent tasks never wait on each other here.
    /// Only a clone or a fetch takes the lock, and looks again once it holds it.
    pub(crate) async fn base(&self, base: &Path, commit: &str) -> Result<PathBuf, WorkspaceError> {
        let key = key("base", &base.to_string_lossy());
        let repo = self.dir.join(format!("{key}.git"));
        let git = Git::repo(&repo);
        if repo.exists() && has_commit(&git, commit).await? {
            return Ok(repo);
        }
        let _lock = self.lock(&key, true).await?;
        if !repo.exists() {
            clone_bare(base, &repo, &["--no-hardlinks"], true).await?;
            // A local clone copies loose objects one by one; every checkout would then
            // hard-link each of them. One pack makes a checkout's clone a few links.
            git.run("pack the cache repository", &["repack", "-a", "-d", "-q"])
                .await?;
        }
        if !has_commit(&git, commit).await? {
            let args: [std::ffi::OsString; 6] = [
                "fetch".into(),
                "-q".into(),
                "--no-tags".into(),
                "--".into(),
                base.into(),
                format!("+HEAD:{BASE_REF}").into(),
            ];
            git.clone()
                .config("safe.directory=*")
                .run("fetch the base into the cache", &args)
                .await?;
            if !has_commit(&git, commit).await? {
                return Err(WorkspaceError::Fetch {
                    url: base.display().to_string(),
                    reason: format!("commit {commit} left the base's HEAD while it was fetched"),
                });
            }
        }
        Ok(repo)
    }

    /// The cache repository of `url` and the commit `reference` names in it (a branch,
    /// a tag or a commit id; the repository's default branch when `None`). Fetched on
    /// every use, except when the reference is a commit id the cache already has.
    pub(crate) async fn remote(
        &self,
        url: &str,
        reference: Option<&str>,
    ) -> Result<(PathBuf, String), WorkspaceError> {
        let key = key("git", url);
        let repo = self.dir.join(format!("{key}.git"));
        let _lock = self.lock(&key, true).await?;
        let git = Git::repo(&repo);
        let shown = redact(url);
        let fetch_failed = |e: WorkspaceError| match e {
            WorkspaceError::Git { stderr, .. } => WorkspaceError::Fetch {
                url: shown.clone(),
                reason: redact(&stderr),
            },
            other => other,
        };
        if !repo.exists() {
            clone_bare(Path::new(url), &repo, &[], false)
                .await
                .map_err(fetch_failed)?;
            // A bare clone fetches nothing later without a refspec.
            git.run(
                "configure the cache repository",
                &[
                    "config",
                    "remote.origin.fetch",
                    "+refs/heads/*:refs/heads/*",
                ],
            )
            .await?;
        } else if !reference.is_some_and(is_commit_id) || resolve(&git, reference).await?.is_none()
        {
            git.run("fetch", &["fetch", "-q", "--prune", "--tags", "origin"])
                .await
                .map_err(fetch_failed)?;
        }
        if let Some(commit) = resolve(&git, reference).await? {
            return Ok((repo, commit));
        }
        // A commit no branch or tag reaches: some servers hand it out when asked by id.
        if let Some(id) = reference.filter(|r| is_commit_id(r)) {
            let _ = git
                .run("fetch a commit", &["fetch", "-q", "origin", id])
                .await;
            if let Some(commit) = resolve(&git, reference).await? {
                return Ok((repo, commit));
            }
        }
        Err(WorkspaceError::RefNotFound {
            url: shown,
            reference: reference.unwrap_or("HEAD").to_owned(),
        })
    }

    /// Takes the lock of repository `key`: exclusive to change it, shared to read it.
    pub(crate) async fn lock(&self, key: &str, exclusive: bool) -> Result<Lock, WorkspaceError> {
        let path = self.dir.join(format!("{key}.lock"));
        Ok(Lock {
            _file: lock_file(path, exclusive).await?,
        })
    }

    /// The lock key of a cache repository path made by this cache.
    pub(crate) fn key_of(repo: &Path) -> String {
        repo.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// Clones `source` bare to `repo`, through a temporary name so that an interrupted
/// clone never looks like a cache repository.
async fn clone_bare(
    source: &Path,
    repo: &Path,
    options: &[&str],
    trusted: bool,
) -> Result<(), WorkspaceError> {
    let partial = repo.with_extension("partial");
    let _ = tokio::fs::remove_dir_all(&partial).await;
    let mut args: Vec<std::ffi::OsString> = vec!["clone".into(), "--bare".into(), "-q".into()];
    args.extend(options.iter().map(Into::into));
    args.push("--".into());
    args.push(source.as_os_str().to_owned());
    args.push(partial.as_os_str().to_owned());
    let parent = repo.parent().unwrap_or(repo);
    let mut git = Git::in_dir(parent);
    if trusted {
        git = git.config("safe.directory=*");
    }
    let output = git.output(&args, None).await?;
    if !output.status.success() {
        let _ = tokio::fs::remove_dir_all(&partial).await;
        return Err(WorkspaceError::Git {
            action: format!("clone {}", redact(&source.to_string_lossy())),
            stderr: stderr_of(&output),
        });
    }
    tokio::fs::rename(&partial, repo)
        .await
        .map_err(|e| WorkspaceError::io("move the new clone to", repo, e))
}

/// Whether the repository has `commit` as a commit.
async fn has_commit(git: &Git, commit: &str) -> Result<bool, WorkspaceError> {
    let object = format!("{commit}^{{commit}}");
    Ok(git
        .output(&["cat-file", "-e", "--end-of-options", &object], None)
        .await?
        .status
        .success())
}

/// The commit `reference` names: a branch, then a tag, then any revision (a commit
/// id); `HEAD` when `None`.
async fn resolve(git: &Git, reference: Option<&str>) -> Result<Option<String>, WorkspaceError> {
    let candidates = match reference {
        None => vec!["HEAD".to_owned()],
        Some(r) => vec![
            format!("refs/heads/{r}"),
            format!("refs/tags/{r}"),
            r.to_owned(),
        ],
    };
    for candidate in candidates {
        let object = format!("{candidate}^{{commit}}");
        let output = git
            .output(
                &["rev-parse", "-q", "--verify", "--end-of-options", &object],
                None,
            )
            .await?;
        if output.status.success() {
            return Ok(Some(
                String::from_utf8_lossy(&output.stdout).trim().to_owned(),
            ));
        }
    }
    Ok(None)
}

/// A full commit id (SHA-1 or SHA-256).
pub(crate) fn is_commit_id(reference: &str) -> bool {
    matches!(reference.len(), 40 | 64) && reference.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A file name for a source: its kind and a digest of its location.
/// Opens (creating it) the lock file at `path` and waits for its lock: exclusive, or
/// shared with other readers. Released when the file is closed.
pub(crate) async fn lock_file(path: PathBuf, exclusive: bool) -> Result<File, WorkspaceError> {
    tokio::task::spawn_blocking(move || {
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| WorkspaceError::io("open lock", &path, e))?;
        let locked = if exclusive {
            file.lock()
        } else {
            file.lock_shared()
        };
        locked.map_err(|e| WorkspaceError::io("lock", &path, e))?;
        Ok(file)
    })
    .await
    .map_err(|e| WorkspaceError::io("lock", Path::new("cache"), std::io::Error::other(e)))?
}

pub(crate) fn key(kind: &str, location: &str) -> String {
    let digest = Sha256::digest(location.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{kind}-{hex}")
}

/// `text` with the password of any `scheme://user:password@host` in it replaced, so
/// that URLs with credentials can be shown in errors and logs. A URL runs from its
/// scheme to the next whitespace or quote; one with a password is shown as the `url`
/// crate writes it, other text as it is.
pub(crate) fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(separator) = rest.find("://") {
        let scheme_len = rest[..separator]
            .bytes()
            .rev()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
            .count();
        let start = separator - scheme_len;
        let end = rest[separator..]
            .find(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | '<' | '>'))
            .map_or(rest.len(), |len| separator + len);
        out.push_str(&rest[..start]);
        out.push_str(&redact_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `text` with its password replaced; unchanged when it has none or is no URL.
fn redact_url(text: &str) -> std::borrow::Cow<'_, str> {
    match url::Url::parse(text) {
        Ok(url) if url.password().is_some() => format!(
            "{}<redacted>{}",
            &url[..url::Position::BeforePassword],
            &url[url::Position::AfterPassword..]
        )
        .into(),
        Ok(_) => text.into(),
        // Not readable as a URL, yet it may hold a password: fail closed.
        Err(_) if text.contains('@') => format!(
            "{}://<redacted>",
            text.split("://").next().unwrap_or_default()
        )
        .into(),
        Err(_) => text.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_urls_are_redacted() {
        assert_eq!(
            redact("fatal: could not read https://me:s3cret@example.com/r.git here"),
            "fatal: could not read https://me:<redacted>@example.com/r.git here"
        );
        assert_eq!(
            redact("https://example.com/r.git"),
            "https://example.com/r.git"
        );
        assert_eq!(redact("/srv/repo.git"), "/srv/repo.git");
        assert_eq!(
            redact("ssh://git@example.com/r.git"),
            "ssh://git@example.com/r.git"
        );
    }

    #[test]
    fn an_unreadable_url_with_credentials_is_hidden_whole() {
        assert_eq!(
            redact("fetch https://me:secret@h:99999/r.git failed"),
            "fetch https://<redacted> failed"
        );
    }

    #[test]
    fn every_url_in_a_text_is_redacted() {
        assert_eq!(
            redact("'https://a:x@h/r.git' and\nssh://b:y@h:22/r, then git+ssh://c:z@h"),
            "'https://a:<redacted>@h/r.git' and\nssh://b:<redacted>@h:22/r, then git+ssh://c:<redacted>@h"
        );
        assert_eq!(
            redact("https://me:p@ss:w@example.com/r.git"),
            "https://me:<redacted>@example.com/r.git"
        );
        assert_eq!(redact("a :// b"), "a :// b");
    }

    #[test]
    fn commit_ids_are_full_hex_ids() {
        assert!(is_commit_id(&"a".repeat(40)));
        assert!(is_commit_id(&"0123456789abcdef".repeat(4)));
        assert!(!is_commit_id("main"));
        assert!(!is_commit_id("abc123"));
        assert!(!is_commit_id(&"g".repeat(40)));
    }

    #[test]
    fn keys_differ_by_source_and_are_file_names() {
        let a = key("git", "https://example.com/a.git");
        let b = key("git", "https://example.com/b.git");
        assert_ne!(a, b);
        assert!(a.starts_with("git-") && a.len() == 4 + 16, "{a}");
    }
}
