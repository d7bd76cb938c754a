#!/usr/bin/env bash
# Runs a command with Postgres and NATS available (see services.sh); stops afterwards
# only the services it started.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=services.sh
source scripts/services.sh
trap stop_started_services EXIT
ensure_services
"$@"
