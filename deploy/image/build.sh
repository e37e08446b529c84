#!/usr/bin/env bash
# `make image`: the makeroom image as an OCI archive, with no daemon and no registry base image.
#   deploy/image/build.sh [OUT]      (default: makeroom-<version>.oci.tar in the working directory)
# Two layers, packed by umoci:
# - the base: Debian's own packages (mmdebstrap --variant=minbase, python3) and a venv in /opt/makeroom
#   holding makeroom's dependencies with its kube and exact extras (pip, PyPI). It depends only on
#   pyproject.toml and this directory, so it is built once and kept in the cache (MAKEROOM_IMAGE_CACHE,
#   default ~/.cache/makeroom-image) under a key of those;
# - makeroom itself, from the project's wheel, and the image's SBOM.
# Reproducible: every time is clamped to SOURCE_DATE_EPOCH (the base's: the last commit that changed its
# inputs; makeroom's: the last commit), files are sorted, bytecode is hash-checked, and nothing dated
# (logs, caches, machine-id) is kept: the same inputs give the same digest (`make image IMAGE_VERIFY=1`
# builds twice, the second time without the cache, and compares).
# Beside the archive: <archive>.digest (the manifest's digest) and <archive without .tar>.sbom.cdx.json
# (CycloneDX: every Debian and Python package in the image; also inside it, /usr/share/doc/makeroom/).
# Needs root (mmdebstrap's root mode, chroot, mounts) and mmdebstrap, umoci: `make image` installs them.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
SUITE="${DEBIAN_SUITE:-bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE="${MAKEROOM_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/makeroom-image}"
toml() { "$PYTHON" -c 'import json,sys,tomllib; p=tomllib.load(open(sys.argv[1],"rb"))["project"]; print(eval(sys.argv[2], {"p": p, "json": json}))' "$REPO/pyproject.toml" "$1"; }
VERSION="$(toml 'p["version"]')"
# What the base installs: the dependencies and the two extras, as pip requirements
REQUIREMENTS="$(toml '"\n".join(p["dependencies"] + p["optional-dependencies"]["kube"] + p["optional-dependencies"]["exact"])')"
OUT="$(realpath -m "${1:-makeroom-$VERSION.oci.tar}")"
commit_time() { git -C "$REPO" log -1 --format=%ct -- "$@" 2>/dev/null || true; }
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(commit_time .)}"
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-1767225600}"
BASE_EPOCH="${BASE_DATE_EPOCH:-$(commit_time pyproject.toml deploy/image)}"
BASE_EPOCH="${BASE_EPOCH:-$SOURCE_DATE_EPOCH}"
export SOURCE_DATE_EPOCH PYTHONHASHSEED=0 LC_ALL=C.UTF-8 TZ=UTC
CREATED="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
UID_GID=65532
log() { echo "[image $(date -u +%H:%M:%S)] $*" >&2; }
# One sorted, time-clamped, owner-numeric tar of a directory (or of the paths listed on stdin).
pack() { # OUT DIR EPOCH [--files-from=-]
  tar --create --file "$1" --directory "$2" --sort=name --numeric-owner --mtime="@$3" --clamp-mtime \
    --xattrs --xattrs-exclude='security.selinux' \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime "${@:4}"
}
clamp() { find "$1" -newermt "@$2" -print0 | xargs -0r touch --no-dereference --date="@$2"; }

WORK="$(mktemp -d /tmp/makeroom-image.XXXXXX)"
# --one-file-system: never into a mount still held (/dev, /proc) if the build is cut short
trap 'rm -rf --one-file-system "$WORK"' EXIT
mkdir -p "$CACHE" "$WORK/in"

# pip is run from its wheel (a wheel is importable), so that the image holds no installer; the CA
# bundle this machine's pip trusts (a proxy's, say) serves the downloads only and stays out of the image,
# which trusts Debian's ca-certificates.
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps -d "$WORK/in" "pip>=24,<27" >&2
PIPWHL="/in/$(basename "$(ls "$WORK/in"/pip-*.whl)")"
HOST_CA="${PIP_CERT:-${REQUESTS_CA_BUNDLE:-${SSL_CERT_FILE:-}}}"
if [[ -n "$HOST_CA" && -f "$HOST_CA" ]]; then cp "$HOST_CA" "$WORK/in/download-ca.crt"; fi
PIPENV="PYTHONHASHSEED=0 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=180 PIP_NO_CACHE_DIR=1"
[[ -f "$WORK/in/download-ca.crt" ]] && PIPENV+=" PIP_CERT=/in/download-ca.crt"
CHROOT_ENV="env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH $PIPENV"

# --- the base layer ------------------------------------------------------------------------------------
BASE_KEY="$(printf '%s\n' "$SUITE" "$MIRROR" "$BASE_EPOCH" "$REQUIREMENTS" | cat - "$HERE"/* | sha256sum | cut -c1-16)"
BASE="$CACHE/base-$BASE_KEY"
[[ -n "${IMAGE_NO_CACHE:-}" ]] && BASE="$WORK/base"   # built afresh, the cache left as it is
if [[ ! -f "$BASE/ok" ]]; then
  log "base layer: Debian $SUITE minbase + python3 (mmdebstrap), makeroom's dependencies (pip)"
  printf '%s\n' "$REQUIREMENTS" > "$WORK/in/requirements.txt"
  cat > "$WORK/in/base.sh" <<INSTALL
set -eu
python3 -m venv --without-pip /opt/makeroom
/opt/makeroom/bin/python $PIPWHL/pip install --quiet --no-compile -r /in/requirements.txt
# bytecode checked by hash, not by the files' times: the same bytes on every build, nothing for Python
# to write on a read-only root filesystem
/opt/makeroom/bin/python -m compileall -q -j 1 --invalidation-mode unchecked-hash /opt/makeroom/lib
INSTALL
  rm -rf "$WORK/rootfs"
  # The hooks run while mmdebstrap still has the chroot set up (resolv.conf, /proc, /dev).
  mmdebstrap --mode=root --variant=minbase --include=python3,ca-certificates \
    --customize-hook='mkdir -p "$1/in" && cp -a '"$WORK/in"'/. "$1/in/"' \
    --customize-hook='chroot "$1" '"$CHROOT_ENV"' sh /in/base.sh' \
    --customize-hook='rm -rf --one-file-system "$1/in"' \
    "$SUITE" "$WORK/rootfs" "$MIRROR" >&2 2> >(grep -v '^I: ' >&2 || true)
  R="$WORK/rootfs"
  echo "makeroom:x:$UID_GID:$UID_GID:makeroom:/nonexistent:/usr/sbin/nologin" >> "$R/etc/passwd"
  echo "makeroom:x:$UID_GID:" >> "$R/etc/group"
  rm -rf "$R"/var/cache/apt/* "$R"/var/lib/apt/lists/* "$R"/var/log/* "$R"/tmp/* \
    "$R"/var/cache/ldconfig/aux-cache "$R"/var/cache/debconf/*-old "$R"/var/lib/dpkg/*-old "$R"/root/.cache
  : > "$R/etc/machine-id"
  clamp "$R" "$BASE_EPOCH"
  mkdir -p "$BASE"
  pack "$BASE/layer.tar.part" "$R" "$BASE_EPOCH" --exclude=./proc/* --exclude=./sys/* --exclude=./dev/* .
  mv "$BASE/layer.tar.part" "$BASE/layer.tar"
  echo "$BASE_KEY" > "$BASE/ok"
  rm -rf --one-file-system "$R"
else
  log "base layer: from the cache ($BASE)"
fi

# --- makeroom's layer ----------------------------------------------------------------------------------
log "makeroom $VERSION: its wheel, installed on the base"
"$PYTHON" -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$WORK/in" "$REPO" >&2
WHEEL="/in/$(basename "$(ls "$WORK/in"/makeroom-*.whl)")"
R="$WORK/rootfs"
mkdir -p "$R"
tar --extract --file "$BASE/layer.tar" --directory "$R" --numeric-owner --same-permissions --xattrs
mkdir -p "$R/in" && cp -a "$WORK/in"/. "$R/in/"
touch --date="@$((BASE_EPOCH + 1))" "$WORK/marker"
cat > "$R/in/makeroom.sh" <<INSTALL
set -eu
/opt/makeroom/bin/python $PIPWHL/pip install --quiet --no-compile --no-deps --no-index "$WHEEL[kube,exact]"
/opt/makeroom/bin/python -m compileall -q -j 1 --invalidation-mode unchecked-hash \
  /opt/makeroom/lib/python3*/site-packages/makeroom
/opt/makeroom/bin/python -c 'import json, importlib.metadata as m; print(json.dumps(sorted(({"name": d.metadata["Name"], "version": d.version, "license": d.metadata.get("License-Expression") or d.metadata.get("License") or ""} for d in m.distributions()), key=lambda p: p["name"].lower())))' > /in/python-packages.json
dpkg-query -W -f '\${Package}\t\${Version}\t\${Architecture}\t\${source:Package}\n' > /in/debian-packages.tsv
INSTALL
# a mount namespace of its own: /dev for the chroot, gone with it
unshare --mount --fork -- sh -ec "mount --rbind /dev '$R/dev' && chroot '$R' $CHROOT_ENV sh /in/makeroom.sh"
mkdir -p "$R/usr/share/doc/makeroom"
"$PYTHON" "$HERE/sbom.py" --version "$VERSION" --created "$CREATED" \
  --debian "$R/in/debian-packages.tsv" --python "$R/in/python-packages.json" \
  > "$R/usr/share/doc/makeroom/sbom.cdx.json"
rm -rf --one-file-system "$R/in"
# the layer: what the install changed (newer than the base's clamped times), with its directories
(cd "$R" && find ./opt/makeroom ./usr/share/doc/makeroom -newer "$WORK/marker" -print) | sort > "$WORK/changed"
clamp "$R" "$SOURCE_DATE_EPOCH"
pack "$WORK/makeroom.tar" "$R" "$SOURCE_DATE_EPOCH" --no-recursion --verbatim-files-from --files-from="$WORK/changed"

log "OCI image (umoci)"
umoci init --layout "$WORK/oci"
umoci new --image "$WORK/oci:$VERSION"
umoci raw add-layer --image "$WORK/oci:$VERSION" --history.created "$(date -u -d "@$BASE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)" \
  --history.created_by "deploy/image/build.sh: Debian $SUITE minbase, python3, makeroom's dependencies" \
  "$BASE/layer.tar"
umoci raw add-layer --image "$WORK/oci:$VERSION" --history.created "$CREATED" \
  --history.created_by "deploy/image/build.sh: makeroom $VERSION[kube,exact]" "$WORK/makeroom.tar"
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
cp "$R/usr/share/doc/makeroom/sbom.cdx.json" "${OUT%.tar}.sbom.cdx.json"
log "wrote $OUT ($(du -h "$OUT" | cut -f1), $(cat "$OUT.digest"))"
