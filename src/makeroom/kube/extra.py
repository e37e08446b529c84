"""Whether the ``kube`` extra is installed: the cluster commands need the Kubernetes client and the
Prometheus client, which a plain ``pip install makeroom`` (as ``make demo`` makes) leaves out."""

from __future__ import annotations

import importlib

MODULES = ("kubernetes", "prometheus_client")
INSTALL = "pip install 'makeroom[kube]'"


def missing() -> list[str]:
    """The extra's modules that cannot be imported (imported, not looked up: a module present but
    broken is as missing as an absent one)."""
    out = []
    for name in MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            out.append(name)
    return out
