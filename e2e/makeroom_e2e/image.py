"""makeroom's image for the end-to-end tests (tests/e2e/test_install.py): built by deploy/image/build.sh
(`make image`) into the cache under a key of its inputs, so that a warm run reuses it; unpacked with
umoci; and run as a container runtime would run it, with chroot: its entrypoint and environment from the
image's config, its user, a read-only root filesystem with an emptyDir on /tmp, and the mounts a pod
gets (the ServiceAccount's token, a ConfigMap).

Root is needed (chroot, mounts); each run has a mount namespace of its own (unshare), so nothing it
mounts outlives it or shows outside it."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tarfile
import time
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .binaries import cache_root

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "deploy" / "image" / "build.sh"
# Where a pod's ServiceAccount token is mounted (/var/run is /run in Debian's root filesystem).
SERVICE_ACCOUNT_DIR = "/run/secrets/kubernetes.io/serviceaccount"
# An image no test used for this long is another tree's leftover (a test run lasts under an hour).
UNUSED_IMAGE_S = 6 * 3600


def version() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def inputs_key() -> str:
    """What the image is built from in this repository: the package's sources and metadata, and the
    build itself (Debian's archive and PyPI are read at build time; the SBOM records what they gave)."""
    files = [REPO / "pyproject.toml", REPO / "README.md", *sorted((REPO / "deploy" / "image").iterdir())]
    files += sorted(p for p in (REPO / "src").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    h = hashlib.sha256()
    for path in files:
        h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def tools_missing() -> list[str]:
    return [t for t in ("mmdebstrap", "umoci", "unshare", "chroot") if shutil.which(t) is None]


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One builder at a time: pytest's workers may all want the image at once."""
    (cache_root() / "image").mkdir(parents=True, exist_ok=True)
    with (cache_root() / "image" / ".lock").open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def image_and_bundle(log: Path) -> tuple[Path, Bundle]:
    """This tree's image (built if the cache has none) and its unpacked root filesystem."""
    with _locked():
        archive = built_image(log)
        return archive, unpacked(archive)


def built_image(log: Path) -> Path:
    """The OCI archive of this tree's image: from the cache, else built now (a few minutes)."""
    out = cache_root() / "image" / inputs_key() / f"makeroom-{version()}.oci.tar"
    if (out.parent / "ok").exists():
        (out.parent / "ok").touch()
        return out
    forget_unused_images(out.parent.parent, keep=out.parent)
    out.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as f:
        r = subprocess.run(["bash", str(BUILD), str(out)], stdout=f, stderr=subprocess.STDOUT, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"deploy/image/build.sh failed ({r.returncode}):\n{log.read_text()[-3000:]}")
    (out.parent / "ok").write_text(out.with_name(out.name + ".digest").read_text())
    return out


def forget_unused_images(root: Path, keep: Path) -> None:
    """Other trees' images (a few hundred MB each), once none has used them for a while: a tree whose
    tests are running from its unpacked image in another worktree must not lose it under them."""
    horizon = time.time() - UNUSED_IMAGE_S
    for old in root.glob("[!.]*"):
        ok = old / "ok"
        if old != keep and (not ok.exists() or ok.stat().st_mtime < horizon):
            shutil.rmtree(old, ignore_errors=True)


@dataclass(frozen=True)
class Bundle:
    """An unpacked image: its root filesystem and the runtime config umoci made of the image's config."""

    path: Path

    @property
    def rootfs(self) -> Path:
        return self.path / "rootfs"

    @property
    def config(self) -> dict[str, Any]:
        return dict(json.loads((self.path / "config.json").read_text()))

    @property
    def entrypoint_and_cmd(self) -> list[str]:
        return [str(a) for a in self.config["process"]["args"]]

    @property
    def env(self) -> dict[str, str]:
        return dict(e.split("=", 1) for e in self.config["process"]["env"])

    @property
    def user(self) -> tuple[int, int]:
        u = self.config["process"]["user"]
        return int(u["uid"]), int(u["gid"])


def unpacked(archive: Path) -> Bundle:
    """The image unpacked beside its archive in the cache, once (umoci takes minutes on a busy machine);
    runs mount it read-only."""
    dest = archive.parent / "unpacked"
    if not (dest / "ok").exists():
        shutil.rmtree(dest, ignore_errors=True)
        unpack(archive, dest)
        (dest / "ok").touch()
    return Bundle(dest / "bundle")


def unpack(archive: Path, dest: Path) -> Bundle:
    layout = dest / "layout"
    layout.mkdir(parents=True)
    with tarfile.open(archive) as t:
        t.extractall(layout, filter="tar")
    (tag,) = json.loads((layout / "index.json").read_text())["manifests"][0]["annotations"].values()
    subprocess.run(
        ["umoci", "unpack", "--image", f"{layout}:{tag}", str(dest / "bundle")],
        check=True,
        capture_output=True,
        timeout=900,
    )
    shutil.rmtree(layout)
    return Bundle(dest / "bundle")


def image_config(archive: Path) -> dict[str, Any]:
    """The image's own config (entrypoint, cmd, user, env), read from the archive."""
    with tarfile.open(archive) as t:

        def blob(digest: str) -> dict[str, Any]:
            f = t.extractfile("./blobs/sha256/" + digest.split(":", 1)[1])
            assert f is not None
            return dict(json.load(f))

        index_file = t.extractfile("./index.json")
        assert index_file is not None
        manifest = blob(json.load(index_file)["manifests"][0]["digest"])
        return blob(manifest["config"]["digest"])


def run_argv(
    bundle: Bundle,
    argv: list[str],
    env: Mapping[str, str],
    mounts: Mapping[str, Path] = {},
) -> list[str]:
    """The command line that runs ``argv`` in the image as a runtime would: the image's user and
    environment (``env`` on top), a read-only root, a fresh /tmp, /dev and /proc, and ``mounts``
    (path in the container -> directory on the host, read-only)."""
    root = bundle.rootfs
    uid, gid = bundle.user
    for target in mounts:
        (root / target.lstrip("/")).mkdir(parents=True, exist_ok=True)
    steps = [
        f"mount --bind {root} {root}",
        f"mount -o remount,bind,ro {root}",
        f"mount -t tmpfs -o mode=1777,size=256m tmpfs {root}/tmp",
        f"mount --rbind /dev {root}/dev",
        f"mount -t proc proc {root}/proc",
    ]
    for target, source in mounts.items():
        where = root / target.lstrip("/")
        steps += [f"mount --bind {shlex.quote(str(source))} {where}", f"mount -o remount,bind,ro {where}"]
    full_env = {**bundle.env, **env}
    steps.append(
        shlex.join(
            [
                "exec",
                "chroot",
                f"--userspec={uid}:{gid}",
                "--groups=",
                str(root),
                "/usr/bin/env",
                "-i",
                *(f"{k}={v}" for k, v in full_env.items()),
                *argv,
            ]
        )
    )
    # no --fork: one process from unshare to makeroom (each execs the next), so a signal reaches it alone
    return ["unshare", "--mount", "--", "sh", "-ec", " && ".join(steps)]


def service_account_dir(dest: Path, token: str, ca: Path, namespace: str) -> Path:
    """What the kubelet mounts for a pod's ServiceAccount: token, ca.crt, namespace."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "token").write_text(token)
    shutil.copy(ca, dest / "ca.crt")
    (dest / "namespace").write_text(namespace)
    for f in dest.iterdir():
        os.chmod(f, 0o644)
    os.chmod(dest, 0o755)
    return dest
