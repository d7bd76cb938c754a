//! The git repositories the real-task phase runs in, made once in the benchmark's cache
//! (`~/.cache/taskwire/bench/repos/` by default) and reused by later runs:
//!
//! - `this`: a clone of the checkout the benchmark runs from, at its `HEAD`, so tracked
//!   files only (no build output, no untracked files); made again when `HEAD` moves.
//! - `tabler`: the npm package `@tabler/icons` 3.31.0 (10,346 files, 45 MB), its
//!   tarball downloaded with the benchmark's HTTP client, checked against the
//!   registry's SHA-512, unpacked by `tar` and committed to a repository of its own
//!   with a fixed author and date (so the commit is the same on every machine).
//!
//! A repository is made in a `.tmp` directory beside its place and renamed into it, so
//! a run stopped half-way leaves nothing that a later one would reuse.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail, ensure};
use sha2::{Digest, Sha512};

/// A repository the phase can run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Repo {
    /// This repository, at the `HEAD` of the checkout the benchmark runs in.
    This,
    /// `@tabler/icons` 3.31.0 from the npm registry: 10,346 files.
    Tabler,
}

/// What the child session looks up in a repository: a pattern found in a few files
/// (so the search walks the whole tree) and a file to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lookup {
    pub grep: &'static str,
    pub read: &'static str,
}

/// A repository made and ready: where it is, its commit and how many files it tracks.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub repo: Repo,
    pub path: PathBuf,
    pub commit: String,
    pub files: usize,
}

const TABLER_URL: &str = "https://registry.npmjs.org/@tabler/icons/-/icons-3.31.0.tgz";
/// The registry's `dist.integrity` of that tarball (`sha512-dblAdeKY3+GA…`), in hex.
const TABLER_SHA512: &str = "75b94075e298dfe180d54f90f5ece2674a2856564c1ec13c76a3f4464c2f46d12c0142e828e61a09439c278a16d438d67a077193ef9402dd9295056799e1effa";
const TABLER_FILES: usize = 10_346;

impl Repo {
    /// How the table names it.
    pub fn label(self) -> &'static str {
        match self {
            Repo::This => "this repository",
            Repo::Tabler => "`@tabler/icons` 3.31.0",
        }
    }

    /// Its directory's name in the cache, and the name of its processes.
    pub fn name(self) -> &'static str {
        match self {
            Repo::This => "this",
            Repo::Tabler => "tabler",
        }
    }

    /// What the child session greps for and reads.
    pub fn lookup(self) -> Lookup {
        match self {
            Repo::This => Lookup {
                grep: "fn main",
                read: "Cargo.toml",
            },
            Repo::Tabler => Lookup {
                grep: "icon-tabler-zoom-money",
                read: "icons/outline/zoom-money.svg",
            },
        }
    }
}

/// `$XDG_CACHE_HOME/taskwire/bench/repos`, else `~/.cache/taskwire/bench/repos`.
pub fn default_cache() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("taskwire").join("bench").join("repos")
}

/// `repo` in `cache`, made unless an intact copy is there.
pub async fn prepare(repo: Repo, cache: &Path) -> anyhow::Result<Prepared> {
    std::fs::create_dir_all(cache)
        .with_context(|| format!("failed to create the repository cache {}", cache.display()))?;
    let path = cache.join(match repo {
        Repo::This => "this",
        Repo::Tabler => "tabler-icons-3.31.0",
    });
    match repo {
        Repo::This => clone_this(&path)?,
        Repo::Tabler => {
            if !intact(&path) {
                make_tabler(cache, &path).await?;
            }
        }
    }
    let commit = git(&path, &["rev-parse", "HEAD"])?;
    let files = git(&path, &["ls-files"])?.lines().count();
    if repo == Repo::Tabler {
        ensure!(
            files == TABLER_FILES,
            "{} tracks {files} files, not the package's {TABLER_FILES}",
            path.display()
        );
    }
    Ok(Prepared {
        repo,
        path,
        commit,
        files,
    })
}

/// Whether `path` is a repository with a commit and no changes.
fn intact(path: &Path) -> bool {
    path.join(".git").is_dir()
        && git(path, &["rev-parse", "HEAD"]).is_ok()
        && git(path, &["status", "--porcelain"]).is_ok_and(|s| s.is_empty())
}

/// A clone of the checkout the benchmark runs in, at its `HEAD`, into `dest`.
fn clone_this(dest: &Path) -> anyhow::Result<()> {
    let here = std::env::current_dir()?;
    let source = git(&here, &["rev-parse", "--show-toplevel"])
        .context("the benchmark must run inside the taskwire checkout to clone it")?;
    let head = git(Path::new(&source), &["rev-parse", "HEAD"])?;
    if intact(dest) && git(dest, &["rev-parse", "HEAD"])? == head {
        return Ok(());
    }
    let tmp = fresh_tmp(dest)?;
    let tmp_text = tmp.to_string_lossy();
    git(
        Path::new(&source),
        &["clone", "--quiet", "--no-checkout", &source, &tmp_text],
    )?;
    git(&tmp, &["checkout", "--quiet", "--detach", &head])?;
    replace(&tmp, dest)
}

/// The `@tabler/icons` tarball unpacked and committed into `dest`.
async fn make_tabler(cache: &Path, dest: &Path) -> anyhow::Result<()> {
    let tarball = cache.join("icons-3.31.0.tgz");
    let cached = std::fs::read(&tarball)
        .ok()
        .filter(|bytes| sha512_hex(bytes) == TABLER_SHA512);
    if cached.is_none() {
        eprintln!("downloading {TABLER_URL}");
        let bytes = reqwest::get(TABLER_URL)
            .await
            .and_then(reqwest::Response::error_for_status)
            .with_context(|| format!("failed to download {TABLER_URL}"))?
            .bytes()
            .await
            .with_context(|| format!("failed to download {TABLER_URL}"))?;
        let digest = sha512_hex(&bytes);
        ensure!(
            digest == TABLER_SHA512,
            "{TABLER_URL} has SHA-512 {digest}, not the registry's {TABLER_SHA512}"
        );
        std::fs::write(&tarball, &bytes)
            .with_context(|| format!("failed to write {}", tarball.display()))?;
    }
    let tmp = fresh_tmp(dest)?;
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&tmp)
        .arg("--strip-components=1")
        .status()
        .context("failed to run tar")?;
    ensure!(
        status.success(),
        "tar failed to unpack {}",
        tarball.display()
    );
    git(&tmp, &["init", "--quiet"])?;
    git(&tmp, &["add", "--all", "--force", "."])?;
    git(
        &tmp,
        &[
            "-c",
            "user.name=taskwire-bench",
            "-c",
            "user.email=bench@taskwire.invalid",
            "-c",
            "commit.gpgsign=false",
            "commit",
            "--quiet",
            "--no-verify",
            "--date=2025-01-01T00:00:00Z",
            "-m",
            "@tabler/icons 3.31.0 from the npm registry",
        ],
    )?;
    replace(&tmp, dest)
}

/// An empty `<dest>.tmp`.
fn fresh_tmp(dest: &Path) -> anyhow::Result<PathBuf> {
    let mut name = dest.file_name().unwrap_or_default().to_owned();
    name.push(".tmp");
    let tmp = dest.with_file_name(name);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)
            .with_context(|| format!("failed to remove {}", tmp.display()))?;
    }
    std::fs::create_dir_all(&tmp)?;
    Ok(tmp)
}

/// `tmp` moved to `dest`, replacing what was there.
fn replace(tmp: &Path, dest: &Path) -> anyhow::Result<()> {
    if dest.exists() {
        std::fs::remove_dir_all(dest)
            .with_context(|| format!("failed to remove {}", dest.display()))?;
    }
    std::fs::rename(tmp, dest)
        .with_context(|| format!("failed to move {} to {}", tmp.display(), dest.display()))
}

fn sha512_hex(bytes: &[u8]) -> String {
    Sha512::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `git <args>` in `dir`, its trimmed stdout; fails with its stderr. The committer's
/// date is fixed too, so a made commit does not depend on the day.
fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_COMMITTER_DATE", "2025-01-01T00:00:00Z")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .with_context(|| format!("failed to run git {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "git {} in {} failed: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_written_in_lowercase_hex() {
        assert_eq!(
            sha512_hex(b"abc"),
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a\
             2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
        );
    }

    #[test]
    fn the_cache_is_under_xdg_cache_home_or_home() {
        let cache = default_cache();
        assert!(
            cache.ends_with("taskwire/bench/repos"),
            "{}",
            cache.display()
        );
    }

    #[test]
    fn a_made_repository_is_intact_until_changed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path().join("r");
        assert!(!intact(&repo));
        let tmp = fresh_tmp(&repo).expect("tmp");
        std::fs::write(tmp.join("a.txt"), "a\n").expect("write");
        git(&tmp, &["init", "--quiet"]).expect("init");
        git(&tmp, &["add", "--all"]).expect("add");
        git(
            &tmp,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t.invalid",
                "commit",
                "--quiet",
                "-m",
                "a",
            ],
        )
        .expect("commit");
        replace(&tmp, &repo).expect("replace");
        assert!(!tmp.exists());
        assert!(intact(&repo));
        std::fs::write(repo.join("a.txt"), "changed\n").expect("write");
        assert!(!intact(&repo), "a changed file is not reused");
    }
}
