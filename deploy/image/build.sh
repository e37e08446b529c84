#!/usr/bin/env bash
# `make image`: the makeroom image as an OCI archive, with no daemon and no registry base image.
#   deploy/image/build.sh [OUT]      (default: makeroom-<version>.oci.tar in the working directory)
# The root filesystem is Debian's own packages (mmdebstrap --variant=minbase, python3), makeroom and its
# kube and exact extras are installed from the project's wheel into a venv (pip, PyPI), and umoci packs
# the result as one layer. Reproducible: every time is SOURCE_DATE_EPOCH (default: the last commit's),
# the layer's files are sorted, bytecode is hash-checked, and nothing dated (logs, caches, machine-id)
# is kept, so the same inputs give the same digest (IMAGE_VERIFY=1 builds twice and compares).
# Beside the archive: <archive>.digest (the manifest's digest) and <archive without .tar>.sbom.cdx.json
# (CycloneDX: every Debian and Python package in the image; also inside it, /usr/share/doc/makeroom/).
# Needs root (mmdebstrap's root mode, chroot) and mmdebstrap, umoci; `make image` installs them.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
SUITE="${DEBIAN_SUITE:-bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
VERSION="$("$PYTHON" -c 'import sys,tomllib; print(tomllib.load(open(sys.argv[1],"rb"))["project"]["version"])' "$REPO/pyproject.toml")"
OUT="$(realpath -m "${1:-makeroom-$VERSION.oci.tar}")"
if [[ -z "${SOURCE_DATE_EPOCH:-}" ]]; then
  SOURCE_DATE_EPOCH="$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || echo 1767225600)"
fi
export SOURCE_DATE_EPOCH PYTHONHASHSEED=0 LC_ALL=C.UTF-8 TZ=UTC
CREATED="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
UID_GID=65532
log() { echo "[image $(date -u +%H:%M:%S)] $*" >&2; }

WORK="$(mktemp -d /tmp/makeroom-image.XXXXXX)"
# --one-file-system: never into a mount mmdebstrap may still hold (/dev, /proc) if the build is cut short
trap 'rm -rf --one-file-system "$WORK"' EXIT

log "wheel of makeroom $VERSION"
"$PYTHON" -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$WORK/wheel" "$REPO" >&2
WHEEL="$(ls "$WORK/wheel"/makeroom-*.whl)"
# pip itself is run from its wheel (a wheel is importable) so that the image holds no installer
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps -d "$WORK/pip" "pip>=24" >&2
PIPWHL="$(ls "$WORK/pip"/pip-*.whl)"

log "root filesystem: Debian $SUITE minbase + python3 (mmdebstrap)"
# The hook runs while mmdebstrap still has the chroot set up (resolv.conf, /proc, /dev).
mkdir -p "$WORK/in"
cp "$WHEEL" "$PIPWHL" "$WORK/in/"
# The CA bundle this machine's pip trusts (a proxy's, say) is used for the download only: it is in /in,
# which the image does not keep; the image trusts Debian's ca-certificates.
CERT=
HOST_CA="${PIP_CERT:-${REQUESTS_CA_BUNDLE:-${SSL_CERT_FILE:-}}}"
if [[ -n "$HOST_CA" && -f "$HOST_CA" ]]; then cp "$HOST_CA" "$WORK/in/download-ca.crt"; CERT=/in/download-ca.crt; fi
cat > "$WORK/in/install.sh" <<INSTALL
set -eu
export PYTHONHASHSEED=0 SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
export PIP_DEFAULT_TIMEOUT=180 ${CERT:+PIP_CERT=$CERT}
python3 -m venv --without-pip /opt/makeroom
/opt/makeroom/bin/python /in/$(basename "$PIPWHL")/pip install --quiet --no-compile \
  "/in/$(basename "$WHEEL")[kube,exact]"
# bytecode checked by hash, not by the files' times: the same bytes on every build, and nothing for
# Python to write on a read-only root filesystem
/opt/makeroom/bin/python -m compileall -q -j 1 --invalidation-mode unchecked-hash /opt/makeroom/lib
/opt/makeroom/bin/python -c 'import json, importlib.metadata as m; print(json.dumps(sorted(({"name": d.metadata["Name"], "version": d.version, "license": d.metadata.get("License-Expression") or d.metadata.get("License") or ""} for d in m.distributions()), key=lambda p: p["name"].lower())))' > /in/python-packages.json
INSTALL
mmdebstrap --mode=root --variant=minbase --include=python3,ca-certificates \
  --customize-hook='mkdir -p "$1/in" && cp -a '"$WORK/in"'/. "$1/in/"' \
  --customize-hook='chroot "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 sh /in/install.sh' \
  --customize-hook='cp "$1/in/python-packages.json" '"$WORK/"' && rm -rf "$1/in"' \
  --customize-hook='chroot "$1" dpkg-query -W -f "\${Package}\t\${Version}\t\${Architecture}\t\${source:Package}\n" > '"$WORK/debian-packages.tsv" \
  "$SUITE" "$WORK/rootfs" "$MIRROR" >&2 2> >(grep -v '^I: ' >&2 || true)
ROOT="$WORK/rootfs"

log "the image's user, its SBOM, nothing dated"
echo "makeroom:x:$UID_GID:$UID_GID:makeroom:/nonexistent:/usr/sbin/nologin" >> "$ROOT/etc/passwd"
echo "makeroom:x:$UID_GID:" >> "$ROOT/etc/group"
rm -rf "$ROOT"/var/cache/apt/* "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/log/* "$ROOT"/tmp/* \
  "$ROOT"/var/cache/ldconfig/aux-cache "$ROOT"/var/cache/debconf/*-old "$ROOT"/var/lib/dpkg/*-old \
  "$ROOT"/root/.cache
: > "$ROOT/etc/machine-id"
mkdir -p "$ROOT/usr/share/doc/makeroom"
"$PYTHON" "$HERE/sbom.py" --version "$VERSION" --created "$CREATED" \
  --debian "$WORK/debian-packages.tsv" --python "$WORK/python-packages.json" \
  > "$ROOT/usr/share/doc/makeroom/sbom.cdx.json"
find "$ROOT" -newermt "@$SOURCE_DATE_EPOCH" -print0 | xargs -0r touch --no-dereference --date="@$SOURCE_DATE_EPOCH"

log "layer (sorted, times clamped) and OCI image (umoci)"
tar --create --file "$WORK/layer.tar" --directory "$ROOT" --sort=name --numeric-owner \
  --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime --xattrs --xattrs-exclude='security.selinux' \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime --exclude=./proc/* --exclude=./sys/* \
  --exclude=./dev/* .
umoci init --layout "$WORK/oci"
umoci new --image "$WORK/oci:$VERSION"
umoci raw add-layer --image "$WORK/oci:$VERSION" --history.created "$CREATED" \
  --history.created_by "deploy/image/build.sh (Debian $SUITE minbase, makeroom $VERSION[kube,exact])" \
  "$WORK/layer.tar"
umoci config --image "$WORK/oci:$VERSION" --no-history --created "$CREATED" --os linux --architecture amd64 \
  --config.user "$UID_GID:$UID_GID" --config.workingdir / \
  --config.entrypoint /opt/makeroom/bin/makeroom --config.cmd run \
  --config.env PATH=/opt/makeroom/bin:/usr/local/bin:/usr/bin:/bin \
  --config.env PYTHONDONTWRITEBYTECODE=1 --config.env PYTHONUNBUFFERED=1 --config.env MPLCONFIGDIR=/tmp \
  --config.exposedports 8080/tcp \
  --config.label org.opencontainers.image.title=makeroom \
  --config.label org.opencontainers.image.version="$VERSION" \
  --config.label org.opencontainers.image.created="$CREATED" \
  --config.label org.opencontainers.image.licenses=Apache-2.0
umoci gc --layout "$WORK/oci"
find "$WORK/oci" -print0 | xargs -0 touch --no-dereference --date="@$SOURCE_DATE_EPOCH"
mkdir -p "$(dirname "$OUT")"
tar --create --file "$OUT.part" --directory "$WORK/oci" --sort=name --numeric-owner --owner=0 --group=0 \
  --mtime="@$SOURCE_DATE_EPOCH" --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime .
mv "$OUT.part" "$OUT"
"$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' \
  "$WORK/oci/index.json" > "$OUT.digest"
cp "$ROOT/usr/share/doc/makeroom/sbom.cdx.json" "${OUT%.tar}.sbom.cdx.json"
log "wrote $OUT ($(du -h "$OUT" | cut -f1), $(cat "$OUT.digest"))"
