#!/usr/bin/env bash
# Builds the helm CLI from its Go module (helm.sh/helm/v3) into the e2e cache, for the chart tests
# (tests/e2e/test_run_chart.py). Same cache layout as build.sh; nothing is downloaded but Go modules.
set -euo pipefail
VERSION="${HELM_VERSION:-v3.22.0}"
CACHE="${MAKEROOM_E2E_CACHE:-$HOME/.cache/makeroom-e2e}"
mkdir -p "$CACHE/bin"
if [[ -x "$CACHE/bin/helm" ]] && [[ "$(cat "$CACHE/bin/helm.stamp" 2>/dev/null)" == "$VERSION" ]]; then
  echo "helm $VERSION: up to date"; exit 0
fi
cd "$(mktemp -d)"
GOFLAGS=-mod=mod GOCACHE="$CACHE/gocache" GOMODCACHE="$CACHE/gomod" CGO_ENABLED=0 GOBIN="$CACHE/bin" \
  go install -trimpath -ldflags='-s -w' "helm.sh/helm/v3/cmd/helm@$VERSION"
echo "$VERSION" > "$CACHE/bin/helm.stamp"
"$CACHE/bin/helm" version --short
