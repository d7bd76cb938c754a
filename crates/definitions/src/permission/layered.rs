//! Permission rules in layers: a session's own agent's rules, bounded by the rules of
//! every ancestor task.
//!
//! Each layer is read on its own (last match wins within it) and the strictest verdict
//! over all layers wins: `deny` over `ask` over `allow`. So whatever an ancestor may not
//! do, its descendants may not do, and whatever an ancestor must ask about, they must
//! ask about too. Approvals answered `Always` lift only the asks of the session's own
//! rules: the person answering speaks for this session, not for the ancestors whose
//! rules asked, so an inherited `ask` is asked again next time. No approval lifts a
//! `deny`.

use serde::{Deserialize, Serialize};

use super::{Approvals, Decision, PermissionAction, PermissionRule, deciding_rule, is_disabled};

/// One ancestor's rules, as its agent defines them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionLayer {
    /// The ancestor's agent, named when one of its rules refuses a call.
    pub agent: String,
    pub rules: Vec<PermissionRule>,
}

/// The rules one session runs under: its agent's own, then the inherited layers
/// (nearest ancestor first).
#[derive(Debug, Clone, Copy)]
pub struct Permissions<'a> {
    own: &'a [PermissionRule],
    inherited: &'a [PermissionLayer],
}

/// The rule deciding one subject, and whose it is.
struct Verdict<'a> {
    rule: &'a PermissionRule,
    /// `None` for the session's own rules.
    layer: Option<&'a str>,
}

impl Verdict<'_> {
    fn action(&self) -> PermissionAction {
        self.rule.action
    }
}

impl<'a> Permissions<'a> {
    pub fn new(own: &'a [PermissionRule], inherited: &'a [PermissionLayer]) -> Self {
        Self { own, inherited }
    }

    /// Every layer's rules, the session's own first: for permissions that are closed
    /// unless every layer opens them (`network`).
    pub fn layers(&self) -> impl Iterator<Item = &'a [PermissionRule]> + use<'a> {
        std::iter::once(self.own).chain(self.inherited.iter().map(|l| l.rules.as_slice()))
    }

    /// The strictest plain verdict of all layers for `permission` on `subject`,
    /// ignoring approvals; `Allow` when no rule of any layer matches.
    pub fn evaluate(&self, permission: &str, subject: &str) -> PermissionAction {
        self.verdict(&Approvals::default(), permission, subject)
            .map_or(PermissionAction::Allow, |verdict| verdict.action())
    }

    /// Whether some layer denies `permission` outright (see [`is_disabled`]): then
    /// every call is denied, so tools that need it are not offered at all.
    pub fn is_disabled(&self, permission: &str) -> bool {
        is_disabled(self.own, permission)
            || self
                .inherited
                .iter()
                .any(|layer| is_disabled(&layer.rules, permission))
    }

    /// Judges `permission` on every subject of one call: per subject the strictest
    /// verdict of all layers, over the subjects the strictest again. An `ask` of the
    /// session's own rules that `approvals` covers counts as allowed; an inherited
    /// `ask` does not. No subjects is judged as the single empty subject (matched by
    /// `*`).
    pub fn decide(&self, approvals: &Approvals, permission: &str, subjects: &[String]) -> Decision {
        let empty = [String::new()];
        let subjects = if subjects.is_empty() {
            &empty[..]
        } else {
            subjects
        };
        let mut asks = Vec::new();
        let mut first_ask = None;
        for subject in subjects {
            let Some(verdict) = self.verdict(approvals, permission, subject) else {
                continue;
            };
            match verdict.action() {
                PermissionAction::Deny => {
                    return Decision::Deny {
                        subject: subject.clone(),
                        rule: verdict.rule.clone(),
                        inherited_from: verdict.layer.map(str::to_owned),
                    };
                }
                PermissionAction::Ask => {
                    first_ask.get_or_insert(verdict);
                    if !asks.contains(subject) {
                        asks.push(subject.clone());
                    }
                }
                PermissionAction::Allow => {}
            }
        }
        match first_ask {
            Some(verdict) => Decision::Ask {
                patterns: asks,
                rule: verdict.rule.clone(),
                inherited_from: verdict.layer.map(str::to_owned),
            },
            None => Decision::Allow,
        }
    }

    /// The strictest deciding rule for one subject, the session's own first and then
    /// the nearest ancestor's among equally strict ones; `None` when nothing matches.
    fn verdict(
        &self,
        approvals: &Approvals,
        permission: &str,
        subject: &str,
    ) -> Option<Verdict<'a>> {
        let own = deciding_rule(self.own, permission, subject)
            // An approved ask is as good as no rule: the other layers still speak.
            .filter(|rule| {
                !(rule.action == PermissionAction::Ask && approvals.covers(permission, subject))
            })
            .map(|rule| Verdict { rule, layer: None });
        let inherited = self.inherited.iter().filter_map(|layer| {
            deciding_rule(&layer.rules, permission, subject).map(|rule| Verdict {
                rule,
                layer: Some(layer.agent.as_str()),
            })
        });
        own.into_iter().chain(inherited).reduce(|strictest, next| {
            if next.action().strictness() > strictest.action().strictness() {
                next
            } else {
                strictest
            }
        })
    }
}

#[cfg(test)]
mod tests;
