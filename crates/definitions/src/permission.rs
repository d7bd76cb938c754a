//! The permission engine: ordered `allow | ask | deny` rules with wildcard patterns.
//!
//! A rule names a permission (usually a tool name; several tools may share one, as
//! `edit` covers edit and write) and a pattern over the call's subject (a
//! workspace-relative path, a search pattern, a bash command). Rules are read in
//! order and the **last** matching rule decides, so an agent spec reads like an
//! override list: broad defaults first, exceptions after. Nothing matching means
//! `Allow`: the tool allow-list, not the rules, decides what an agent may call at all.
//!
//! A call can have several subjects (each simple command of `git status && rm x`);
//! [`decide`] judges them all and the strictest verdict wins: `deny` over `ask` over
//! `allow`. An `ask` that was answered `Always` earlier in the session is lifted by
//! the session's [`Approvals`]; a `deny` never is.
//!
//! A child task's session is also bounded by its ancestors' rules, carried as
//! [`PermissionLayer`]s: [`Permissions`] judges a call by every layer and the strictest
//! verdict wins, so a child never has more power than its parent.
//!
//! Pure functions only; the session loop applies the verdict and asks the host.

mod layered;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use self::layered::{PermissionLayer, Permissions};

/// What to do with a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PermissionAction {
    Allow,
    /// Needs a human (or policy) answer first, through the session host.
    Ask,
    Deny,
}

impl PermissionAction {
    /// Order by strictness, for "the strictest verdict wins".
    pub(crate) fn strictness(self) -> u8 {
        match self {
            Self::Allow => 0,
            Self::Ask => 1,
            Self::Deny => 2,
        }
    }
}

impl fmt::Display for PermissionAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        })
    }
}

/// One rule: for `permission` (wildcard) on subjects matching `pattern` (wildcard), do
/// `action`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PermissionRule {
    pub permission: String,
    pub pattern: String,
    pub action: PermissionAction,
}

impl PermissionRule {
    pub fn new(
        permission: impl Into<String>,
        pattern: impl Into<String>,
        action: PermissionAction,
    ) -> Self {
        Self {
            permission: permission.into(),
            pattern: pattern.into(),
            action,
        }
    }

    /// Whether this rule speaks about `permission` on `subject`.
    pub fn matches(&self, permission: &str, subject: &str) -> bool {
        wildcard_match(&self.permission, permission) && wildcard_match(&self.pattern, subject)
    }
}

/// Shown to the model when a rule blocks a call, so it can tell which rule to avoid.
impl fmt::Display for PermissionRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.permission, self.pattern, self.action)
    }
}

/// The rule that decides `permission` on `subject`: the last one that matches.
pub fn deciding_rule<'r>(
    rules: &'r [PermissionRule],
    permission: &str,
    subject: &str,
) -> Option<&'r PermissionRule> {
    rules
        .iter()
        .rev()
        .find(|rule| rule.matches(permission, subject))
}

/// The verdict for `permission` on `subject`: the last matching rule's action, or
/// `Allow` when no rule matches.
pub fn evaluate(rules: &[PermissionRule], permission: &str, subject: &str) -> PermissionAction {
    deciding_rule(rules, permission, subject).map_or(PermissionAction::Allow, |rule| rule.action)
}

/// The verdict on one call over all its subjects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Some subjects need approval; `patterns` are those subjects, `rule` the rule
    /// that asked for the first of them.
    Ask {
        patterns: Vec<String>,
        rule: PermissionRule,
        /// The ancestor's agent whose rule it is; `None` for the session's own rules.
        inherited_from: Option<String>,
    },
    /// `subject` is the first denied one, `rule` the rule that denied it.
    Deny {
        subject: String,
        rule: PermissionRule,
        /// The ancestor's agent whose rule it is; `None` for the session's own rules.
        inherited_from: Option<String>,
    },
}

/// Judges `permission` on every subject of one call; the strictest verdict wins. An
/// `ask` subject that `approvals` covers counts as allowed. No subjects is judged as
/// the single empty subject (matched by `*`).
pub fn decide(
    rules: &[PermissionRule],
    approvals: &Approvals,
    permission: &str,
    subjects: &[String],
) -> Decision {
    Permissions::new(rules, &[]).decide(approvals, permission, subjects)
}

/// The strictest of the plain verdicts for `subjects`, ignoring approvals.
pub fn strictest(
    rules: &[PermissionRule],
    permission: &str,
    subjects: &[String],
) -> PermissionAction {
    subjects
        .iter()
        .map(|subject| evaluate(rules, permission, subject))
        .max_by_key(|action| action.strictness())
        .unwrap_or_else(|| evaluate(rules, permission, ""))
}

/// Approvals answered `Always` during one session: allow rules that lift `ask` for
/// exactly the approved subjects and never override a `deny`.
///
/// Patterns match literally, not as wildcards: approving the command `rm *` must not
/// approve `rm -rf ~`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Approvals {
    granted: Vec<PermissionRule>,
}

impl Approvals {
    /// Allows `permission` on each of `patterns` for the rest of the session.
    pub fn grant(&mut self, permission: &str, patterns: &[String]) {
        for pattern in patterns {
            if !self.covers(permission, pattern) {
                self.granted.push(PermissionRule::new(
                    permission,
                    pattern.clone(),
                    PermissionAction::Allow,
                ));
            }
        }
    }

    /// Whether `permission` on `subject` was approved for the session.
    pub fn covers(&self, permission: &str, subject: &str) -> bool {
        self.granted
            .iter()
            .any(|rule| rule.permission == permission && rule.pattern == subject)
    }

    /// The granted rules, oldest first.
    pub fn rules(&self) -> &[PermissionRule] {
        &self.granted
    }
}

/// Whether `permission` is denied outright, so tools that need it are not offered to
/// the model at all (a model that never sees a tool cannot waste steps on it).
///
/// True when the last rule whose permission matches is a blanket `* deny`. A later,
/// narrower rule (say `edit src/* allow` after `edit * deny`) keeps the tool offered,
/// because some calls would pass; those calls are then judged one by one by
/// [`evaluate`]. Follows OpenCode's `ToolRegistry` check.
pub fn is_disabled(rules: &[PermissionRule], permission: &str) -> bool {
    rules
        .iter()
        .rev()
        .find(|rule| wildcard_match(&rule.permission, permission))
        .is_some_and(|rule| rule.pattern == "*" && rule.action == PermissionAction::Deny)
}

/// Wildcard match over the whole text: `*` is any sequence (including `/` and
/// newlines, since subjects can be paths or shell commands), `?` is exactly one
/// character, everything else is literal. As in OpenCode, a trailing ` *` also
/// matches nothing at all, so `ls *` covers a bare `ls` as well as `ls -la`.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    match_whole(pattern, text)
        || pattern
            .strip_suffix(" *")
            .is_some_and(|head| match_whole(head, text))
}

fn match_whole(pattern: &str, text: &str) -> bool {
    // Most rules are a plain name or `*`, checked for every tool of every session:
    // those need no scan at all.
    if pattern == "*" {
        return true;
    }
    if !pattern.contains(['*', '?']) {
        return pattern == text;
    }
    // `?` is one character: bytes stand for characters when both are ASCII.
    if pattern.is_ascii() && text.is_ascii() {
        match_units(pattern.as_bytes(), text.as_bytes(), b'*', b'?')
    } else {
        let pattern: Vec<char> = pattern.chars().collect();
        let text: Vec<char> = text.chars().collect();
        match_units(&pattern, &text, '*', '?')
    }
}

/// Greedy two-pointer match with backtracking to the last `star`: linear in practice,
/// no regex compilation per rule.
fn match_units<T: Copy + Eq>(pattern: &[T], text: &[T], star: T, any: T) -> bool {
    let (mut p, mut t) = (0, 0);
    // Position after the last `star` seen, and the text position it is currently
    // assumed to absorb up to.
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(&c) if c == star => {
                p += 1;
                backtrack = Some((p, t));
            }
            Some(&c) if c == any || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match backtrack {
                Some((star_p, star_t)) => {
                    p = star_p;
                    t = star_t + 1;
                    backtrack = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == star)
}

#[cfg(test)]
mod tests;
