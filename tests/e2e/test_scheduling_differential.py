"""The differential test of issue 19: generated scheduling cases on the real control plane, where
kube-scheduler's decision on each new pod is compared with two verdicts computed on the same objects:

1. the independent checker (tests/kubecheck), written from the Kubernetes rules over the raw objects;
2. makeroom: the objects read as `makeroom plan --kubeconfig` reads them (read_objects, slim; the
   new pods slimmed as the watch cache slims a pod it is told of), made a ClusterState by
   `state_from_objects` as the watch cache makes it (a node group nothing bounds is fixed at its
   nodes), then `makeroom.model.scheduling.filter_nodes`.

A case agrees when kube bound the pod to a node both verdicts find feasible, or left it Pending
(PodScheduled=False, Unschedulable) and both find no node; and the two verdicts name the same feasible
nodes. Any disagreement fails the test with the seed and every disagreeing case (its objects, kube's
decision and both verdicts) written to a file that the message names. MAKEROOM_DIFF_SEED picks another
seed, MAKEROOM_DIFF_CASES another number of cases.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from makeroom_e2e import ControlPlane
from makeroom_e2e.constraint_cases import NEW_POD, Case, cases
from makeroom_e2e.differential import Observed, delete_batch, run_batch
from tests.kubecheck import Cluster, feasible_nodes

pytestmark = pytest.mark.e2e

SEED = int(os.environ.get("MAKEROOM_DIFF_SEED", "19"))
CASES = int(os.environ.get("MAKEROOM_DIFF_CASES", "520"))
BATCH = 130
Obj = dict[str, Any]


@dataclass
class Row:
    case: Case
    kube: str | None
    checker: dict[str, str | None]
    makeroom: dict[str, str | None]

    def problems(self) -> list[str]:
        out = []
        for who, verdict in (("checker", self.checker), ("makeroom", self.makeroom)):
            fits = sorted(n for n, why in verdict.items() if why is None)
            if self.kube is None and fits:
                out.append(f"kube left the pod Pending; {who} finds {fits}")
            elif self.kube is not None and verdict.get(self.kube) is not None:
                out.append(f"kube bound it to {self.kube}; {who} refuses it: {verdict.get(self.kube)}")
        mine = {n for n, why in self.makeroom.items() if why is None}
        theirs = {n for n, why in self.checker.items() if why is None}
        if mine != theirs:
            out.append(f"makeroom finds {sorted(mine)}, the checker {sorted(theirs)}")
        return out

    def to_json(self) -> Obj:
        case_nodes = set(self.case.node_names())
        return {
            **self.case.to_json(),
            "kube": self.kube,
            "checker": {n: w for n, w in self.checker.items() if n in case_nodes},
            "makeroom": {n: w for n, w in self.makeroom.items() if n in case_nodes},
            "problems": self.problems(),
        }


def _makeroom_snapshot(cp: ControlPlane, into: list[Obj]) -> None:
    """The objects as `makeroom plan --kubeconfig` reads them."""
    from makeroom.kube.client import ConnectOptions, connect
    from makeroom.kube.dump import read_objects

    api, _ = connect(ConnectOptions(kubeconfig=str(cp.kubeconfig), qps=500, burst=500))
    try:
        into.extend(read_objects(api, slim=True))
    finally:
        api.close()


def _makeroom_verdicts(snapshot: list[Obj], created: Mapping[str, Obj]) -> dict[str, dict[str, str | None]]:
    from makeroom.kube.slim import SLIMMERS, Interner
    from makeroom.model.scheduling import filter_nodes
    from makeroom.snapshot import state_from_objects

    interner = Interner()
    new = [SLIMMERS["Pod"](p, interner) for p in created.values()]
    state = state_from_objects([*snapshot, *(p for p in new if p is not None)], unknown_groups=[])
    out = {}
    for ns in created:
        verdict = filter_nodes(state, state.pods[f"{ns}/{NEW_POD}"])
        out[ns] = {n: (None if why is None else str(why)) for n, why in verdict.items()}
    return out


def _checker_verdicts(observed: Observed) -> dict[str, dict[str, str | None]]:
    cluster = Cluster.of([*observed.objects, *observed.created.values()])
    return {ns: feasible_nodes(cluster, pod) for ns, pod in observed.created.items()}


def test_makeroom_and_the_checker_agree_with_kube_scheduler(cp: ControlPlane, tmp_path: Path) -> None:
    started = time.monotonic()
    generated = cases(SEED, CASES)
    rows: list[Row] = []
    phases: defaultdict[str, float] = defaultdict(float)
    for start in range(0, len(generated), BATCH):
        batch = generated[start : start + BATCH]
        snapshot: list[Obj] = []
        observed = run_batch(cp, batch, on_snapshot=partial(_makeroom_snapshot, cp, snapshot))
        t = time.monotonic()
        checker = _checker_verdicts(observed)
        phases["checker"] += time.monotonic() - t
        t = time.monotonic()
        makeroom = _makeroom_verdicts(snapshot, observed.created)
        phases["makeroom"] += time.monotonic() - t
        rows += [Row(c, observed.bound_to[c.name], checker[c.name], makeroom[c.name]) for c in batch]
        for phase, seconds in observed.seconds.items():
            phases[phase] += seconds
        t = time.monotonic()
        delete_batch(cp)
        phases["delete"] += time.monotonic() - t
    elapsed = time.monotonic() - started
    bound = sum(1 for r in rows if r.kube is not None)
    print(
        f"\n[differential] seed {SEED}: {len(rows)} cases in {elapsed:.1f}s "
        f"({bound} bound, {len(rows) - bound} Pending); phases: "
        + ", ".join(f"{k} {v:.1f}s" for k, v in phases.items())
    )
    wrong = [r for r in rows if r.problems()]
    if wrong:
        out = tmp_path / f"differential-seed-{SEED}.json"
        out.write_text(json.dumps({"seed": SEED, "cases": [r.to_json() for r in wrong]}, indent=1))
        first = wrong[0]
        pytest.fail(
            f"{len(wrong)} of {len(rows)} cases disagree (seed {SEED}; each case rebuilt by "
            f"makeroom_e2e.constraint_cases.case({SEED}, index)); written to {out}. "
            f"First: case {first.case.index}: {'; '.join(first.problems())}",
            pytrace=False,
        )
    # The generator must keep exercising both outcomes.
    assert 0.25 < bound / len(rows) < 0.85, f"{bound} of {len(rows)} bound: the mix has drifted"
