#!/usr/bin/env bash
# Installs what building and running taskwire needs on a fresh Debian machine:
# a C toolchain, Postgres, nats-server, promtool (the metrics lint of the e2e tests,
# from Debian's prometheus package without its recommends), Chromium, Node.js and the
# dashboard test's driver (npm playwright-core, pinned by tests/browser/package-lock.json,
# into $HOME/.cache/taskwire/browser), the MCP tests' peers (the reference MCP servers,
# pinned by tests/mcp/package-lock.json, and a venv with the official Python SDK `mcp`,
# pinned by tests/mcp/requirements.txt, into $HOME/.cache/taskwire/mcp), the HTTP API's
# fuzzer (schemathesis, pinned by tests/fuzz/requirements.txt, into
# $HOME/.cache/taskwire/fuzz), what the SDKs' tests install offline (sdk/*/ci/prepare.sh)
# and (if missing) Rust via rustup.
set -euo pipefail
source "$(dirname "$0")/services.sh"
pkgs=()
command -v cc >/dev/null || pkgs+=(build-essential)
command -v curl >/dev/null || pkgs+=(curl ca-certificates)
command -v psql >/dev/null && [ -n "$(tw_pg_bin)" ] || pkgs+=(postgresql)
command -v nats-server >/dev/null || pkgs+=(nats-server)
if [ "${#pkgs[@]}" -gt 0 ]; then tw_apt_install "${pkgs[@]}"; fi
command -v promtool >/dev/null || tw_apt_install --no-install-recommends prometheus
# The dashboard's browser test: Debian's Chromium (never a browser download) and Node.
command -v chromium >/dev/null || tw_apt_install --no-install-recommends chromium
command -v npm >/dev/null || tw_apt_install --no-install-recommends nodejs npm
browser_dir="$HOME/.cache/taskwire/browser"
lock="$(dirname "$0")/../tests/browser/package-lock.json"
if [ ! -d "$browser_dir/node_modules/playwright-core" ] || ! cmp -s "$lock" "$browser_dir/package-lock.json"; then
  tw_log "installing the browser test's npm packages into $browser_dir"
  mkdir -p "$browser_dir"
  cp "$(dirname "$lock")/package.json" "$lock" "$browser_dir/"
  (cd "$browser_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
fi
# The MCP tests' peers: the reference servers (npm) and the official Python SDK (a venv).
mcp_dir="$HOME/.cache/taskwire/mcp"
mcp_lock="$(dirname "$0")/../tests/mcp/package-lock.json"
if [ ! -d "$mcp_dir/node_modules/@modelcontextprotocol/server-everything" ] || ! cmp -s "$mcp_lock" "$mcp_dir/package-lock.json"; then
  tw_log "installing the MCP tests' npm packages into $mcp_dir"
  mkdir -p "$mcp_dir"
  cp "$(dirname "$mcp_lock")/package.json" "$mcp_lock" "$mcp_dir/"
  (cd "$mcp_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
fi
mcp_reqs="$(dirname "$0")/../tests/mcp/requirements.txt"
python3 -c 'import ensurepip, venv' 2>/dev/null || tw_apt_install --no-install-recommends python3-venv
if [ ! -x "$mcp_dir/venv/bin/python" ] || ! cmp -s "$mcp_reqs" "$mcp_dir/requirements.txt"; then
  tw_log "installing the MCP tests' Python SDK into $mcp_dir/venv"
  mkdir -p "$mcp_dir"
  rm -f "$mcp_dir/requirements.txt"
  [ -x "$mcp_dir/venv/bin/python" ] || python3 -m venv "$mcp_dir/venv"
  "$mcp_dir/venv/bin/pip" install -q --disable-pip-version-check -r "$mcp_reqs"
  cp "$mcp_reqs" "$mcp_dir/requirements.txt"
fi
# The HTTP API's fuzzer (schemathesis, pinned by tests/fuzz/requirements.txt).
fuzz_dir="$HOME/.cache/taskwire/fuzz"
fuzz_reqs="$(dirname "$0")/../tests/fuzz/requirements.txt"
if [ ! -x "$fuzz_dir/venv/bin/schemathesis" ] || ! cmp -s "$fuzz_reqs" "$fuzz_dir/requirements.txt"; then
  tw_log "installing the HTTP API's fuzzer into $fuzz_dir/venv"
  mkdir -p "$fuzz_dir"
  rm -f "$fuzz_dir/requirements.txt"
  [ -x "$fuzz_dir/venv/bin/python" ] || python3 -m venv "$fuzz_dir/venv"
  "$fuzz_dir/venv/bin/pip" install -q --disable-pip-version-check -r "$fuzz_reqs"
  cp "$fuzz_reqs" "$fuzz_dir/requirements.txt"
fi
# What the SDKs' tests install offline into a fresh venv and a fresh npm project.
bash "$(dirname "$0")/../sdk/python/ci/prepare.sh"
bash "$(dirname "$0")/../sdk/typescript/ci/prepare.sh"
if ! command -v cargo >/dev/null && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  tw_log "installing rust (rustup, stable)"
  curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --component clippy,rustfmt >/dev/null
fi
tw_log "setup done"
