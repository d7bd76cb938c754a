//! The permission engine: ordered `allow | ask | deny` rules with wildcard patterns.
//!
//! A rule names a permission (usually a tool name; several tools may share one, as
//! `edit` will cover edit/write/patch) and a pattern over the call's subject (a
//! workspace-relative path, a search pattern, later a bash command). Rules are read in
//! order and the **last** matching rule decides, so an agent spec reads like an
//! override list: broad defaults first, exceptions after. Nothing matching means
//! `Allow`: the tool allow-list, not the rules, decides what an agent may call at all.
//!
//! Pure functions only; the session loop applies the verdict.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What to do with a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PermissionAction {
    Allow,
    /// Needs a human (or policy) answer first. Until approval exists this is a deny
    /// the model sees as "requires approval".
    Ask,
    Deny,
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
/// character, everything else is literal.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    // Greedy two-pointer match with backtracking to the last `*`: linear in practice,
    // no regex compilation per rule.
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    // Position after the last `*` seen, and the text position it is currently
    // assumed to absorb up to.
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                p += 1;
                backtrack = Some((p, t));
            }
            Some(&c) if c == '?' || c == text[t] => {
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
    pattern[p..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use PermissionAction::{Allow, Ask, Deny};
    use proptest::prelude::*;

    fn rule(permission: &str, pattern: &str, action: PermissionAction) -> PermissionRule {
        PermissionRule::new(permission, pattern, action)
    }

    #[test]
    fn wildcard_examples() {
        assert!(wildcard_match("*", ""));
        assert!(wildcard_match("*", "a/b/c"));
        assert!(wildcard_match("src/*", "src/a/b.rs"));
        assert!(wildcard_match("*.rs", "src/lib.rs"));
        assert!(wildcard_match("git *", "git status --short"));
        assert!(wildcard_match("?at", "cat"));
        assert!(wildcard_match("a*b*c", "axxbyyc"));
        assert!(!wildcard_match("a*b*c", "axxbyy"));
        assert!(!wildcard_match("?at", "at"));
        assert!(!wildcard_match("read", "reader"));
        assert!(!wildcard_match("", "x"));
        assert!(wildcard_match("ünï*", "ünïcode"));
    }

    #[test]
    fn nothing_matching_allows() {
        assert_eq!(evaluate(&[], "read", "a"), Allow);
        assert_eq!(evaluate(&[rule("edit", "*", Deny)], "read", "a"), Allow);
    }

    #[test]
    fn later_exception_overrides_earlier_default() {
        let rules = [rule("bash", "*", Ask), rule("bash", "git status*", Allow)];
        assert_eq!(evaluate(&rules, "bash", "git status --short"), Allow);
        assert_eq!(evaluate(&rules, "bash", "rm -rf /"), Ask);
        assert_eq!(deciding_rule(&rules, "bash", "rm -rf /"), Some(&rules[0]));
    }

    #[test]
    fn blanket_deny_disables_but_later_allow_keeps_tool_offered() {
        assert!(is_disabled(&[rule("edit", "*", Deny)], "edit"));
        assert!(is_disabled(&[rule("*", "*", Deny)], "edit"));
        assert!(!is_disabled(
            &[rule("edit", "*", Deny), rule("edit", "docs/*", Allow)],
            "edit"
        ));
        assert!(!is_disabled(&[rule("edit", "secret/*", Deny)], "edit"));
        assert!(!is_disabled(
            &[rule("edit", "*", Deny), rule("edit", "*", Allow)],
            "edit"
        ));
        assert!(!is_disabled(&[rule("edit", "*", Deny)], "read"));
    }

    #[test]
    fn rule_display_names_the_rule() {
        assert_eq!(rule("edit", "*", Deny).to_string(), "edit * deny");
    }

    fn action() -> impl Strategy<Value = PermissionAction> {
        prop_oneof![Just(Allow), Just(Ask), Just(Deny)]
    }

    // Small alphabets so that random patterns actually match random subjects.
    fn name() -> impl Strategy<Value = String> {
        "[ab*?]{0,4}"
    }
    fn subject() -> impl Strategy<Value = String> {
        "[ab/]{0,6}"
    }
    fn rules() -> impl Strategy<Value = Vec<PermissionRule>> {
        prop::collection::vec(
            (name(), name(), action()).prop_map(|(p, s, a)| rule(&p, &s, a)),
            0..8,
        )
    }

    proptest! {
        #[test]
        fn appending_a_rule_matching_everything_decides(
            rules in rules(), last in action(), perm in "[ab]{0,4}", subj in subject()
        ) {
            let mut rules = rules;
            rules.push(rule("*", "*", last));
            prop_assert_eq!(evaluate(&rules, &perm, &subj), last);
        }

        #[test]
        fn last_matching_rule_wins(
            rules in rules(), perm in "[ab]{0,4}", subj in subject()
        ) {
            // Reference: scan forward, remember the latest match.
            let mut expected = Allow;
            for r in &rules {
                if wildcard_match(&r.permission, &perm) && wildcard_match(&r.pattern, &subj) {
                    expected = r.action;
                }
            }
            prop_assert_eq!(evaluate(&rules, &perm, &subj), expected);
        }

        #[test]
        fn rules_that_do_not_match_change_nothing(
            rules in rules(), extra in action(), subj in subject()
        ) {
            let before = evaluate(&rules, "read", &subj);
            let mut more = rules;
            more.push(rule("edit", "*", extra));
            prop_assert_eq!(evaluate(&more, "read", &subj), before);
        }

        #[test]
        fn disabled_permission_is_denied_for_every_subject(
            rules in rules(), perm in "[ab]{0,4}", subj in subject()
        ) {
            if is_disabled(&rules, &perm) {
                prop_assert_eq!(evaluate(&rules, &perm, &subj), Deny);
            }
        }

        #[test]
        fn literal_pattern_matches_itself_and_star_splits_anywhere(
            prefix in "[a-z/.]{0,6}", middle in "[a-z/.]{0,6}", suffix in "[a-z/.]{0,6}"
        ) {
            let text = format!("{prefix}{middle}{suffix}");
            prop_assert!(wildcard_match(&text, &text));
            let star_pattern = format!("{prefix}*{suffix}");
            prop_assert!(wildcard_match(&star_pattern, &text));
            let q_pattern = format!("{prefix}{}{suffix}", "?".repeat(middle.chars().count()));
            prop_assert!(wildcard_match(&q_pattern, &text));
        }
    }
}
