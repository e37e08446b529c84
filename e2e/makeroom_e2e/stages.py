"""KWOK Stage configs: upstream's own Stage files from the kwok module, with one change.

The Stage files are read at run time from the kwok module that e2e/build.sh downloaded (the Go module
cache under the e2e cache root), never copied into this repository:
- node: `node/fast/node-initialize.yaml` and `node/heartbeat-with-lease/node-heartbeat-with-lease.yaml`;
- pod: every file of `pod/general/` (create, init containers, ready, complete, delete).
The one change: node-initialize gets a delay read from the node annotation e2e.makeroom.io/provision-delay,
so that a node the autoscaler adds becomes Ready after the scenario's (scaled) provision time. Pods
take their startup delay from upstream's own annotation pod-ready.stage.kwok.x-k8s.io/delay, and are
removed at their deletionTimestamp (upstream pod-delete), i.e. after their termination grace period.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .binaries import Binaries, cache_root

KWOK_MODULE = "sigs.k8s.io/kwok@v0.8.0"
NODE_FILES = ("node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml")
POD_DIR = "pod/general"


def stage_root(binaries: Binaries) -> Path:
    candidates = [binaries.stages_dir(), cache_root() / "gomod" / KWOK_MODULE / "kustomize" / "stage"]
    for c in candidates:
        if (c / NODE_FILES[0]).exists():
            return c
    raise FileNotFoundError(
        f"KWOK Stage files not found (looked in {', '.join(map(str, candidates))}); run `bash e2e/build.sh`"
    )


def _load_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]


def load_stages(binaries: Binaries) -> list[dict[str, Any]]:
    root = stage_root(binaries)
    docs: list[dict[str, Any]] = []
    for rel in NODE_FILES:
        docs.extend(_load_docs(root / rel))
    for f in sorted((root / POD_DIR).glob("*.yaml")):
        if f.name != "kustomization.yaml":
            docs.extend(_load_docs(f))
    for d in docs:
        if d.get("kind") == "Stage" and d.get("metadata", {}).get("name") == "node-initialize":
            d["spec"]["delay"] = {
                "durationMilliseconds": 0,
                "durationFrom": {
                    "expressionFrom": '.metadata.annotations["e2e.makeroom.io/provision-delay"]'
                },
            }
    return [d for d in docs if d.get("kind") == "Stage"]


def write_kwok_config(path: Path, binaries: Binaries) -> Path:
    """Stage documents only: KWOK keeps its own defaulted KwokConfiguration (flags set the rest)."""
    path.write_text(yaml.safe_dump_all(load_stages(binaries), sort_keys=False), encoding="utf-8")
    return path
