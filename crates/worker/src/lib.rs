//! taskwire worker (under construction).
