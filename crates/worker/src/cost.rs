//! Usage between the session (`taskwire_llm::Usage`) and the wire and result
//! (`taskwire_protocol::Usage`), and the budget a request gives its session.
//!
//! Both usages carry tokens, the cost in pico-dollars and the unpriced tokens;
//! the session's is priced per call by [`taskwire_llm::PricedProvider`] from the
//! worker's model catalogue.

use taskwire_agent::session::SessionBudget;
use taskwire_protocol::{TaskRequest, Usage, pb};

/// A session usage as the protocol's.
pub fn to_protocol(usage: taskwire_llm::Usage) -> Usage {
    Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cost_picousd: usage.cost_picousd,
        unpriced_tokens: usage.unpriced_tokens,
        cached_input_tokens: usage.cached_input_tokens,
        cache_write_input_tokens: usage.cache_write_input_tokens,
    }
}

/// A protocol usage (a child's result) as the session's.
pub fn to_session(usage: Usage) -> taskwire_llm::Usage {
    taskwire_llm::Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cached_input_tokens: usage.cached_input_tokens,
        cache_write_input_tokens: usage.cache_write_input_tokens,
        cost_picousd: usage.cost_picousd,
        unpriced_tokens: usage.unpriced_tokens,
    }
}

/// A session usage on the wire (progress events).
pub fn to_wire(usage: taskwire_llm::Usage) -> pb::Usage {
    pb::Usage::from(&to_protocol(usage))
}

/// The budget the request's subtree runs under.
pub fn budget_of(request: &TaskRequest) -> SessionBudget {
    SessionBudget {
        max_tokens: request.budget.max_tokens,
        max_cost_picousd: request.budget.max_cost_picousd,
        spent_elsewhere: to_session(request.spent_elsewhere),
    }
}
