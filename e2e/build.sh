#!/usr/bin/env bash
# Build the real control-plane binaries for makeroom's end-to-end tests: etcd, Kubernetes and KWOK from
# the Go module registry, the cluster-autoscaler from its unchanged upstream source archive in
# shared/vendor (the registry refuses that module).
#
# Idempotent and cached: the cache root holds GOCACHE, GOMODCACHE, src/ (the extracted archive) and bin/.
# Each binary has a stamp file (bin/NAME.stamp) holding a key made of its module version (or the
# archive's sha256), the wrapper go.mod/go.sum, the Go version and the build flags; a warm run whose
# stamps match builds nothing.
#
# Exit status: 0 when every component is present; 1 when one failed (its log is named), the others are
# still built.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${MAKEROOM_E2E_CACHE:-$HOME/.cache/makeroom-e2e}"
BIN="$CACHE/bin"
LOGDIR="$CACHE/logs"
mkdir -p "$BIN" "$LOGDIR" "$CACHE/gocache" "$CACHE/gomod"

if [[ "${MAKEROOM_E2E:-1}" == "0" ]]; then
  echo "e2e/build.sh: MAKEROOM_E2E=0, nothing to build"
  exit 0
fi

GO="${GO:-}"
if [[ -z "$GO" ]]; then
  if command -v go >/dev/null 2>&1; then GO="$(command -v go)"; else GO=/usr/local/go/bin/go; fi
fi
if [[ ! -x "$GO" ]]; then
  echo "e2e/build.sh: no Go toolchain found (set GO=/path/to/go)" >&2
  exit 1
fi

export GOCACHE="$CACHE/gocache"
export GOMODCACHE="$CACHE/gomod"
export CGO_ENABLED=0
export GOFLAGS="-mod=mod -buildvcs=false"
export GOTOOLCHAIN=local

KUBE_VERSION="v1.36.3"
ETCD_VERSION="v3.6.16"
KWOK_VERSION="v0.8.0"

GOVERSION="$("$GO" env GOVERSION)"
BUILD_FLAGS=(-trimpath "-ldflags=-s -w")
status=0

log() { echo "[e2e/build $(date +%H:%M:%S)] $*"; }

stamp_key() { # NAME VERSION MODDIR [extra]
  local name="$1" version="$2" moddir="$3" extra="${4:-}"
  {
    echo "$name $version $GOVERSION ${BUILD_FLAGS[*]} $extra"
    cat "$moddir/go.mod" "$moddir/go.sum" 2>/dev/null
    cat "$moddir"/*.go 2>/dev/null
  } | sha256sum | cut -d' ' -f1
}

is_fresh() { # NAME KEY
  [[ -x "$BIN/$1" && -f "$BIN/$1.stamp" && "$(cat "$BIN/$1.stamp")" == "$2" ]]
}

timed() { # LABEL cmd...
  local label="$1"; shift
  local t0 t1
  t0=$(date +%s)
  "$@"
  local rc=$?
  t1=$(date +%s)
  log "$label: $((t1 - t0)) s (exit $rc)"
  echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $label $((t1 - t0))s exit=$rc" >>"$LOGDIR/timings.txt"
  return $rc
}

# --- Kubernetes: kube-apiserver, kube-controller-manager, kube-scheduler ---------------------------
build_kube() {
  local dir="$HERE/go/kube" minor="${KUBE_VERSION#v1.}"
  minor="${minor%%.*}"
  local vpkg="k8s.io/component-base/version" cpkg="k8s.io/client-go/pkg/version"
  local ld="-s -w"
  local p
  for p in "$vpkg" "$cpkg"; do
    ld+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  local key
  key="$(stamp_key kube "$KUBE_VERSION" "$dir" "$ld")"
  local names=(kube-apiserver kube-controller-manager kube-scheduler) all_fresh=1 n
  for n in "${names[@]}"; do is_fresh "$n" "$key" || all_fresh=0; done
  if [[ $all_fresh == 1 ]]; then log "kube $KUBE_VERSION: up to date"; return 0; fi
  log "kube $KUBE_VERSION: building ${names[*]} (log: $LOGDIR/kube.log)"
  rm -f "$BIN/kube.blocked"
  if (cd "$dir" && timed kube "$GO" build -trimpath -ldflags="$ld" -o "$BIN/" \
        k8s.io/kubernetes/cmd/kube-apiserver \
        k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler) >"$LOGDIR/kube.log" 2>&1; then
    for n in "${names[@]}"; do echo "$key" >"$BIN/$n.stamp"; done
    log "kube: ok"
  else
    log "kube: FAILED, see $LOGDIR/kube.log"; tail -20 "$LOGDIR/kube.log"
    { echo "module: k8s.io/kubernetes $KUBE_VERSION"; tail -20 "$LOGDIR/kube.log"; } >"$BIN/kube.blocked"
    status=1
  fi
}

# --- etcd ---------------------------------------------------------------------------------------------
build_etcd() {
  local dir="$HERE/go/etcd" key
  key="$(stamp_key etcd "$ETCD_VERSION" "$dir")"
  if is_fresh etcd "$key"; then log "etcd $ETCD_VERSION: up to date"; return 0; fi
  log "etcd $ETCD_VERSION: building (log: $LOGDIR/etcd.log)"
  if (cd "$dir" && timed etcd "$GO" build "${BUILD_FLAGS[@]}" -o "$BIN/etcd" .) >"$LOGDIR/etcd.log" 2>&1; then
    echo "$key" >"$BIN/etcd.stamp"; rm -f "$BIN/etcd.blocked"; log "etcd: ok"
  elif [[ -x /usr/bin/etcd ]]; then
    log "etcd: module build FAILED, falling back to Debian's /usr/bin/etcd"
    { echo "module: go.etcd.io/etcd/server/v3 $ETCD_VERSION"; tail -20 "$LOGDIR/etcd.log"; } >"$BIN/etcd.blocked"
    ln -sf /usr/bin/etcd "$BIN/etcd"; echo "debian" >"$BIN/etcd.stamp"
  else
    log "etcd: FAILED, see $LOGDIR/etcd.log (fallback: apt-get install etcd-server)"; tail -20 "$LOGDIR/etcd.log"
    status=1
  fi
}

# --- KWOK -----------------------------------------------------------------------------------------------
copy_kwok_stages() {
  # KWOK's own Stage files (data, read by the harness at run time) from the downloaded module.
  local src="$GOMODCACHE/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
  if [[ -d "$src" ]]; then
    rm -rf "$BIN/kwok-stages"
    mkdir -p "$BIN/kwok-stages"
    cp -r "$src/." "$BIN/kwok-stages/"
    chmod -R u+w "$BIN/kwok-stages"
  fi
}

build_kwok() {
  local dir="$HERE/go/kwok" key
  key="$(stamp_key kwok "$KWOK_VERSION" "$dir")"
  if is_fresh kwok "$key"; then
    [[ -d "$BIN/kwok-stages" ]] || copy_kwok_stages
    log "kwok $KWOK_VERSION: up to date"; return 0
  fi
  log "kwok $KWOK_VERSION: building (log: $LOGDIR/kwok.log)"
  if (cd "$dir" && timed kwok "$GO" build "${BUILD_FLAGS[@]}" -o "$BIN/kwok" sigs.k8s.io/kwok/cmd/kwok) >"$LOGDIR/kwok.log" 2>&1; then
    copy_kwok_stages
    echo "$key" >"$BIN/kwok.stamp"; log "kwok: ok"
  else
    log "kwok: FAILED, see $LOGDIR/kwok.log"; tail -20 "$LOGDIR/kwok.log"
    status=1
  fi
}

# --- cluster-autoscaler (kwok cloud provider) -------------------------------------------------------------
# The Go module registry refuses k8s.io/autoscaler/cluster-autoscaler, so it is built from its unchanged
# upstream source archive in shared/vendor (see its README): extracted into the cache (one folder per
# archive sha256), built from its own module folder (its go.mod replaces the staging modules), with only
# the kwok cloud provider compiled in. Stamped by the archive's sha256, the flags and the Go version.
CA_ARCHIVE_NAME="cluster-autoscaler-1.36.1.tar.gz"
CA_ARCHIVE_SHA256="53bddbcc0c57e6a6630dfd3af5c60b5937a41a1bc4ece331fc88b691ea2dce21"
CA_PREFIX="autoscaler-cluster-autoscaler-1.36.1"
CA_TAGS="kwok"

ca_archive() { # the archive's path: $MAKEROOM_VENDOR, else shared/vendor beside the project (or beside a worktree's parent)
  local d
  for d in "${MAKEROOM_VENDOR:-}" "$HERE/../../shared/vendor" "$HERE/../../../shared/vendor"; do
    if [[ -n "$d" && -f "$d/$CA_ARCHIVE_NAME" ]]; then echo "$(cd "$d" && pwd)/$CA_ARCHIVE_NAME"; return 0; fi
  done
  return 1
}

build_autoscaler() {
  local archive sha key src
  if ! archive="$(ca_archive)"; then
    log "cluster-autoscaler: FAILED, source archive $CA_ARCHIVE_NAME not found (looked in \$MAKEROOM_VENDOR, $HERE/../../shared/vendor, $HERE/../../../shared/vendor)"
    status=1; return 1
  fi
  sha="$(sha256sum "$archive" | cut -d' ' -f1)"
  if [[ "$sha" != "$CA_ARCHIVE_SHA256" ]]; then
    log "cluster-autoscaler: FAILED, $archive has sha256 $sha, expected $CA_ARCHIVE_SHA256 (the unchanged upstream release)"
    status=1; return 1
  fi
  key="$(echo "cluster-autoscaler $sha $GOVERSION -tags $CA_TAGS ${BUILD_FLAGS[*]} CGO_ENABLED=$CGO_ENABLED" | sha256sum | cut -d' ' -f1)"
  if is_fresh cluster-autoscaler "$key"; then log "cluster-autoscaler 1.36.1: up to date"; return 0; fi
  src="$CACHE/src/ca-${sha:0:12}"
  if [[ ! -f "$src/.extracted" ]]; then
    rm -rf "$src"; mkdir -p "$src"
    tar -xzf "$archive" -C "$src" && touch "$src/.extracted" || { log "cluster-autoscaler: FAILED to extract $archive"; status=1; return 1; }
  fi
  log "cluster-autoscaler 1.36.1: building from $archive (log: $LOGDIR/autoscaler.log)"
  # -mod=readonly: the module's own go.sum decides every dependency, nothing is re-resolved.
  if (cd "$src/$CA_PREFIX/cluster-autoscaler" && GOFLAGS="-mod=readonly -buildvcs=false" \
        timed cluster-autoscaler "$GO" build -tags "$CA_TAGS" "${BUILD_FLAGS[@]}" -o "$BIN/cluster-autoscaler" .) \
        >"$LOGDIR/autoscaler.log" 2>&1; then
    echo "$key" >"$BIN/cluster-autoscaler.stamp"; rm -f "$BIN/cluster-autoscaler.blocked"
    log "cluster-autoscaler: ok"
  else
    log "cluster-autoscaler: FAILED, see $LOGDIR/autoscaler.log"; tail -20 "$LOGDIR/autoscaler.log"
    status=1
  fi
}

t_start=$(date +%s)
only="${1:-all}"
case "$only" in
  all) build_etcd; build_kwok; build_kube; build_autoscaler ;;
  etcd) build_etcd ;;
  kwok) build_kwok ;;
  kube) build_kube ;;
  autoscaler) build_autoscaler ;;
  *) echo "usage: $0 [all|etcd|kwok|kube|autoscaler]" >&2; exit 2 ;;
esac
log "done in $(( $(date +%s) - t_start )) s; binaries in $BIN"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) build.sh($only) $(( $(date +%s) - t_start ))s" >>"$LOGDIR/timings.txt"
ls -1 "$BIN" | sed 's/^/  /'
exit $status
