//! A session's share of its task tree's budget.
//!
//! A submit may limit what a whole subtree spends (`max_tokens`, `max_cost_usd`).
//! Before each model call the session adds up what counts against that limit: what
//! the rest of the tree had spent when the task was submitted (`spent_elsewhere`,
//! reported by the coordinator), its own calls so far and its finished children's
//! whole subtrees. Once that reaches a limit the session makes no further call and
//! ends `budget_exceeded`, with the conversation so far as a resumable record.

use taskwire_llm::Usage;

/// The limits a session runs under; the default has none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionBudget {
    pub max_tokens: Option<u64>,
    /// The cost limit, in pico-dollars (10⁻¹² USD).
    pub max_cost_picousd: Option<u64>,
    /// What the rest of the tree had spent when the task was submitted.
    pub spent_elsewhere: Usage,
}

impl SessionBudget {
    /// Why no further model call may be made when this session and its children
    /// have spent `spent`: a message naming the limit, or `None` while it lasts.
    pub fn exceeded(&self, spent: Usage) -> Option<String> {
        let mut total = self.spent_elsewhere;
        total += spent;
        let tokens = total.input_tokens.saturating_add(total.output_tokens);
        if let Some(max) = self.max_tokens
            && tokens >= max
        {
            return Some(format!(
                "the task tree spent its max_tokens budget ({tokens} of {max} tokens)"
            ));
        }
        if let Some(max) = self.max_cost_picousd
            && total.cost_picousd >= max
        {
            #[allow(clippy::cast_precision_loss)]
            let usd = |pico: u64| pico as f64 / 1e12;
            return Some(format!(
                "the task tree spent its max_cost_usd budget (${} of ${})",
                usd(total.cost_picousd),
                usd(max)
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rest_of_the_tree_counts_against_the_limit() {
        let budget = SessionBudget {
            max_tokens: Some(100),
            max_cost_picousd: None,
            spent_elsewhere: Usage::tokens(60, 0),
        };
        assert_eq!(budget.exceeded(Usage::tokens(20, 19)), None);
        let message = budget.exceeded(Usage::tokens(20, 20)).expect("spent");
        assert!(message.contains("max_tokens"), "{message}");
        assert_eq!(
            SessionBudget::default().exceeded(Usage::tokens(u64::MAX, 1)),
            None
        );
    }
}
