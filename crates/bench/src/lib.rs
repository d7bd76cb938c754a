//! `taskwire-bench`: taskwire's cost measured on real processes, as ratios to what the
//! same Postgres and NATS servers do without it.
//!
//! The binary (`src/main.rs`, `make bench`) starts a private nats-server and a private
//! Postgres, a `taskwire coordinator` and `taskwire worker` processes, and the scripted
//! model in its own process (the model is not taskwire), then runs its phases and
//! writes the table to `docs/performance.md`. `src/bin/sandbox.rs` (`make
//! bench-sandbox`) measures the command sandbox; `src/bin/mcp.rs` (`make bench-mcp`) a
//! tool call through MCP against a built-in one.
//!
//! - [`cluster`]: the `taskwire` processes, started as an operator would.
//! - [`cpu`]: CPU time and resident sets of processes, from `/proc`.
//! - [`figures`]: the table's rows, each figure with its ratio to the raw rates.
//! - [`load`]: submits tasks over gRPC and times them as a client sees them.
//! - [`raw`]: the servers' own rates: JetStream publish→pull→ack, Postgres commits.
//! - [`repo_figures`]: the real-task phase's figures, from spans and the worker's log.
//! - [`repo_runs`]: the real-task phase: parent + `explore` child runs in a repository.
//! - [`repo_script`]: what the scripted model answers in those runs.
//! - [`repos`]: the repositories they run in, made once in the benchmark's cache.
//! - [`report`]: the machine and the table, as a Markdown section.
//! - [`scaling`]: `--only scaling`, the table by number of coordinators and workers.
//! - [`statements`]: `--statements`, Postgres's statements per task.
//! - [`timeline`]: `--timeline`, where one task's time goes, from its spans.
//! - [`traffic`]: `--statements`, nats-server's messages per task.

pub mod cluster;
pub mod cpu;
pub mod figures;
pub mod load;
pub mod raw;
pub mod repo_figures;
pub mod repo_runs;
pub mod repo_script;
pub mod report;
pub mod repos;
pub mod scaling;
pub mod stages;
pub mod statements;
pub mod timeline;
pub mod traffic;
