#!/usr/bin/env bash
# Installs what building and running taskwire needs on a fresh Debian machine:
# a C toolchain, Postgres, nats-server, promtool (the metrics lint of the e2e tests,
# from Debian's prometheus package without its recommends) and (if missing) Rust via
# rustup.
set -euo pipefail
source "$(dirname "$0")/services.sh"
pkgs=()
command -v cc >/dev/null || pkgs+=(build-essential)
command -v curl >/dev/null || pkgs+=(curl ca-certificates)
command -v psql >/dev/null && [ -n "$(tw_pg_bin)" ] || pkgs+=(postgresql)
command -v nats-server >/dev/null || pkgs+=(nats-server)
if [ "${#pkgs[@]}" -gt 0 ]; then tw_apt_install "${pkgs[@]}"; fi
command -v promtool >/dev/null || tw_apt_install --no-install-recommends prometheus
if ! command -v cargo >/dev/null && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  tw_log "installing rust (rustup, stable)"
  curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --component clippy,rustfmt >/dev/null
fi
tw_log "setup done"
