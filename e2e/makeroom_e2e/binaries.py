"""Where e2e/build.sh puts the control-plane binaries, and whether they are there."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REQUIRED = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "cluster-autoscaler",
)

CAPACITY_BUFFER_CRD = "autoscaling.x-k8s.io_capacitybuffers.yaml"


class MissingBinariesError(RuntimeError):
    """A required binary is absent: run `bash e2e/build.sh` first."""


def cache_root() -> Path:
    env = os.environ.get("MAKEROOM_E2E_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "makeroom-e2e"


def bin_dir() -> Path:
    return cache_root() / "bin"


@dataclass(frozen=True)
class Binaries:
    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    def has(self, name: str) -> bool:
        p = self.path(name)
        return p.exists() and os.access(p, os.X_OK)

    def missing(self) -> list[str]:
        return [n for n in REQUIRED if not self.has(n)]

    def stages_dir(self) -> Path:
        return self.directory / "kwok-stages"

    def capacity_buffer_crd(self) -> Path | None:
        """The CapacityBuffer CRD (autoscaling.x-k8s.io): the cluster-autoscaler's own, from its source
        that e2e/build.sh extracted into the cache, else Karpenter's copy of the same API
        (e2e/build-karpenter.sh); None when neither is there."""
        crd = CAPACITY_BUFFER_CRD
        found = sorted(self.directory.parent.glob(f"src/ca-*/*/cluster-autoscaler/apis/config/crd/{crd}"))
        if found:
            return found[-1]
        karpenter = self.directory / "karpenter-crds" / crd
        return karpenter if karpenter.exists() else None

    def require(self) -> None:
        missing = self.missing()
        if missing:
            raise MissingBinariesError(
                f"e2e binaries missing in {self.directory}: {', '.join(missing)}. "
                "Build them with `bash e2e/build.sh` (cold: tens of minutes on 2 cores), "
                "or set MAKEROOM_E2E=0 to skip the end-to-end tests explicitly."
            )


def find_binaries() -> Binaries:
    return Binaries(bin_dir())
