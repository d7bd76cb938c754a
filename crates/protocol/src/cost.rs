//! Usage, cost and budgets: what a step, an attempt and a subtree spent, what a task
//! spent as every view shows it ([`TaskUsage`]), and the limits a submit may set on a
//! subtree.
//!
//! Cost is kept as whole pico-dollars (10⁻¹² USD) so that sums over steps and trees
//! are exact and the types stay `Eq`; the wire carries US dollars as a double. Tokens
//! of calls whose model has no price are counted apart (`unpriced_tokens`): a usage
//! with no priced call has no cost ("unpriced"), never a zero that looks real.

use serde::{Deserialize, Serialize};

use crate::{ProtocolError, pb};

/// Pico-dollars per US dollar.
pub const PICO_USD_PER_USD: f64 = 1e12;

/// Token usage and its cost, summed over model calls (a step, an attempt, a subtree).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// What the priced calls cost, in pico-dollars.
    #[serde(default)]
    pub cost_picousd: u64,
    /// Tokens of calls the catalogue had no price for (not in the cost).
    #[serde(default)]
    pub unpriced_tokens: u64,
    /// The part of `input_tokens` read from the provider's prompt cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// The part of `input_tokens` written to the provider's prompt cache.
    #[serde(default)]
    pub cache_write_input_tokens: u64,
}

impl Usage {
    /// Input and output tokens together.
    pub fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// The cost in US dollars; `None` ("unpriced") when no priced call is counted.
    pub fn cost_usd(&self) -> Option<f64> {
        let priced = self.tokens() > self.unpriced_tokens || self.cost_picousd > 0;
        #[allow(clippy::cast_precision_loss)] // exact below 2^53 pico-dollars ($9007)
        priced.then(|| self.cost_picousd as f64 / PICO_USD_PER_USD)
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, rhs: Self) {
        self.input_tokens = self.input_tokens.saturating_add(rhs.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(rhs.output_tokens);
        self.cost_picousd = self.cost_picousd.saturating_add(rhs.cost_picousd);
        self.unpriced_tokens = self.unpriced_tokens.saturating_add(rhs.unpriced_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(rhs.cached_input_tokens);
        self.cache_write_input_tokens = self
            .cache_write_input_tokens
            .saturating_add(rhs.cache_write_input_tokens);
    }
}

/// US dollars to pico-dollars, rounded; negative and non-finite amounts are zero.
pub fn usd_to_picousd(usd: f64) -> u64 {
    if usd.is_finite() && usd > 0.0 {
        // Saturates at u64::MAX (about $18 million), far above any budget.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let pico = (usd * PICO_USD_PER_USD).round() as u64;
        pico
    } else {
        0
    }
}

impl From<pb::Usage> for Usage {
    fn from(u: pb::Usage) -> Self {
        Self {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cost_picousd: u.cost_usd.map_or(0, usd_to_picousd),
            unpriced_tokens: u.unpriced_tokens,
            cached_input_tokens: u.cached_input_tokens,
            cache_write_input_tokens: u.cache_write_input_tokens,
        }
    }
}

impl From<&Usage> for pb::Usage {
    fn from(u: &Usage) -> Self {
        Self {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cost_usd: u.cost_usd(),
            unpriced_tokens: u.unpriced_tokens,
            cached_input_tokens: u.cached_input_tokens,
            cache_write_input_tokens: u.cache_write_input_tokens,
        }
    }
}

/// What one task spent: the one definition of a task's usage, which every view reads
/// and labels the same way (`taskwire get` and `ls`, a result, `watch --tree`, the
/// dashboard's nodes and results).
///
/// - `own`: the task's own model calls (its steps, compaction summaries and title) over
///   all its recorded attempts, retried ones included; descendants excluded.
/// - `subtree`: `own` plus every descendant's `own`.
///
/// Both count recorded results only: a running attempt's calls are in its progress
/// events (`step_finished`) until its result is recorded. The store keeps `own` on
/// each task row and sums `subtree` over the tree in one query; the API carries them
/// as `Task.usage` and `Task.subtree_usage`, and on a finished task's result (`Get`,
/// `List`, `Watch`) as `TaskResult.own_usage` and `TaskResult.usage`. A worker's own
/// report of an attempt (its calls plus its children's results) never reaches a view.
///
/// `U` is [`Usage`] in the coordinator, `pb::Usage` in the views, which show what the
/// server sent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TaskUsage<U = Usage> {
    pub own: U,
    pub subtree: U,
}

impl TaskUsage {
    /// Sets it on the API view of a task, and on its result when it has one.
    pub fn set_on_task(&self, t: &mut pb::Task) {
        t.usage = Some(pb::Usage::from(&self.own));
        t.subtree_usage = Some(pb::Usage::from(&self.subtree));
        if let Some(r) = &mut t.result {
            self.set_on_result(r);
        }
    }

    /// Sets it on a finished task's result, in place of the attempt's own report.
    pub fn set_on_result(&self, r: &mut pb::TaskResult) {
        r.own_usage = Some(pb::Usage::from(&self.own));
        r.usage = Some(pb::Usage::from(&self.subtree));
    }
}

impl TaskUsage<pb::Usage> {
    /// As `Get` and `List` carry it on a task.
    pub fn of_task(t: &pb::Task) -> Self {
        Self {
            own: t.usage.unwrap_or_default(),
            subtree: t.subtree_usage.unwrap_or_default(),
        }
    }

    /// As `Get`, `List` and `Watch` carry it on a finished task's result.
    pub fn of_result(r: &pb::TaskResult) -> Self {
        Self {
            own: r.own_usage.unwrap_or_default(),
            subtree: r.usage.unwrap_or_default(),
        }
    }

    /// `own 330, subtree 770 tokens` (input and output together): how every text view
    /// labels it.
    pub fn tokens_line(&self) -> String {
        let tokens = |u: &pb::Usage| u.input_tokens.saturating_add(u.output_tokens);
        format!(
            "own {}, subtree {} tokens",
            tokens(&self.own),
            tokens(&self.subtree)
        )
    }
}

/// Limits on what a subtree may spend. Either or both may be set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub max_cost_picousd: Option<u64>,
    pub max_tokens: Option<u64>,
}

impl Budget {
    /// Reads the submit's `max_cost_usd` and `max_tokens`: a negative, NaN or infinite
    /// cost is refused naming the field.
    pub fn from_wire(
        max_cost_usd: Option<f64>,
        max_tokens: Option<u64>,
    ) -> Result<Self, ProtocolError> {
        if let Some(usd) = max_cost_usd
            && !(usd.is_finite() && usd >= 0.0)
        {
            return Err(ProtocolError::invalid(
                "max_cost_usd",
                format!("must be a finite number of dollars, zero or more (got {usd})"),
            ));
        }
        Ok(Self {
            max_cost_picousd: max_cost_usd.map(usd_to_picousd),
            max_tokens,
        })
    }

    /// No limit set.
    pub fn is_unlimited(&self) -> bool {
        self.max_cost_picousd.is_none() && self.max_tokens.is_none()
    }

    /// The cost limit in US dollars.
    pub fn max_cost_usd(&self) -> Option<f64> {
        #[allow(clippy::cast_precision_loss)]
        self.max_cost_picousd
            .map(|pico| pico as f64 / PICO_USD_PER_USD)
    }

    /// The stricter of two budgets, limit by limit: a child may narrow its parent's
    /// budget, never widen it.
    pub fn narrowed_by(self, other: Self) -> Self {
        let min = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Self {
            max_cost_picousd: min(self.max_cost_picousd, other.max_cost_picousd),
            max_tokens: min(self.max_tokens, other.max_tokens),
        }
    }

    /// The limit `spent` reached, named as the submit field that set it: `None` while
    /// the budget lasts.
    pub fn exceeded_by(&self, spent: &Usage) -> Option<&'static str> {
        if self.max_tokens.is_some_and(|max| spent.tokens() >= max) {
            return Some("max_tokens");
        }
        if self
            .max_cost_picousd
            .is_some_and(|max| spent.cost_picousd >= max)
        {
            return Some("max_cost_usd");
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_with_only_unpriced_calls_has_no_cost() {
        let unpriced = Usage {
            input_tokens: 10,
            output_tokens: 5,
            cost_picousd: 0,
            unpriced_tokens: 15,
            cache_write_input_tokens: 0,
            cached_input_tokens: 0,
        };
        assert_eq!(unpriced.cost_usd(), None);
        let free = Usage {
            unpriced_tokens: 0,
            ..unpriced
        };
        assert_eq!(free.cost_usd(), Some(0.0));
        let wire = pb::Usage::from(&unpriced);
        assert_eq!(wire.cost_usd, None);
        assert_eq!(Usage::from(wire), unpriced);
    }

    #[test]
    fn cost_survives_the_wire_exactly() {
        let usage = Usage {
            input_tokens: 1000,
            output_tokens: 500,
            cost_picousd: 6_000_000_000,
            unpriced_tokens: 0,
            cache_write_input_tokens: 0,
            cached_input_tokens: 0,
        };
        let wire = pb::Usage::from(&usage);
        assert_eq!(wire.cost_usd, Some(0.006));
        assert_eq!(Usage::from(wire), usage);
    }

    #[test]
    fn a_tasks_usage_travels_as_own_and_subtree_on_the_task_and_its_result() {
        let usage = TaskUsage {
            own: Usage {
                input_tokens: 300,
                output_tokens: 30,
                ..Usage::default()
            },
            subtree: Usage {
                input_tokens: 700,
                output_tokens: 70,
                ..Usage::default()
            },
        };
        let mut task = pb::Task {
            result: Some(pb::TaskResult {
                // The attempt's own report, which the recorded usage replaces.
                usage: Some(pb::Usage {
                    input_tokens: 1,
                    ..pb::Usage::default()
                }),
                ..pb::TaskResult::default()
            }),
            ..pb::Task::default()
        };
        usage.set_on_task(&mut task);
        let shown = TaskUsage::of_task(&task);
        let result = TaskUsage::of_result(task.result.as_ref().expect("a result"));
        assert_eq!(shown, result);
        assert_eq!(Usage::from(shown.own), usage.own);
        assert_eq!(Usage::from(shown.subtree), usage.subtree);
        assert_eq!(shown.tokens_line(), "own 330, subtree 770 tokens");
    }

    #[test]
    fn a_negative_or_nan_cost_limit_is_refused_naming_the_field() {
        for bad in [-0.01, f64::NAN, f64::INFINITY] {
            let err = Budget::from_wire(Some(bad), None).expect_err("refused");
            assert_eq!(err.field(), Some("max_cost_usd"), "{bad}");
        }
        assert!(Budget::from_wire(Some(0.0), Some(0)).is_ok());
    }

    #[test]
    fn a_child_budget_narrows_and_never_widens() {
        let parent = Budget {
            max_cost_picousd: Some(100),
            max_tokens: None,
        };
        let child = Budget {
            max_cost_picousd: Some(500),
            max_tokens: Some(7),
        };
        assert_eq!(
            parent.narrowed_by(child),
            Budget {
                max_cost_picousd: Some(100),
                max_tokens: Some(7)
            }
        );
    }

    #[test]
    fn the_budget_names_the_limit_that_was_reached() {
        let budget = Budget {
            max_cost_picousd: Some(1000),
            max_tokens: Some(100),
        };
        let mut spent = Usage {
            input_tokens: 60,
            output_tokens: 39,
            cost_picousd: 999,
            unpriced_tokens: 0,
            cache_write_input_tokens: 0,
            cached_input_tokens: 0,
        };
        assert_eq!(budget.exceeded_by(&spent), None);
        spent.output_tokens = 40;
        assert_eq!(budget.exceeded_by(&spent), Some("max_tokens"));
        spent.output_tokens = 0;
        spent.cost_picousd = 1000;
        assert_eq!(budget.exceeded_by(&spent), Some("max_cost_usd"));
    }
}
