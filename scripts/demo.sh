#!/usr/bin/env bash
# The main job, end to end on one machine: Postgres and NATS (started if not running),
# a coordinator, a worker whose workspace is this repository, and one demo task whose
# live progress and result are printed. Uses TASKWIRE_MODEL_BASE_URL (+ TASKWIRE_MODEL,
# TASKWIRE_MODEL_API_KEY) when set; otherwise a scripted demo model, and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
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

echo "== building taskwire" >&2
cargo build --quiet -p taskwire-cli -p taskwire-test-support --bins
bin="${CARGO_TARGET_DIR:-target}/debug"
mkdir -p "$TW_STATE_DIR"

if [ -z "${TASKWIRE_MODEL_BASE_URL:-}" ]; then
  echo "== no model endpoint configured (TASKWIRE_MODEL_BASE_URL is unset): using the scripted demo model" >&2
  "$bin/taskwire-scripted-model" send_publish >"$TW_STATE_DIR/model.url" 2>"$TW_STATE_DIR/model.log" &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$TW_STATE_DIR/model.url" ] && break; sleep 0.1; done
  export TASKWIRE_MODEL_BASE_URL="$(head -n 1 "$TW_STATE_DIR/model.url")"
  export TASKWIRE_MODEL="${TASKWIRE_MODEL:-scripted-demo}"
  prompt="Find where the outbox relay publishes task requests to JetStream and show me the code."
else
  echo "== model endpoint: $TASKWIRE_MODEL_BASE_URL (model ${TASKWIRE_MODEL:-default})" >&2
  prompt="${TASKWIRE_DEMO_PROMPT:-Find where the outbox relay publishes task requests to JetStream and explain how a relay retry is deduplicated. Cite file paths and line numbers.}"
fi

export TASKWIRE_DATABASE_URL="${TASKWIRE_DATABASE_URL:-${TASKWIRE_PG_ADMIN_URL%/*}/taskwire_demo}"
export TASKWIRE_LISTEN="${TASKWIRE_LISTEN:-127.0.0.1:50051}"
export TASKWIRE_ADDR="http://$TASKWIRE_LISTEN"

echo "== starting the coordinator on $TASKWIRE_LISTEN (logs: $TW_STATE_DIR/coordinator.log)" >&2
"$bin/taskwire" coordinator >"$TW_STATE_DIR/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 150); do "$bin/taskwire" agents >/dev/null 2>&1 && break; sleep 0.2; done
"$bin/taskwire" agents >/dev/null

echo "== starting a worker on $PWD (logs: $TW_STATE_DIR/worker.log)" >&2
"$bin/taskwire" worker --workspace "$PWD" --concurrency 4 >"$TW_STATE_DIR/worker.log" 2>&1 &
pids+=($!)

echo "== agents" >&2
"$bin/taskwire" agents
echo "== submitting to explore: $prompt" >&2
"$bin/taskwire" submit --agent explore --wait "$prompt"
