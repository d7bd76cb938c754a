//! Authentication and tenant isolation for the gRPC API.
//!
//! With a tokens file configured, every `TaskService` call must carry
//! `authorization: Bearer <token>`; the token maps to a tenant and the capabilities
//! (`auth_scope` values) it may grant. Tasks of other tenants are invisible (`NOT_FOUND`),
//! and a submit's scope must lie within the token's. Without a tokens file the API is
//! open (every caller is the tenant it names, with every scope): for development only,
//! and the coordinator says so at start.
//!
//! Tokens are kept only as SHA-256 digests and never logged.
//!
//! ```toml
//! [[token]]
//! token = "s3cr3t"            # or: sha256 = "<hex digest of the token>"
//! tenant = "acme"
//! scopes = ["read", "grep", "bash"]   # ["*"]: any scope
//! ```

use std::collections::HashMap;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::CoordinatorError;
use crate::error::TokensFileError;

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The tenant the caller acts for; `None` when authentication is off.
    pub tenant: Option<String>,
    /// Scopes the caller may grant; `None`: any.
    pub scopes: Option<Vec<String>>,
}

impl Principal {
    /// The caller when authentication is off.
    pub fn anonymous() -> Self {
        Self {
            tenant: None,
            scopes: None,
        }
    }

    /// The tenant a submit runs as: the token's, or the one the request names.
    pub fn tenant_for_submit(&self, requested: &str) -> Result<String, CoordinatorError> {
        match &self.tenant {
            None => Ok(if requested.is_empty() {
                "default".to_owned()
            } else {
                requested.to_owned()
            }),
            Some(t) if requested.is_empty() || requested == t => Ok(t.clone()),
            Some(_) => Err(CoordinatorError::PermissionDenied(format!(
                "tenant `{requested}` is not the tenant of this token"
            ))),
        }
    }

    /// The scope a submit grants: what it asks for, which must lie within the
    /// token's; when it asks for nothing, the token's whole scope.
    pub fn scope_for_submit(
        &self,
        requested: Vec<String>,
    ) -> Result<Vec<String>, CoordinatorError> {
        let Some(allowed) = &self.scopes else {
            return Ok(requested);
        };
        if allowed.iter().any(|s| s == "*") {
            return Ok(requested);
        }
        if requested.is_empty() {
            return Ok(allowed.clone());
        }
        match requested.iter().find(|s| !allowed.contains(s)) {
            Some(wider) => Err(CoordinatorError::PermissionDenied(format!(
                "auth_scope `{wider}` is not granted to this token"
            ))),
            None => Ok(requested),
        }
    }

    /// Whether the caller may see a task of `tenant`.
    pub fn may_see(&self, tenant: &str) -> bool {
        self.tenant.as_deref().is_none_or(|t| t == tenant)
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    #[serde(default)]
    token: Vec<TokenEntry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    token: Option<String>,
    sha256: Option<String>,
    tenant: String,
    #[serde(default)]
    scopes: Vec<String>,
}

/// The configured tokens.
#[derive(Clone, Default)]
pub struct Authenticator {
    /// `None`: authentication is off.
    by_digest: Option<HashMap<String, Principal>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("tokens", &self.by_digest.as_ref().map(HashMap::len))
            .finish()
    }
}

fn digest(token: &str) -> String {
    format!("{:x}", Sha256::digest(token.as_bytes()))
}

impl Authenticator {
    /// No authentication.
    pub fn open() -> Self {
        Self { by_digest: None }
    }

    /// Reads a tokens file (see the module docs).
    pub fn from_file(path: &Path) -> Result<Self, CoordinatorError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            CoordinatorError::Config(format!(
                "failed to read tokens file {}: {e}",
                path.display()
            ))
        })?;
        Self::from_toml(&text)
            .map_err(|e| CoordinatorError::Config(format!("tokens file {}: {e}", path.display())))
    }

    fn from_toml(text: &str) -> Result<Self, TokensFileError> {
        let file: TokensFile = toml::from_str(text)?;
        let mut by_digest = HashMap::new();
        for (i, t) in file.token.into_iter().enumerate() {
            let d = match (t.token, t.sha256) {
                (Some(token), None) => digest(&token),
                (None, Some(sha)) => sha.to_ascii_lowercase(),
                _ => {
                    return Err(TokensFileError::Secret { entry: i + 1 });
                }
            };
            if t.tenant.is_empty() {
                return Err(TokensFileError::NoTenant { entry: i + 1 });
            }
            by_digest.insert(
                d,
                Principal {
                    tenant: Some(t.tenant),
                    scopes: Some(t.scopes),
                },
            );
        }
        Ok(Self {
            by_digest: Some(by_digest),
        })
    }

    pub fn is_enabled(&self) -> bool {
        self.by_digest.is_some()
    }

    /// Maps a request's `authorization` metadata to its principal.
    pub fn authenticate(
        &self,
        metadata: &tonic::metadata::MetadataMap,
    ) -> Result<Principal, tonic::Status> {
        let Some(tokens) = &self.by_digest else {
            return Ok(Principal::anonymous());
        };
        let header = metadata
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                tonic::Status::unauthenticated("missing `authorization: Bearer <token>` metadata")
            })?;
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .ok_or_else(|| {
                tonic::Status::unauthenticated("authorization must be `Bearer <token>`")
            })?;
        tokens
            .get(&digest(token.trim()))
            .cloned()
            .ok_or_else(|| tonic::Status::unauthenticated("unknown token"))
    }
}

/// A tonic interceptor that authenticates each call and stores the principal in the
/// request's extensions.
#[derive(Clone)]
pub struct AuthInterceptor(pub Authenticator);

impl tonic::service::Interceptor for AuthInterceptor {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        let principal = self.0.authenticate(request.metadata())?;
        request.extensions_mut().insert(principal);
        Ok(request)
    }
}

/// The principal the interceptor stored (anonymous when none was, e.g. in-process use).
pub fn principal<T>(request: &tonic::Request<T>) -> Principal {
    request
        .extensions()
        .get::<Principal>()
        .cloned()
        .unwrap_or_else(Principal::anonymous)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth() -> Authenticator {
        Authenticator::from_toml(
            r#"
            [[token]]
            token = "t-acme"
            tenant = "acme"
            scopes = ["read", "grep"]
            [[token]]
            sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
            tenant = "test"
            scopes = ["*"]
            "#,
        )
        .expect("valid file")
    }

    fn md(value: &str) -> tonic::metadata::MetadataMap {
        let mut m = tonic::metadata::MetadataMap::new();
        m.insert("authorization", value.parse().expect("ascii"));
        m
    }

    #[test]
    fn bearer_tokens_map_to_their_tenant() {
        let a = auth();
        assert_eq!(
            a.authenticate(&md("Bearer t-acme"))
                .expect("known")
                .tenant
                .as_deref(),
            Some("acme")
        );
        // "test" is the token whose SHA-256 is configured.
        assert_eq!(
            a.authenticate(&md("Bearer test"))
                .expect("known")
                .tenant
                .as_deref(),
            Some("test")
        );
        assert_eq!(
            a.authenticate(&md("Bearer nope"))
                .expect_err("unknown")
                .code(),
            tonic::Code::Unauthenticated
        );
        let missing = a
            .authenticate(&tonic::metadata::MetadataMap::new())
            .expect_err("missing");
        assert_eq!(missing.code(), tonic::Code::Unauthenticated);
    }

    #[test]
    fn a_scope_wider_than_the_token_is_refused() {
        let p = auth().authenticate(&md("Bearer t-acme")).expect("known");
        assert_eq!(
            p.scope_for_submit(vec!["read".into()]).expect("within"),
            vec!["read".to_owned()]
        );
        assert_eq!(
            p.scope_for_submit(vec![]).expect("default"),
            vec!["read".to_owned(), "grep".to_owned()]
        );
        let err = p
            .scope_for_submit(vec!["read".into(), "bash".into()])
            .expect_err("wider");
        assert!(err.to_string().contains("`bash`"), "{err}");
    }

    #[test]
    fn a_token_cannot_act_for_another_tenant_or_see_its_tasks() {
        let p = auth().authenticate(&md("Bearer t-acme")).expect("known");
        assert_eq!(p.tenant_for_submit("").expect("own"), "acme");
        assert!(p.tenant_for_submit("globex").is_err());
        assert!(p.may_see("acme") && !p.may_see("globex"));
        assert!(Principal::anonymous().may_see("globex"));
    }

    #[test]
    fn a_tokens_file_entry_needs_exactly_one_secret() {
        let err = Authenticator::from_toml("[[token]]\ntenant = \"a\"\n").expect_err("no secret");
        assert!(err.to_string().contains("exactly one"), "{err}");
        assert!(
            Authenticator::from_toml("[[token]]\ntoken = \"x\"\ntenant = \"a\"\nbogus = 1\n")
                .is_err()
        );
    }
}
