#!/usr/bin/env bash
# Build the real control-plane binaries for makeroom's end-to-end tests from the Go module registry.
#
# Idempotent and cached: the cache root holds GOCACHE, GOMODCACHE and bin/. Each binary has a stamp
# file (bin/NAME.stamp) holding a key made of its module version, the wrapper go.mod/go.sum and the
# build flags; a warm run whose stamps match builds nothing.
#
# A component that cannot be had (module refused by the registry, build failure) is recorded in
# bin/NAME.blocked with the module, version and the exact error, and the script goes on with the others.
# Exit status: 0 when every buildable component is present; 1 when a component failed that is not
# recorded as blocked by the registry.
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
CA_MODULE="k8s.io/autoscaler/cluster-autoscaler"
CA_VERSIONS="v1.36.0 v1.35.0"

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
build_autoscaler() {
  local dir="$HERE/go/autoscaler"
  if [[ -x "$BIN/cluster-autoscaler" && -f "$BIN/cluster-autoscaler.stamp" ]]; then
    log "cluster-autoscaler: up to date"; return 0
  fi
  # The registry's answer is final for a session; re-ask at most once a day.
  if [[ -f "$BIN/cluster-autoscaler.blocked" && -z "${MAKEROOM_E2E_RETRY_BLOCKED:-}" ]] \
     && [[ -n "$(find "$BIN/cluster-autoscaler.blocked" -mmin -1440 2>/dev/null)" ]]; then
    log "cluster-autoscaler: blocked (see $BIN/cluster-autoscaler.blocked); set MAKEROOM_E2E_RETRY_BLOCKED=1 to retry"
    return 0
  fi
  local v out found=""
  : >"$LOGDIR/autoscaler.log"
  for v in $CA_VERSIONS; do
    out="$("$GO" list -m -json "$CA_MODULE@$v" 2>&1)"
    echo "\$ go list -m -json $CA_MODULE@$v" >>"$LOGDIR/autoscaler.log"
    echo "$out" >>"$LOGDIR/autoscaler.log"
    if echo "$out" | grep -q '"Version"' && ! echo "$out" | grep -q '"Error"'; then found="$v"; break; fi
  done
  if [[ -z "$found" ]]; then
    {
      echo "module: $CA_MODULE"
      echo "versions tried: $CA_VERSIONS"
      echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
      cat "$LOGDIR/autoscaler.log"
    } >"$BIN/cluster-autoscaler.blocked"
    log "cluster-autoscaler: BLOCKED, the module registry refuses $CA_MODULE (see $BIN/cluster-autoscaler.blocked)"
    return 0
  fi
  mkdir -p "$dir"
  log "cluster-autoscaler $found: building (log: $LOGDIR/autoscaler.log)"
  if [[ ! -f "$dir/go.mod" ]]; then
    printf 'module makeroom.io/e2e/autoscaler\n\ngo 1.26.0\n\nrequire %s %s\n' "$CA_MODULE" "$found" >"$dir/go.mod"
    (cd "$dir" && "$GO" mod tidy) >>"$LOGDIR/autoscaler.log" 2>&1
  fi
  if (cd "$dir" && timed cluster-autoscaler "$GO" build "${BUILD_FLAGS[@]}" -o "$BIN/cluster-autoscaler" "$CA_MODULE") >>"$LOGDIR/autoscaler.log" 2>&1; then
    echo "$found" >"$BIN/cluster-autoscaler.stamp"; rm -f "$BIN/cluster-autoscaler.blocked"
    log "cluster-autoscaler: ok"
  else
    { echo "module: $CA_MODULE $found (build failed)"; tail -20 "$LOGDIR/autoscaler.log"; } >"$BIN/cluster-autoscaler.blocked"
    log "cluster-autoscaler: build FAILED, see $LOGDIR/autoscaler.log"
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
