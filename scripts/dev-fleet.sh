#!/usr/bin/env bash
# A fleet to try the clients against, on one machine, until Ctrl-C: Postgres and NATS
# (started if not running), the scripted model in its `--tree` script (the prompt
# `parent: two children` starts an `asker` child that asks before running a command and
# an `explore` child; any other prompt is answered `done: <prompt>`), a coordinator
# (gRPC on TASKWIRE_LISTEN, default 127.0.0.1:50051; HTTP on TASKWIRE_HTTP_LISTEN,
# default 127.0.0.1:8080) with the definitions in sdk/testdata/config (the `asker`
# agent, the `/greet` command; TASKWIRE_AUTH_TOKENS_FILE is honoured), and a worker.
# Prints the addresses.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
source scripts/services.sh

pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  stop_started_services
}
trap cleanup EXIT
ensure_services

# TASKWIRE_BIN_DIR: run the binaries found there instead of building them.
bin="${TASKWIRE_BIN_DIR:-}"
if [ -z "$bin" ]; then
  cargo build --quiet -p taskwire-cli -p taskwire-test-support --bins
  bin="${CARGO_TARGET_DIR:-target}/debug"
fi
state="$TW_STATE_DIR/dev-fleet"
rm -rf "$state" && mkdir -p "$state/workspace"

"$bin/taskwire-scripted-model" --tree >"$state/model.url" 2>"$state/model.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$state/model.url" ] && break; sleep 0.1; done
export TASKWIRE_MODEL_BASE_URL="$(head -n 1 "$state/model.url")"
export TASKWIRE_MODEL=scripted
export TASKWIRE_NO_TITLES=1
export TASKWIRE_CONFIG_DIR="$PWD/sdk/testdata/config"
export TASKWIRE_DATABASE_URL="${TASKWIRE_DATABASE_URL:-${TASKWIRE_PG_ADMIN_URL%/*}/taskwire_dev_fleet}"
export TASKWIRE_LISTEN="${TASKWIRE_LISTEN:-127.0.0.1:50051}"
export TASKWIRE_HTTP_LISTEN="${TASKWIRE_HTTP_LISTEN:-127.0.0.1:8080}"
export TASKWIRE_ADDR="http://$TASKWIRE_LISTEN"

"$bin/taskwire" coordinator >"$state/coordinator.log" 2>&1 &
pids+=($!)
# Ready when /readyz says so (with or without TASKWIRE_AUTH_TOKENS_FILE).
for _ in $(seq 150); do curl -sf "http://$TASKWIRE_HTTP_LISTEN/readyz" >/dev/null && break; sleep 0.2; done
curl -sf "http://$TASKWIRE_HTTP_LISTEN/readyz" >/dev/null
git -C "$state/workspace" init -q
# The worker's own HTTP listener (health, metrics) on a port of its own.
TASKWIRE_HTTP_LISTEN=127.0.0.1:0 "$bin/taskwire" worker --workspace "$state/workspace" --concurrency 4 >"$state/worker.log" 2>&1 &
pids+=($!)

echo "dev fleet: gRPC $TASKWIRE_ADDR, HTTP http://$TASKWIRE_HTTP_LISTEN, logs in $state (Ctrl-C stops)" >&2
wait "${pids[@]}"
