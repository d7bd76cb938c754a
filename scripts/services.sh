#!/usr/bin/env bash
# Makes sure Postgres and nats-server are available, starting private instances when
# none runs. Source it, then call `ensure_services`; `stop_started_services` stops only
# what it started. Exports:
#   TASKWIRE_PG_ADMIN_URL        a superuser URL (database `postgres`)
#   TASKWIRE_TEST_DATABASE_URL   the same, for the test harness
#   TASKWIRE_NATS_URL            a NATS server with JetStream
# Settings (env): TASKWIRE_STATE_DIR (default ./.taskwire-run), TASKWIRE_PG_PORT
# (private Postgres port, default 55432), TASKWIRE_PG_DIR (its data directory, default
# /tmp/taskwire-postgres-<port>), TASKWIRE_NATS_PORT (private NATS port, default 54222).
#
# TASKWIRE_PRIVATE_SERVICES=1 takes a fresh machine's view: servers on the default ports
# (5432, 4222) and service URLs inherited from the environment are ignored. The private
# Postgres and nats-server on TASKWIRE_PG_PORT and TASKWIRE_NATS_PORT are used, started
# when nothing answers there, with their data in a new directory under /tmp (unless
# TASKWIRE_PG_DIR is set) that stopping removes; only their URLs are exported.

TW_STATE_DIR="${TASKWIRE_STATE_DIR:-$PWD/.taskwire-run}"
TW_PG_PORT="${TASKWIRE_PG_PORT:-55432}"
TW_NATS_PORT="${TASKWIRE_NATS_PORT:-54222}"
# Outside the checkout: the postgres user must be able to reach it (root's home is 0700).
TW_PG_DIR="${TASKWIRE_PG_DIR:-/tmp/taskwire-postgres-$TW_PG_PORT}"
TW_NATS_DIR="$TW_STATE_DIR/nats"
TW_PRIVATE="${TASKWIRE_PRIVATE_SERVICES:-}"
TW_STARTED=()
# The directory a private run keeps its services' data in; created on first use.
TW_RUN_DIR=""

tw_log() { echo "[services] $*" >&2; }

tw_as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    tw_log "need root to run: $*"; return 1; fi
}

tw_apt_install() {
  tw_log "installing $* (apt-get)"
  tw_as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  tw_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

tw_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

tw_pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

tw_pg_works() { # $1 = url
  command -v psql >/dev/null && psql "$1" -Atqc 'select 1' >/dev/null 2>&1
}

# A new directory under /tmp, readable by the postgres user, for a private run's data.
tw_private_dirs() {
  if [ -z "$TW_RUN_DIR" ]; then
    TW_RUN_DIR="$(mktemp -d /tmp/taskwire-services-XXXXXX)"
    chmod 755 "$TW_RUN_DIR"
    if [ -z "${TASKWIRE_PG_DIR:-}" ]; then TW_PG_DIR="$TW_RUN_DIR/postgres"; fi
    TW_NATS_DIR="$TW_RUN_DIR/nats"
  fi
}

ensure_postgres() {
  if ! command -v psql >/dev/null || [ -z "$(tw_pg_bin)" ]; then tw_apt_install postgresql; fi
  local shared="postgres://postgres@127.0.0.1:5432/postgres"
  local private="postgres://postgres@127.0.0.1:${TW_PG_PORT}/postgres"
  if [ -n "$TW_PRIVATE" ]; then
    unset TASKWIRE_PG_ADMIN_URL TASKWIRE_TEST_DATABASE_URL
  fi
  if [ -n "${TASKWIRE_PG_ADMIN_URL:-}" ] && tw_pg_works "$TASKWIRE_PG_ADMIN_URL"; then
    :
  elif [ -z "$TW_PRIVATE" ] && tw_pg_works "$shared"; then
    TASKWIRE_PG_ADMIN_URL="$shared"
  elif tw_pg_works "$private"; then
    TASKWIRE_PG_ADMIN_URL="$private"
  else
    if [ -n "$TW_PRIVATE" ]; then tw_private_dirs; fi
    local bin dir; bin="$(tw_pg_bin)"; dir="$TW_PG_DIR"
    if [ ! -f "$dir/PG_VERSION" ]; then
      tw_log "initialising a private postgres in $dir"
      mkdir -p "$dir"; chmod 700 "$dir"
      if [ "$(id -u)" -eq 0 ]; then chown -R postgres "$dir"; fi
      tw_pg_user "$bin/initdb" -D "$dir" -U postgres --auth=trust >/dev/null
    fi
    tw_log "starting a private postgres on port $TW_PG_PORT"
    tw_pg_user "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w \
      -o "-p $TW_PG_PORT -k $dir -c listen_addresses=127.0.0.1 -c max_connections=400 -c fsync=off" start >/dev/null
    TW_STARTED+=("postgres")
    TASKWIRE_PG_ADMIN_URL="$private"
  fi
  export TASKWIRE_PG_ADMIN_URL
  export TASKWIRE_TEST_DATABASE_URL="${TASKWIRE_TEST_DATABASE_URL:-$TASKWIRE_PG_ADMIN_URL}"
  tw_log "postgres: $TASKWIRE_PG_ADMIN_URL"
}

# initdb and pg_ctl refuse to run as root.
tw_pg_user() {
  if [ "$(id -u)" -eq 0 ]; then su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; else "$@"; fi
}

ensure_nats() {
  if ! command -v nats-server >/dev/null; then tw_apt_install nats-server; fi
  if [ -n "$TW_PRIVATE" ]; then
    unset TASKWIRE_NATS_URL
  fi
  if [ -n "${TASKWIRE_NATS_URL:-}" ]; then
    :
  elif [ -z "$TW_PRIVATE" ] && tw_port_open 4222; then
    TASKWIRE_NATS_URL="nats://127.0.0.1:4222"
  elif tw_port_open "$TW_NATS_PORT"; then
    TASKWIRE_NATS_URL="nats://127.0.0.1:$TW_NATS_PORT"
  else
    if [ -n "$TW_PRIVATE" ]; then tw_private_dirs; fi
    mkdir -p "$TW_NATS_DIR"
    tw_log "starting a private nats-server on port $TW_NATS_PORT"
    nats-server -js -a 127.0.0.1 -p "$TW_NATS_PORT" -sd "$TW_NATS_DIR" \
      -l "$TW_NATS_DIR/server.log" -P "$TW_NATS_DIR/pid" &
    for _ in $(seq 100); do tw_port_open "$TW_NATS_PORT" && break; sleep 0.1; done
    TW_STARTED+=("nats")
    TASKWIRE_NATS_URL="nats://127.0.0.1:$TW_NATS_PORT"
  fi
  export TASKWIRE_NATS_URL
  tw_log "nats: $TASKWIRE_NATS_URL"
}

ensure_services() {
  ensure_postgres
  ensure_nats
}

stop_started_services() {
  local s pid
  for s in "${TW_STARTED[@]}"; do
    case "$s" in
      postgres)
        tw_log "stopping the private postgres"
        tw_pg_user "$(tw_pg_bin)/pg_ctl" -D "$TW_PG_DIR" -m fast stop >/dev/null || true ;;
      nats)
        tw_log "stopping the private nats-server"
        if [ -f "$TW_NATS_DIR/pid" ]; then
          pid="$(cat "$TW_NATS_DIR/pid")"
          kill "$pid" 2>/dev/null || true
          # Its store is removed below: wait until it no longer writes there.
          for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        fi ;;
    esac
  done
  TW_STARTED=()
  if [ -n "$TW_RUN_DIR" ]; then
    rm -rf "$TW_RUN_DIR"
    TW_RUN_DIR=""
  fi
}
