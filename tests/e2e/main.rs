//! End-to-end tests: a real nats-server, a real Postgres database and a scripted model
//! over real HTTP per test; coordinator and workers through their `run()`.

mod backpressure;
mod chaos;
mod commands;
mod compaction;
mod containment;
mod context;
mod cost;
mod deploy_chart;
mod discovery;
mod dispatch;
mod drain;
mod flow;
mod hidden_subagents;
mod inherited_permissions;
mod isolation;
mod large_patches;
mod lifecycle;
mod metrics;
mod nats_permissions;
mod outputs;
mod reflection;
mod retries;
mod secrets;
mod security;
mod sessions;
mod subagents;
mod subtrees;
mod titles;
mod tls;
mod traces;
mod tree_approvals;
mod tree_edits;
mod validation;
mod workspaces;
