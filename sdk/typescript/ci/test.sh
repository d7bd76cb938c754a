#!/usr/bin/env bash
# Installs a temporary copy of sdk/typescript into a fresh project offline, the way its
# README says (`npm install <sdk folder>`, whose prepare installs the SDK's locked
# dependencies and builds it: buf generate from proto/, tsc), and
# runs its tests and both examples there against the fleet at TASKWIRE_TEST_ADDR
# (token: TASKWIRE_TEST_TOKEN). Also installs `npm pack`'s tarball into a second
# project and runs an example from it. Needs no network once ci/prepare.sh has filled
# npm's cache. Exits nonzero on any failure.
set -euo pipefail
sdk="$(cd "$(dirname "$0")/.." && pwd)"
repo="$(cd "$sdk/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
step() { echo "== $*" >&2; }

npm_q=(--offline --no-audit --no-fund --loglevel=warn)
copy="$tmp/repo/sdk/typescript"
mkdir -p "$copy" "$tmp/project" "$tmp/project-tgz"
tar -C "$sdk" --exclude=./node_modules --exclude=./dist --exclude=./src/gen --exclude='./*.tgz' -cf - . |
  tar -C "$copy" -xf -
cp -r "$repo/proto" "$tmp/repo/proto"

step "install into a fresh project: npm install <sdk folder> (its prepare installs the SDK's locked dependencies and builds it)"
cd "$tmp/project"
npm init -y >/dev/null
npm install "${npm_q[@]}" "$copy"
test -f "$copy/dist/index.js" && test -f "$copy/dist/index.d.ts" && test -f "$copy/src/gen/taskwire/v1/task_service_pb.ts"
cp -r "$sdk/test" "$sdk/examples" .

addr="${TASKWIRE_TEST_ADDR:-}"
status=0
step "node --test (TASKWIRE_TEST_ADDR=${addr:-<unset>})"
# The timeout: a test file whose process does not exit (a stream left open) fails.
timeout 600 node --test --test-concurrency=1 --test-timeout=120000 test/*.test.mjs || status=1
if [ -z "$addr" ]; then
  echo "TASKWIRE_TEST_ADDR is not set: the tests and examples need a fleet" >&2
  exit 1
fi
export TASKWIRE_TOKEN="${TASKWIRE_TEST_TOKEN:-}"
step "examples/submit-and-wait.mjs"
timeout 120 node examples/submit-and-wait.mjs "$addr" "hello from the example" || status=1
step "examples/watch-tree-and-approve.mjs"
timeout 120 node examples/watch-tree-and-approve.mjs "$addr" || status=1

step "npm pack, and install the tarball into another fresh project"
cd "$copy"
npm pack --offline --pack-destination "$tmp" --loglevel=warn >/dev/null
cd "$tmp/project-tgz"
npm init -y >/dev/null
npm install "${npm_q[@]}" "$tmp"/taskwire-client-*.tgz
cp -r "$sdk/examples" .
node -e 'import("@taskwire/client/gen").then((m) => { if (typeof m.TaskService !== "object") process.exit(1); })' || status=1
timeout 120 node examples/submit-and-wait.mjs "$addr" "hello from the tarball" || status=1

if [ "$status" -ne 0 ]; then step "FAILED"; else step "all passed"; fi
exit "$status"
