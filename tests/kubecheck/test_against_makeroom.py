"""makeroom's filters (snapshot.state_from_objects, then model.scheduling.filter_nodes) against the
independent checker on the generated cases of the differential test, on paper (no control plane, so
in a few seconds, and as part of the fast tests): both must name the same feasible nodes. (A pod
with spec.nodeName is bound as read, by the API server and by the snapshot alike: the NodeName rule
is in the checker's own tests.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from makeroom_e2e.constraint_cases import NEW_POD, cases

from makeroom.model.scheduling import filter_nodes
from makeroom.snapshot import state_from_objects
from tests.kubecheck import Cluster, feasible_nodes

SEED = 1919
COUNT = 400


def test_makeroom_names_the_nodes_the_checker_names(tmp_path: Path) -> None:
    wrong: list[dict[str, Any]] = []
    outcomes = {"some": 0, "none": 0}
    for case in cases(SEED, COUNT):
        pod = case.pod
        objects = [*case.objects(), pod]
        checker = feasible_nodes(Cluster.of(objects), pod)
        state = state_from_objects(objects, unknown_groups=[])
        makeroom = {
            n: (None if w is None else str(w))
            for n, w in filter_nodes(state, state.pods[f"{case.namespace}/{NEW_POD}"]).items()
        }
        theirs = {n for n, w in checker.items() if w is None}
        mine = {n for n, w in makeroom.items() if w is None}
        outcomes["some" if theirs else "none"] += 1
        if mine != theirs:
            wrong.append({**case.to_json(), "pod": pod, "checker": checker, "makeroom": makeroom})
    if wrong:
        out = tmp_path / f"paper-differential-{SEED}.json"
        out.write_text(json.dumps(wrong, indent=1))
        raise AssertionError(f"{len(wrong)} of {COUNT} cases disagree (seed {SEED}): written to {out}")
    assert min(outcomes.values()) > COUNT // 5, outcomes  # both outcomes well represented
