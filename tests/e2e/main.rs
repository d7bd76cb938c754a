//! End-to-end tests: a real nats-server, a real Postgres database and a scripted model
//! over real HTTP per test; coordinator and workers through their `run()`.

mod backpressure;
mod chaos;
mod commands;
mod containment;
mod dispatch;
mod flow;
mod isolation;
mod lifecycle;
mod retries;
mod secrets;
mod security;
mod sessions;
mod subagents;
mod tls;
mod tree_approvals;
mod validation;
