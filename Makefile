# taskwire: `make demo` runs the main job; `make test` runs the tests.
# Both start Postgres and nats-server when none is running (see scripts/services.sh).

CARGO ?= cargo
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: demo test lint fmt build release setup bench bench-scaling bench-bundle bench-sandbox bench-mcp bench-limits check-deploy

demo: ## a coordinator, a worker and one task, with live progress
	scripts/demo.sh

test: ## every test, against real Postgres and NATS (installs what is missing first)
	scripts/setup.sh
	scripts/with-services.sh $(CARGO) test --workspace --locked

lint: ## formatting and clippy, warnings as errors
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

fmt:
	$(CARGO) fmt --all

build:
	$(CARGO) build --workspace --locked

release: ## the release binary, built the same way by deploy/Dockerfile
	$(CARGO) build --release --locked -p taskwire-cli

check-deploy: ## Dockerfile, compose file and Helm chart, checked statically
	scripts/deploy-tools.sh >/dev/null
	scripts/check-deploy.sh

setup: ## system packages and Rust for a fresh Debian machine
	scripts/setup.sh

# BENCH_ARGS for the issue's figure: --tasks 10000 --worker-concurrency 256 --submitters 64 --waiting-sessions 10000
# BENCH_ARGS="--only repos" for real tasks alone (parent + explore child runs in this repository and @tabler/icons; --repo-runs, --repos)
bench: ## taskwire processes end to end against raw JetStream and Postgres; writes docs/performance.md (release build)
	$(CARGO) build --release --locked -p taskwire-cli
	$(CARGO) run --release --locked -p taskwire-bench --bin taskwire-bench -- $(BENCH_ARGS)

bench-scaling: ## throughput and CPU per task for 1, 2, 4 coordinators and 1, 2, 4, 8 workers on real processes; writes its section of docs/performance.md (release build)
	$(CARGO) build --release --locked -p taskwire-cli
	$(CARGO) run --release --locked -p taskwire-bench --bin taskwire-bench -- --only scaling $(BENCH_ARGS)

bench-bundle: ## the release binaries, nats-server and Postgres in one tarball, to run the benchmark on a machine that can download nothing (bench-bundle.tar.xz in the target directory)
	$(CARGO) build --release --locked -p taskwire-cli -p taskwire-bench
	bash scripts/bench-bundle.sh

bench-sandbox: ## the command sandbox's cost per command and per running command (release build)
	$(CARGO) run --release --locked -p taskwire-bench --bin sandbox -- --runs 200 --concurrent 100

bench-limits: ## a fleet (one worker, two) against a rate-limited model server, rate configured or learned, on real processes (release build)
	$(CARGO) build --release --locked -p taskwire-cli
	$(CARGO) run --release --locked -p taskwire-bench --bin limits -- --tasks 50 --rate 10

bench-mcp: ## a tool call through MCP (stdio and Streamable HTTP) against a built-in tool, on real processes (release build; peers from scripts/setup.sh)
	$(CARGO) build --release --locked -p taskwire-cli
	$(CARGO) run --release --locked -p taskwire-bench --bin mcp -- --tasks 20 --calls 10
