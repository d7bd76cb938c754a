//! The `network` permission: which hosts a command may reach through the sandbox's
//! proxy.
//!
//! Unlike other permissions it is closed by default: a command reaches no host
//! unless a rule whose permission is literally `network` allows it. A wildcard
//! permission (`* * allow`) does not open the network, and `ask` counts as `deny`,
//! since a connection cannot wait for an approval. The pattern matches the host
//! (`*.github.com`, `pypi.org`) on any port, or `host:port` when it holds a colon
//! (`example.com:443`); the last matching rule decides, as everywhere.

use taskwire_definitions::permission::{
    PermissionAction, PermissionRule, Permissions, wildcard_match,
};

/// The permission name of rules that open hosts to commands.
pub const NETWORK_PERMISSION: &str = "network";

/// The `network` rules of every layer of a session (its own, then the inherited):
/// closed unless every layer opens it, so a child reaches no host its ancestors could
/// not.
pub(super) struct NetworkLayers(Vec<Vec<PermissionRule>>);

impl NetworkLayers {
    pub(super) fn of(permissions: Permissions<'_>) -> Self {
        Self(
            permissions
                .layers()
                .map(|rules| {
                    rules
                        .iter()
                        .filter(|rule| rule.permission == NETWORK_PERMISSION)
                        .cloned()
                        .collect()
                })
                .collect(),
        )
    }

    /// Whether every layer could allow some host (a command then gets a proxy).
    pub(super) fn opens(&self) -> bool {
        self.0.iter().all(|rules| opens_network(rules))
    }

    /// Whether every layer allows `host` on `port`.
    pub(super) fn allows(&self, host: &str, port: u16) -> bool {
        self.0.iter().all(|rules| allows_host(rules, host, port))
    }
}

/// Whether any rule could allow a host, so a command gets a proxy at all.
pub(super) fn opens_network(rules: &[PermissionRule]) -> bool {
    rules
        .iter()
        .any(|rule| rule.permission == NETWORK_PERMISSION && rule.action == PermissionAction::Allow)
}

/// Whether `host` (lowercase) on `port` is allowed by `rules`.
pub(super) fn allows_host(rules: &[PermissionRule], host: &str, port: u16) -> bool {
    let with_port = format!("{host}:{port}");
    rules
        .iter()
        .rev()
        .filter(|rule| rule.permission == NETWORK_PERMISSION)
        .find(|rule| {
            let pattern = rule.pattern.to_ascii_lowercase();
            if pattern.contains(':') && !pattern.contains("::") {
                wildcard_match(&pattern, &with_port)
            } else {
                wildcard_match(&pattern, host)
            }
        })
        .is_some_and(|rule| rule.action == PermissionAction::Allow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(permission: &str, pattern: &str, action: PermissionAction) -> PermissionRule {
        PermissionRule::new(permission, pattern, action)
    }

    #[test]
    fn a_child_reaches_only_hosts_every_ancestor_allows() {
        use taskwire_definitions::permission::PermissionLayer;
        let own = [rule("network", "*", PermissionAction::Allow)];
        let parent = |rules: Vec<PermissionRule>| PermissionLayer {
            agent: "parent".into(),
            rules,
        };
        let closed = [parent(vec![])];
        let layers = NetworkLayers::of(Permissions::new(&own, &closed));
        assert!(!layers.opens(), "a parent without network closes it");
        assert!(!layers.allows("example.com", 443));
        let narrow = [parent(vec![rule(
            "network",
            "pypi.org",
            PermissionAction::Allow,
        )])];
        let layers = NetworkLayers::of(Permissions::new(&own, &narrow));
        assert!(layers.opens());
        assert!(layers.allows("pypi.org", 443));
        assert!(!layers.allows("example.com", 443));
        let alone = NetworkLayers::of(Permissions::new(&own, &[]));
        assert!(alone.allows("example.com", 443));
    }

    #[test]
    fn the_network_is_closed_without_a_network_allow_rule() {
        let everything = [rule("*", "*", PermissionAction::Allow)];
        assert!(!opens_network(&everything));
        assert!(!allows_host(&everything, "example.com", 443));
        assert!(!allows_host(&[], "example.com", 443));
        let asked = [rule("network", "*", PermissionAction::Ask)];
        assert!(!opens_network(&asked));
        assert!(!allows_host(&asked, "example.com", 443));
    }

    #[test]
    fn host_patterns_match_hosts_and_optionally_ports() {
        let rules = [
            rule("network", "*.github.com", PermissionAction::Allow),
            rule("network", "pypi.org:443", PermissionAction::Allow),
            rule("network", "evil.github.com", PermissionAction::Deny),
        ];
        assert!(opens_network(&rules));
        assert!(allows_host(&rules, "api.github.com", 443));
        assert!(allows_host(&rules, "api.github.com", 80));
        assert!(!allows_host(&rules, "evil.github.com", 443));
        assert!(allows_host(&rules, "pypi.org", 443));
        assert!(!allows_host(&rules, "pypi.org", 80));
        assert!(!allows_host(&rules, "github.com.evil.net", 443));
        assert!(!allows_host(&rules, "127.0.0.1", 4222));
    }
}
