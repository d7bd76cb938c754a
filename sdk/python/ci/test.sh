#!/usr/bin/env bash
# The Python SDK's checks, without the network: a fresh virtual environment, the SDK
# installed from sdk/python with pip --no-index (a real build: its gRPC modules are
# generated from proto/ by the pinned grpcio-tools, all from the wheels ci/prepare.sh
# downloaded), then its unittest suite from outside the source tree (so the installed
# package is what is tested) and both examples, against the fleet at
# TASKWIRE_TEST_ADDR (bearer token: TASKWIRE_TEST_TOKEN, optional).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
wheels="${TASKWIRE_PY_WHEELS:-$HOME/.cache/taskwire/sdk/python-wheels}"
python="${PYTHON:-python3}"

if [ -z "${TASKWIRE_TEST_ADDR:-}" ]; then
  echo "sdk/python: TASKWIRE_TEST_ADDR is not set (the fleet's gRPC address, e.g." \
    "http://127.0.0.1:50051)" >&2
  exit 2
fi
if [ ! -f "$wheels/.complete" ]; then
  echo "sdk/python: no wheels in $wheels: run sdk/python/ci/prepare.sh (with the network) first" >&2
  exit 2
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/taskwire-sdk-python.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

"$python" -m venv "$tmp/venv"
py="$tmp/venv/bin/python"
# Only the downloaded wheels: no index, no other links, no configuration.
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_NO_CACHE_DIR=1
"$py" -m pip install --quiet --no-index --find-links "$wheels" "$here"

# Tests and examples run from copies in the temp dir: `taskwire` can only come from
# the virtual environment.
cp -R "$here/tests" "$tmp/tests"
cp -R "$here/examples" "$tmp/examples"
cd "$tmp"
"$py" - "$here" <<'PY'
import sys, taskwire, taskwire.v1.task_service_pb2 as pb
src = sys.argv[1]
assert not taskwire.__file__.startswith(src), taskwire.__file__
print(f"sdk/python: testing {taskwire.__file__} ({pb.__name__} generated)", file=sys.stderr)
PY

status=0
"$py" - <<'PY' || status=1
import sys, unittest
suite = unittest.defaultTestLoader.discover("tests", top_level_dir="tests")
result = unittest.TextTestRunner(verbosity=2).run(suite)
failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
skipped = len(result.skipped)
passed = result.testsRun - failed - skipped
print(f"sdk-python: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)
PY

export TASKWIRE_TOKEN="${TASKWIRE_TEST_TOKEN:-}"
for example in submit_and_wait watch_tree_and_approve; do
  echo "sdk/python: examples/$example.py" >&2
  if ! timeout 300 "$py" "examples/$example.py" "$TASKWIRE_TEST_ADDR"; then
    echo "sdk/python: examples/$example.py failed" >&2
    status=1
  fi
done
exit "$status"
