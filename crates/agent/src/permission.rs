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
//! Pure functions only; the session loop applies the verdict and asks the host.

use std::fmt;

use serde::{Deserialize, Serialize};

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
    fn strictness(self) -> u8 {
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
    },
    /// `subject` is the first denied one, `rule` the rule that denied it.
    Deny {
        subject: String,
        rule: PermissionRule,
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
    let empty = [String::new()];
    let subjects = if subjects.is_empty() { &empty[..] } else { subjects };
    let mut asks = Vec::new();
    let mut ask_rule = None;
    for subject in subjects {
        let Some(rule) = deciding_rule(rules, permission, subject) else {
            continue;
        };
        match rule.action {
            PermissionAction::Deny => {
                return Decision::Deny {
                    subject: subject.clone(),
                    rule: rule.clone(),
                };
            }
            PermissionAction::Ask if !approvals.covers(permission, subject) => {
                ask_rule.get_or_insert_with(|| rule.clone());
                if !asks.contains(subject) {
                    asks.push(subject.clone());
                }
            }
            PermissionAction::Ask | PermissionAction::Allow => {}
        }
    }
    match ask_rule {
        Some(rule) => Decision::Ask {
            patterns: asks,
            rule,
        },
        None => Decision::Allow,
    }
}

/// The strictest of the plain verdicts for `subjects`, ignoring approvals.
pub fn strictest(rules: &[PermissionRule], permission: &str, subjects: &[String]) -> PermissionAction {
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
    fn trailing_space_star_also_matches_the_bare_command() {
        assert!(wildcard_match("ls *", "ls"));
        assert!(wildcard_match("ls *", "ls -la"));
        assert!(!wildcard_match("ls *", "lsblk"));
        assert!(wildcard_match("git status*", "git status --short"));
        assert!(wildcard_match("git status*", "git status"));
    }

    fn subjects(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn bash_prefix_rules_judge_every_part_and_the_strictest_wins() {
        let rules = [
            rule("bash", "*", Ask),
            rule("bash", "git status*", Allow),
            rule("bash", "ls*", Allow),
            rule("bash", "rm*", Deny),
        ];
        let none = Approvals::default();
        let decide = |parts: &[&str]| decide(&rules, &none, "bash", &subjects(parts));
        assert_eq!(decide(&["git status --short"]), Decision::Allow);
        assert_eq!(decide(&["git status", "ls -la"]), Decision::Allow);
        assert_eq!(
            decide(&["git status", "cargo build", "ls"]),
            Decision::Ask {
                patterns: subjects(&["cargo build"]),
                rule: rules[0].clone()
            }
        );
        assert_eq!(
            decide(&["cargo build", "rm -rf x"]),
            Decision::Deny {
                subject: "rm -rf x".into(),
                rule: rules[3].clone()
            }
        );
    }

    #[test]
    fn approvals_lift_ask_for_exactly_the_approved_subjects() {
        let rules = [rule("bash", "*", Ask), rule("bash", "rm -rf*", Deny)];
        let mut approvals = Approvals::default();
        approvals.grant("bash", &subjects(&["rm *"]));
        assert_eq!(
            decide(&rules, &approvals, "bash", &subjects(&["rm *"])),
            Decision::Allow
        );
        assert!(matches!(
            decide(&rules, &approvals, "bash", &subjects(&["rm x"])),
            Decision::Ask { .. }
        ));
        assert!(matches!(
            decide(&rules, &approvals, "edit", &subjects(&["rm *"])),
            Decision::Allow
        ));
        approvals.grant("bash", &subjects(&["rm -rf /"]));
        assert!(matches!(
            decide(&rules, &approvals, "bash", &subjects(&["rm -rf /"])),
            Decision::Deny { .. }
        ));
        assert_eq!(approvals.rules().len(), 2);
    }

    #[test]
    fn no_subjects_is_the_empty_subject() {
        assert_eq!(
            decide(&[rule("bash", "*", Deny)], &Approvals::default(), "bash", &[]),
            Decision::Deny {
                subject: String::new(),
                rule: rule("bash", "*", Deny)
            }
        );
        assert_eq!(strictest(&[rule("bash", "*", Ask)], "bash", &[]), Ask);
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
        fn decision_is_the_strictest_subject_verdict(
            rules in rules(), subjects in prop::collection::vec(subject(), 0..4)
        ) {
            let decision = decide(&rules, &Approvals::default(), "ab", &subjects);
            let expected = strictest(&rules, "ab", &subjects);
            let got = match decision {
                Decision::Allow => Allow,
                Decision::Ask { .. } => Ask,
                Decision::Deny { .. } => Deny,
            };
            prop_assert_eq!(got, expected);
        }

        #[test]
        fn approvals_never_lift_a_deny_and_always_lift_what_was_asked(
            rules in rules(),
            subjects in prop::collection::vec(subject(), 1..4),
            granted in prop::collection::vec(subject(), 0..4),
        ) {
            let mut approvals = Approvals::default();
            approvals.grant("ab", &granted);
            let decision = decide(&rules, &approvals, "ab", &subjects);
            if strictest(&rules, "ab", &subjects) == Deny {
                prop_assert!(matches!(decision, Decision::Deny { .. }), "a deny must stay a deny");
            }
            if let Decision::Ask { patterns, .. } = decide(&rules, &Approvals::default(), "ab", &subjects) {
                let mut always = Approvals::default();
                always.grant("ab", &patterns);
                prop_assert_eq!(decide(&rules, &always, "ab", &subjects), Decision::Allow);
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
