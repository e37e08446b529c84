"""The pure parts of the differential test (no control plane): the generator is deterministic and
keeps its cases apart, and kube-scheduler's decision is read right from a pod."""

from __future__ import annotations

import json
from typing import Any

import pytest
from makeroom_e2e.constraint_cases import CASE_LABEL, HOSTNAME, ZONE, case, cases, rack_key
from makeroom_e2e.differential import verdict

Obj = dict[str, Any]


def test_a_case_is_a_function_of_seed_and_index() -> None:
    assert json.dumps(case(5, 17).to_json(), sort_keys=True) == json.dumps(
        cases(5, 18)[17].to_json(), sort_keys=True
    )
    assert case(5, 17).to_json() != case(6, 17).to_json()


def _terms(pod: Obj) -> list[tuple[str, Obj]]:
    affinity = pod["spec"].get("affinity") or {}
    return [
        (kind, t)
        for kind in ("podAffinity", "podAntiAffinity")
        for t in (affinity.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or ()
    ]


def test_cases_share_no_topology_domain_and_select_only_their_own_pods() -> None:
    for c in cases(11, 200):
        prefix = c.name + "-"
        for node in c.nodes:
            labels = node["metadata"]["labels"]
            assert labels[CASE_LABEL] == c.name and labels[HOSTNAME].startswith(prefix)
            assert ZONE not in labels or labels[ZONE].startswith(prefix)
            assert all(k == rack_key(c.name) for k in labels if k.endswith("/rack"))
        assert c.pod["spec"]["nodeSelector"][CASE_LABEL] == c.name  # pinned to its own nodes
        for pod in (*c.existing, c.pod):
            assert all(v.startswith(prefix) for v in pod["metadata"]["labels"].values())
            for kind, term in _terms(pod):
                assert term["topologyKey"] in (HOSTNAME, ZONE, rack_key(c.name))
                scope = term.get("namespaceSelector")
                own = scope is None or any(
                    v.startswith(prefix) for v in (scope.get("matchLabels") or {}).values()
                )
                if kind == "podAffinity" and not own:
                    # Reaching other cases' namespaces, it must still select by a value of this case.
                    sel = term["labelSelector"]
                    positive = list((sel.get("matchLabels") or {}).values()) + [
                        v
                        for e in sel.get("matchExpressions") or ()
                        if e["operator"] == "In"
                        for v in e["values"]
                    ]
                    assert positive and all(v.startswith(prefix) for v in positive), term


def _pod(**status: Any) -> Obj:
    return {"metadata": {"namespace": "dc-1", "name": "new"}, "spec": {}, "status": status}


def test_the_scheduler_s_decision_is_read_from_the_pod() -> None:
    assert verdict(_pod()) == (False, None)
    bound = _pod()
    bound["spec"]["nodeName"] = "dc-1-n0"
    assert verdict(bound) == (True, "dc-1-n0")
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    assert verdict(_pod(conditions=[unschedulable])) == (True, None)
    with pytest.raises(RuntimeError, match="SchedulerError"):
        verdict(_pod(conditions=[{**unschedulable, "reason": "SchedulerError", "message": "boom"}]))
