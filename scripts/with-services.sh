#!/usr/bin/env bash
# Runs a command with Postgres and NATS available (see services.sh); stops afterwards
# only the services it started. With TASKWIRE_PRIVATE_SERVICES=1 the command sees the
# private services' URLs and no other database URL from the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=services.sh
source scripts/services.sh
trap stop_started_services EXIT
if [ -n "${TASKWIRE_PRIVATE_SERVICES:-}" ]; then unset TASKWIRE_DATABASE_URL; fi
ensure_services
"$@"
