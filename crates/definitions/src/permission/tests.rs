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

/// The definition of a whole match, character by character, with no shortcut: a
/// pattern matches when its first character matches the text's and the rest match
/// the rest, a `*` absorbing any number of characters.
fn matches_by_definition(pattern: &[char], text: &[char]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some(('*', rest)) => (0..=text.len()).any(|i| matches_by_definition(rest, &text[i..])),
        Some((&c, rest)) => text
            .split_first()
            .is_some_and(|(&t, tail)| (c == '?' || c == t) && matches_by_definition(rest, tail)),
    }
}

proptest! {
    // Plain names, `*` alone, ASCII and non-ASCII text take different paths; all of
    // them agree with the definition.
    #[test]
    fn wildcard_match_agrees_with_the_definition(
        pattern in "[ab*?é/ ]{0,8}",
        text in "[abé/ ]{0,10}",
    ) {
        let p: Vec<char> = pattern.chars().collect();
        let t: Vec<char> = text.chars().collect();
        let bare = pattern.strip_suffix(" *").map(|h| h.chars().collect::<Vec<_>>());
        let expected = matches_by_definition(&p, &t)
            || bare.is_some_and(|h| matches_by_definition(&h, &t));
        prop_assert_eq!(wildcard_match(&pattern, &text), expected);
    }
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
            rule: rules[0].clone(),
            inherited_from: None,
        }
    );
    assert_eq!(
        decide(&["cargo build", "rm -rf x"]),
        Decision::Deny {
            subject: "rm -rf x".into(),
            rule: rules[3].clone(),
            inherited_from: None,
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
        decide(
            &[rule("bash", "*", Deny)],
            &Approvals::default(),
            "bash",
            &[]
        ),
        Decision::Deny {
            subject: String::new(),
            rule: rule("bash", "*", Deny),
            inherited_from: None,
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
