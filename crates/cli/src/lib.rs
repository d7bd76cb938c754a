//! taskwire cli (under construction).
