//! Context refs that workers act on.
//!
//! A `ContextRef { type: "git", uri, id }` names the git repository a task works in:
//! `uri` is the repository (`https://`, `http://`, `ssh://`, `git://` or `file://` URL,
//! `user@host:path`, or an absolute path on the worker), `id` the branch, tag or full
//! commit id to check out (empty: the repository's default branch). A task names at
//! most one; without one it works in a copy of its worker's base.

use crate::{ContextRef, ProtocolError, error::GitRefError};

/// The `type` of a context ref that names the repository a task works in.
pub const GIT_CONTEXT: &str = "git";

/// Longest repository URL accepted.
const MAX_URL: usize = 2048;
/// Longest branch, tag or commit id accepted.
const MAX_REFERENCE: usize = 255;

/// The repository and revision a task works in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitSource {
    pub url: String,
    /// A branch, a tag or a full commit id; `None` for the default branch.
    pub reference: Option<String>,
}

impl GitSource {
    /// The repository named by `refs`, if any: at most one `git` ref, with a URL and a
    /// reference that git can only read as such (nothing that starts like an option,
    /// no `ext::`-style transport, no relative path).
    pub fn from_refs(refs: &[ContextRef]) -> Result<Option<Self>, ProtocolError> {
        let mut found: Option<Self> = None;
        for (i, r) in refs.iter().enumerate() {
            if r.kind != GIT_CONTEXT {
                continue;
            }
            let invalid = |reason: String| {
                ProtocolError::invalid("context_refs", format!("entry {i} (type git): {reason}"))
            };
            if found.is_some() {
                return Err(invalid(
                    "a task works in one repository; another git ref came first".into(),
                ));
            }
            check_url(&r.uri).map_err(|reason| invalid(format!("uri `{}`: {reason}", r.uri)))?;
            check_reference(&r.id).map_err(|reason| invalid(format!("id `{}`: {reason}", r.id)))?;
            found = Some(Self {
                url: r.uri.clone(),
                reference: (!r.id.is_empty()).then(|| r.id.clone()),
            });
        }
        Ok(found)
    }

    /// The context ref that names this repository at `reference`.
    pub fn to_ref(&self) -> ContextRef {
        ContextRef {
            kind: GIT_CONTEXT.to_owned(),
            id: self.reference.clone().unwrap_or_default(),
            uri: self.url.clone(),
        }
    }
}

fn check_url(url: &str) -> Result<(), GitRefError> {
    if url.is_empty() {
        return Err(GitRefError::UrlMissing);
    }
    if url.len() > MAX_URL {
        return Err(GitRefError::TooLong { limit: MAX_URL });
    }
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(GitRefError::UrlCharacters);
    }
    if url.starts_with('-') {
        return Err(GitRefError::UrlOption);
    }
    if url.contains("::") {
        return Err(GitRefError::TransportHelper);
    }
    const SCHEMES: [&str; 5] = ["https://", "http://", "ssh://", "git://", "file://"];
    if SCHEMES.iter().any(|scheme| url.starts_with(scheme)) || url.starts_with('/') {
        return Ok(());
    }
    if url.contains("://") {
        return Err(GitRefError::UrlScheme);
    }
    // `[user@]host:path`, as git reads it: a colon before any slash.
    match url.split_once(':') {
        Some((host, path)) if !host.is_empty() && !host.contains('/') && !path.is_empty() => Ok(()),
        _ => Err(GitRefError::UrlForm),
    }
}

fn check_reference(reference: &str) -> Result<(), GitRefError> {
    if reference.is_empty() {
        return Ok(());
    }
    if reference.len() > MAX_REFERENCE {
        return Err(GitRefError::TooLong {
            limit: MAX_REFERENCE,
        });
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | '+');
    if !reference.chars().all(allowed) {
        return Err(GitRefError::ReferenceCharacters);
    }
    if reference.starts_with(['-', '/', '.'])
        || reference.ends_with(['/', '.'])
        || reference.ends_with(".lock")
        || reference.contains("..")
        || reference.contains("//")
        || reference.contains("/.")
    {
        return Err(GitRefError::ReferenceForm);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(uri: &str, id: &str) -> ContextRef {
        ContextRef {
            kind: GIT_CONTEXT.into(),
            id: id.into(),
            uri: uri.into(),
        }
    }

    #[test]
    fn a_git_ref_names_the_repository_and_revision() {
        let other = ContextRef {
            kind: "file".into(),
            id: String::new(),
            uri: "src/main.rs".into(),
        };
        assert_eq!(GitSource::from_refs(std::slice::from_ref(&other)), Ok(None));
        for (uri, id) in [
            ("https://example.com/org/repo.git", "main"),
            ("file:///srv/repo.git", "v1.2.0"),
            ("/srv/repo.git", "feature/x"),
            ("git@example.com:org/repo.git", ""),
            ("ssh://git@example.com/org/repo.git", &"ab".repeat(20)),
        ] {
            let source = GitSource::from_refs(&[other.clone(), git(uri, id)])
                .expect("valid")
                .expect("a git source");
            assert_eq!(source.url, uri);
            assert_eq!(source.reference.as_deref(), (!id.is_empty()).then_some(id));
            assert_eq!(source.to_ref(), git(uri, id));
        }
    }

    #[test]
    fn urls_and_references_git_could_misread_are_refused_naming_the_entry() {
        for (uri, id) in [
            ("", "main"),
            ("--upload-pack=touch /tmp/x", ""),
            ("ext::sh -c touch% /tmp/x", ""),
            ("relative/path", ""),
            ("ftp://example.com/r.git", ""),
            ("https://example.com/r.git", "--orphan"),
            ("https://example.com/r.git", "main..other"),
            ("https://example.com/r.git", "HEAD@{1}"),
            ("https://example.com/r.git", "a b"),
            ("https://example.com/r.git", "x.lock"),
        ] {
            let err = GitSource::from_refs(&[git(uri, id)]).expect_err(uri);
            assert_eq!(err.field(), Some("context_refs"), "{err}");
            assert!(err.to_string().contains("entry 0 (type git)"), "{err}");
        }
        let two = [git("/a.git", ""), git("/b.git", "")];
        let err = GitSource::from_refs(&two).expect_err("two repositories");
        assert!(err.to_string().contains("entry 1"), "{err}");
    }
}
