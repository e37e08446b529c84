#!/usr/bin/env bash
# Build Karpenter with its KWOK cloud provider (sigs.k8s.io/karpenter/kwok, the released module) for
# makeroom's end-to-end tests, and copy its CRDs out of the module.
#
# Same cache and discipline as e2e/build.sh: the cache root holds GOCACHE, GOMODCACHE and bin/;
# bin/karpenter.stamp holds a key of the module version, the Go version and the build flags, and a
# warm run whose stamp matches (and whose CRDs are there) builds nothing. The CRDs (NodePool,
# NodeClaim, NodeOverlay, CapacityBuffer from kwok/charts/crds; KWOKNodeClass from kwok/apis/crds) go
# to bin/karpenter-crds/. Exit status 1 when the build fails (the log is in logs/karpenter.log).
set -uo pipefail

CACHE="${MAKEROOM_E2E_CACHE:-$HOME/.cache/makeroom-e2e}"
BIN="$CACHE/bin"
LOGDIR="$CACHE/logs"
mkdir -p "$BIN" "$LOGDIR" "$CACHE/gocache" "$CACHE/gomod"

if [[ "${MAKEROOM_E2E:-1}" == "0" ]]; then
  echo "e2e/build-karpenter.sh: MAKEROOM_E2E=0, nothing to build"
  exit 0
fi

GO="${GO:-}"
if [[ -z "$GO" ]]; then
  if command -v go >/dev/null 2>&1; then GO="$(command -v go)"; else GO=/usr/local/go/bin/go; fi
fi
if [[ ! -x "$GO" ]]; then
  echo "e2e/build-karpenter.sh: no Go toolchain found (set GO=/path/to/go)" >&2
  exit 1
fi

export GOCACHE="$CACHE/gocache"
export GOMODCACHE="$CACHE/gomod"
export CGO_ENABLED=0
export GOTOOLCHAIN=local
unset GOFLAGS  # `go install module@version` builds with the module's own go.mod

MODULE="sigs.k8s.io/karpenter"
VERSION="${KARPENTER_VERSION:-v1.14.1}"  # v1.15 needs a newer Go than this machine's
FLAGS="-trimpath -ldflags=-s -w"
GOVERSION="$("$GO" env GOVERSION)"
KEY="$(echo "karpenter $MODULE/kwok@$VERSION $GOVERSION $FLAGS" | sha256sum | cut -d' ' -f1)"
CRDS="$BIN/karpenter-crds"

log() { echo "[e2e/build-karpenter $(date +%H:%M:%S)] $*"; }

if [[ -x "$BIN/karpenter" && "$(cat "$BIN/karpenter.stamp" 2>/dev/null)" == "$KEY" ]] \
   && compgen -G "$CRDS/*.yaml" >/dev/null; then
  log "karpenter $VERSION: up to date"
  exit 0
fi

log "karpenter $VERSION (kwok provider): building (log: $LOGDIR/karpenter.log)"
t0=$(date +%s)
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# GOBIN of its own: the command is named kwok, like KWOK's own binary in bin/.
if ! GOBIN="$out" "$GO" install -trimpath "-ldflags=-s -w" "$MODULE/kwok@$VERSION" >"$LOGDIR/karpenter.log" 2>&1; then
  log "karpenter: FAILED, see $LOGDIR/karpenter.log"
  tail -20 "$LOGDIR/karpenter.log"
  exit 1
fi
mv -f "$out/kwok" "$BIN/karpenter"

src="$GOMODCACHE/$MODULE@$VERSION"
rm -rf "$CRDS"
mkdir -p "$CRDS"
cp "$src"/kwok/charts/crds/*.yaml "$src"/kwok/apis/crds/*.yaml "$CRDS/"
chmod -R u+w "$CRDS"
echo "$KEY" >"$BIN/karpenter.stamp"
log "karpenter: ok in $(( $(date +%s) - t0 )) s; CRDs in $CRDS"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) build-karpenter.sh $(( $(date +%s) - t0 ))s" >>"$LOGDIR/timings.txt"
