"""Slim objects keep what places a pod by other pods and by its volumes (issue 19): pod affinity and
anti-affinity, topology spread, host ports, claims, the claims' volumes and the namespaces' labels.
On the generated cases of the differential test, with the noise a real object carries, the slim
objects (what the watch cache keeps) make the same pod specs, and the same verdict of every filter,
as the full ones."""

from __future__ import annotations

import copy
from typing import Any

from makeroom_e2e.constraint_cases import NEW_POD, cases

from makeroom.kube.slim import SLIMMERS, Interner
from makeroom.model.scheduling import filter_nodes
from makeroom.snapshot import state_from_objects

Obj = dict[str, Any]


def _noisy(obj: Obj) -> Obj:
    """What the API server returns beside the fields makeroom reads."""
    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    meta["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    meta["resourceVersion"] = "42"
    if out["kind"] == "Pod":
        for c in out["spec"]["containers"]:
            c["env"] = [{"name": "A", "value": "b"}]
            c.setdefault("ports", []).append({"containerPort": 7070, "protocol": "TCP"})  # no hostPort
        out["spec"].setdefault("volumes", []).append({"name": "cfg", "configMap": {"name": "x"}})
    if out["kind"] == "PersistentVolume":
        out["spec"]["mountOptions"] = ["ro"]
        meta["labels"]["owner"] = "team-a"
    return out


def test_slim_objects_place_pods_as_the_full_ones() -> None:
    full: list[Obj] = []
    for case in cases(23, 120):
        full += [_noisy(o) for o in (*case.objects(), case.pod)]
    interner = Interner()
    slim = [s for s in (SLIMMERS[o["kind"]](o, interner) for o in full) if s is not None]
    a = state_from_objects(full, unknown_groups=[])
    b = state_from_objects(slim, unknown_groups=[])
    assert a.namespaces == b.namespaces and a.namespaces
    assert set(a.pods) == set(b.pods)
    for key, pod in a.pods.items():
        assert pod.spec == b.pods[key].spec, key
    # Not vacuous: the cases carry every new field.
    specs = [p.spec for p in a.pods.values()]
    for name in ("pod_affinity", "pod_anti_affinity", "topology_spread", "host_ports", "volumes"):
        assert sum(1 for s in specs if getattr(s, name)) >= 5, name
    for key, pod in a.pods.items():
        if pod.name == NEW_POD:
            assert filter_nodes(a, pod) == filter_nodes(b, b.pods[key]), key


def test_claims_are_kept_beside_the_shared_template() -> None:
    """A StatefulSet's pods differ only by their claims: the rest of their slim spec is one object."""
    interner = Interner()

    def replica(i: int) -> Obj:
        return {
            "kind": "Pod",
            "metadata": {"name": f"db-{i}", "namespace": "default"},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-db-{i}"}}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
            },
            "status": {},
        }

    a, b = SLIMMERS["Pod"](replica(0), interner), SLIMMERS["Pod"](replica(1), interner)
    assert a is not None and b is not None
    assert a["spec"]["containers"] is b["spec"]["containers"]
    assert a["spec"]["affinity"] is b["spec"]["affinity"]
    assert a["spec"]["volumes"] != b["spec"]["volumes"]
