#!/usr/bin/env bash
# Run with the network (by the repository's setup script): fills npm's cache (the
# default, ~/.npm) with everything sdk/typescript and its tests need, so that
# ci/test.sh can build, install and test the SDK offline. Idempotent.
#
# What it does, in a temporary copy of the repository's sdk/typescript and proto/:
# `npm ci` (the locked tarballs, @bufbuild/buf's platform binary included, and the
# build), `npm pack`, and an install of the tarball into a fresh project (the registry
# documents of the SDK's dependencies, which an install without a lock file reads).
set -euo pipefail
sdk="$(cd "$(dirname "$0")/.." && pwd)"
repo="$(cd "$sdk/../.." && pwd)"

# Done already for this lock file, this Node and this cache: nothing to fetch (so that
# a run without the network, as CI's second setup, passes through).
stamp="$HOME/.cache/taskwire/sdk/typescript.stamp"
stamp_text="$(sha256sum "$sdk/package-lock.json" "$sdk/package.json" | cut -d' ' -f1; node --version; npm config get cache)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_text" ]; then
  echo "sdk/typescript: npm cache already ready" >&2
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

npm_q=(--no-audit --no-fund --loglevel=warn)
mkdir -p "$tmp/repo/sdk/typescript" "$tmp/project"
tar -C "$sdk" --exclude=./node_modules --exclude=./dist --exclude=./src/gen --exclude='./*.tgz' -cf - . |
  tar -C "$tmp/repo/sdk/typescript" -xf -
cp -r "$repo/proto" "$tmp/repo/proto"

cd "$tmp/repo/sdk/typescript"
npm ci "${npm_q[@]}"
# npm ci fetched (and so cached) the optional package of buf's binary for this
# platform: check that it runs.
./node_modules/.bin/buf --version >/dev/null
npm pack --pack-destination "$tmp" --loglevel=warn >/dev/null

cd "$tmp/project"
npm init -y >/dev/null
npm install "${npm_q[@]}" "$tmp"/taskwire-client-*.tgz
node -e 'import("@taskwire/client").then((m) => { if (typeof m.Client !== "function") process.exit(1); })'
mkdir -p "$(dirname "$stamp")"
printf '%s\n' "$stamp_text" >"$stamp"
echo "sdk/typescript: npm cache ready ($(npm config get cache))"
