#!/usr/bin/env bash
# Downloads, while the network is there, every wheel an offline install of the Python
# SDK needs (its build requirements and its runtime dependencies, pinned, matching
# pyproject.toml) into $TASKWIRE_PY_WHEELS (default
# $HOME/.cache/taskwire/sdk/python-wheels), for ci/test.sh's `pip install --no-index`.
# Idempotent: does nothing when that directory already holds this exact set.
set -euo pipefail

wheels="${TASKWIRE_PY_WHEELS:-$HOME/.cache/taskwire/sdk/python-wheels}"
python="${PYTHON:-python3}"

# Keep in step with pyproject.toml: [build-system] requires pins setuptools and
# grpcio-tools; grpcio and protobuf are the newest within its runtime ranges that
# grpcio-tools 1.78.0 accepts.
pins=(
  "setuptools==80.9.0"
  "wheel==0.45.1"
  "grpcio-tools==1.78.0"
  "grpcio==1.78.0"
  "protobuf==6.33.6"
  "typing-extensions==4.16.0" # grpcio's dependency
)

# The set depends on the pins and on the interpreter (wheels are per Python version
# and platform).
stamp_text="$(printf '%s\n' "${pins[@]}"; "$python" -c 'import sys, sysconfig; print(sys.implementation.cache_tag, sysconfig.get_platform())')"
stamp="$wheels/.complete"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_text" ]; then
  echo "sdk/python: wheels already in $wheels" >&2
  exit 0
fi

mkdir -p "$wheels"
rm -f "$stamp"
# Dependencies included, binary wheels only, so that
# the offline install builds nothing but taskwire itself.
"$python" -m pip download --disable-pip-version-check --only-binary=:all: \
  --dest "$wheels" "${pins[@]}"
printf '%s\n' "$stamp_text" >"$stamp"
echo "sdk/python: wheels in $wheels" >&2
