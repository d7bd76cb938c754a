//! The session loop against real tools in a temporary workspace. The model is the only
//! test double: a provider that replays scripted answers and records every request.
//!
//! - `flow`: tool calls and results in order, resume from a transcript, concurrency.
//! - `refusals`: denied, not offered, unknown and malformed calls never execute.
//! - `endings`: step limit, cancellation, model errors.

mod endings;
mod flow;
mod refusals;
mod support;
