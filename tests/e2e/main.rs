//! End-to-end tests: a real nats-server, a real Postgres database and a scripted model
//! over real HTTP per test; coordinator and workers through their `run()`.

mod backpressure;
mod chaos;
mod commands;
mod dispatch;
mod flow;
mod lifecycle;
mod retries;
mod secrets;
mod security;
mod sessions;
mod subagents;
mod subtrees;
mod tls;
mod validation;
