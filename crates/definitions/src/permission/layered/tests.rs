use super::*;
use crate::builtin;
use PermissionAction::{Allow, Ask, Deny};
use proptest::prelude::*;

fn rule(permission: &str, pattern: &str, action: PermissionAction) -> PermissionRule {
    PermissionRule::new(permission, pattern, action)
}

fn layer(agent: &str, rules: Vec<PermissionRule>) -> PermissionLayer {
    PermissionLayer {
        agent: agent.to_owned(),
        rules,
    }
}

fn subjects(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn kind(decision: &Decision) -> PermissionAction {
    match decision {
        Decision::Allow => Allow,
        Decision::Ask { .. } => Ask,
        Decision::Deny { .. } => Deny,
    }
}

#[test]
fn a_general_child_of_plan_cannot_edit_and_asks_where_plan_asks() {
    let general = builtin::general();
    let inherited = [layer("plan", builtin::plan().permission)];
    let child = Permissions::new(&general.permission, &inherited);
    let none = Approvals::default();

    assert!(
        general.permission.is_empty(),
        "general alone may do anything"
    );
    assert!(child.is_disabled("edit"), "plan denies edit for every path");
    assert!(!child.is_disabled("bash") && !child.is_disabled("read"));
    match child.decide(&none, "bash", &subjects(&["touch x"])) {
        Decision::Ask {
            patterns,
            rule,
            inherited_from,
        } => {
            assert_eq!(patterns, ["touch x"]);
            assert_eq!(rule, PermissionRule::new("bash", "*", Ask));
            assert_eq!(inherited_from.as_deref(), Some("plan"));
        }
        other => panic!("plan asks about touch: {other:?}"),
    }
    assert_eq!(
        child.decide(&none, "bash", &subjects(&["ls -la", "git status"])),
        Decision::Allow
    );
    assert_eq!(child.evaluate("read", "src/lib.rs"), Allow);
}

#[test]
fn an_always_answer_lifts_only_the_sessions_own_asks() {
    let own = [rule("bash", "*", Ask)];
    let inherited = [layer("plan", vec![rule("bash", "rm*", Ask)])];
    let rules = Permissions::new(&own, &inherited);
    let mut approvals = Approvals::default();
    approvals.grant("bash", &subjects(&["cargo test", "rm x"]));

    assert_eq!(
        rules.decide(&approvals, "bash", &subjects(&["cargo test"])),
        Decision::Allow
    );
    assert_eq!(
        rules.decide(&approvals, "bash", &subjects(&["cargo test", "rm x"])),
        Decision::Ask {
            patterns: subjects(&["rm x"]),
            rule: inherited[0].rules[0].clone(),
            inherited_from: Some("plan".into()),
        }
    );
}

#[test]
fn a_deny_of_any_layer_wins_and_names_the_ancestor() {
    let own = [rule("edit", "*", Allow)];
    let inherited = [
        layer("reviewer", vec![rule("edit", "*", Ask)]),
        layer("plan", vec![rule("edit", "secret/*", Deny)]),
    ];
    let rules = Permissions::new(&own, &inherited);
    let none = Approvals::default();
    assert_eq!(
        rules.decide(&none, "edit", &subjects(&["src/a.rs", "secret/key"])),
        Decision::Deny {
            subject: "secret/key".into(),
            rule: rule("edit", "secret/*", Deny),
            inherited_from: Some("plan".into()),
        }
    );
    assert!(matches!(
        rules.decide(&none, "edit", &subjects(&["src/a.rs"])),
        Decision::Ask { inherited_from: Some(agent), .. } if agent == "reviewer"
    ));
    assert!(
        !rules.is_disabled("edit"),
        "some paths are only asked about"
    );
}

#[test]
fn among_equally_strict_rules_the_sessions_own_is_named() {
    let own = [rule("bash", "*", Deny)];
    let inherited = [layer("plan", vec![rule("bash", "*", Deny)])];
    let decision = Permissions::new(&own, &inherited).decide(
        &Approvals::default(),
        "bash",
        &subjects(&["ls"]),
    );
    assert!(
        matches!(
            decision,
            Decision::Deny {
                inherited_from: None,
                ..
            }
        ),
        "{decision:?}"
    );
}

fn action() -> impl Strategy<Value = PermissionAction> {
    prop_oneof![Just(Allow), Just(Ask), Just(Deny)]
}

// Small alphabets so that random patterns actually match random subjects.
fn pattern() -> impl Strategy<Value = String> {
    "[ab*?]{0,4}"
}
fn subject() -> impl Strategy<Value = String> {
    "[ab/]{0,6}"
}
fn rules() -> impl Strategy<Value = Vec<PermissionRule>> {
    prop::collection::vec(
        (pattern(), pattern(), action()).prop_map(|(p, s, a)| rule(&p, &s, a)),
        0..6,
    )
}
fn layers() -> impl Strategy<Value = Vec<PermissionLayer>> {
    prop::collection::vec(rules().prop_map(|rules| layer("ancestor", rules)), 0..4)
}

proptest! {
    #[test]
    fn the_layered_decision_is_the_strictest_single_layer_decision(
        own in rules(),
        inherited in layers(),
        perm in "[ab]{1,3}",
        subjects in prop::collection::vec(subject(), 0..4),
    ) {
        let none = Approvals::default();
        let layered = kind(&Permissions::new(&own, &inherited).decide(&none, &perm, &subjects));
        let singles: Vec<PermissionAction> = std::iter::once(&own)
            .chain(inherited.iter().map(|layer| &layer.rules))
            .map(|rules| kind(&crate::permission::decide(rules, &none, &perm, &subjects)))
            .collect();
        for single in &singles {
            prop_assert!(
                layered.strictness() >= single.strictness(),
                "layered {layered} is less strict than a layer's {single}"
            );
        }
        let strictest = singles.iter().copied().max_by_key(|a| a.strictness());
        prop_assert_eq!(Some(layered), strictest);
    }

    #[test]
    fn approvals_never_lift_a_deny_or_an_inherited_ask(
        own in rules(),
        inherited in layers(),
        subjects in prop::collection::vec(subject(), 1..4),
        granted in prop::collection::vec(subject(), 0..4),
    ) {
        let mut approvals = Approvals::default();
        approvals.grant("ab", &granted);
        approvals.grant("ab", &subjects);
        let layered = kind(&Permissions::new(&own, &inherited).decide(&approvals, "ab", &subjects));
        let none = Approvals::default();
        for layer in &inherited {
            let single = kind(&crate::permission::decide(&layer.rules, &none, "ab", &subjects));
            prop_assert!(layered.strictness() >= single.strictness());
        }
        if kind(&crate::permission::decide(&own, &none, "ab", &subjects)) == Deny {
            prop_assert_eq!(layered, Deny);
        }
    }

    #[test]
    fn granting_what_was_asked_leaves_only_the_inherited_asks(
        own in rules(),
        inherited in layers(),
        subjects in prop::collection::vec(subject(), 1..4),
    ) {
        let rules = Permissions::new(&own, &inherited);
        let none = Approvals::default();
        if let Decision::Ask { patterns, .. } = rules.decide(&none, "ab", &subjects) {
            let mut always = Approvals::default();
            always.grant("ab", &patterns);
            let ancestors_only = Permissions::new(&[], &inherited).decide(&none, "ab", &subjects);
            prop_assert_eq!(rules.decide(&always, "ab", &subjects), ancestors_only);
        }
    }

    #[test]
    fn a_disabled_permission_is_denied_for_every_call(
        own in rules(),
        inherited in layers(),
        perm in "[ab]{1,3}",
        subjects in prop::collection::vec(subject(), 0..4),
    ) {
        let rules = Permissions::new(&own, &inherited);
        if rules.is_disabled(&perm) {
            let decision = rules.decide(&Approvals::default(), &perm, &subjects);
            prop_assert_eq!(kind(&decision), Deny);
        }
    }

    #[test]
    fn evaluate_agrees_with_decide_on_one_subject(
        own in rules(),
        inherited in layers(),
        perm in "[ab]{1,3}",
        subject in subject(),
    ) {
        let rules = Permissions::new(&own, &inherited);
        let decision = rules.decide(&Approvals::default(), &perm, std::slice::from_ref(&subject));
        prop_assert_eq!(rules.evaluate(&perm, &subject), kind(&decision));
    }
}
