"""Issue 22, item 3: the default search places every pod the exact joint search places, on 300
generated mid-size problems of varied shapes (``midsize(seed, varied=True)``: requests, priorities
100-1000, a second CPU group, GPU groups tainted each on its own, budgets by minAvailable too, 2-5
pods waiting). Compared by priority level: at each level the default places at least as many pods.
Both plans are checked for feasibility independently (tests/planner/feasibility.py).

Seed 13 was the last miss (issue 22): of four pods of priority 500 the optimum leaves one pending
so that the other three fit, one pod's leaving pods sent to the new node another is bought rather than
to the existing room a third needs; the joint improvement now tries that victim set
(``joint.options``, apart) and decides the pending pods again after it.
The seeds are split into chunks so that pytest-xdist spreads them; CP-SAT runs with a small
deterministic budget (its plan may then be short of the optimum, which only makes the check easier
for the default, never wrong)."""

from __future__ import annotations

from collections import Counter

import pytest

from makeroom.bench.midsize import midsize
from makeroom.planner import Plan, Policy, plan
from tests.planner.feasibility import check_feasible

pytest.importorskip("ortools")

SEEDS = 300
CHUNK = 50
DEFAULT = Policy()
EXACT = Policy(exact=True, exact_budget=1.0)


def _placed(result: Plan) -> Counter[int]:
    return Counter(p.pod.priority for p in result.placements)


@pytest.mark.parametrize("start", range(0, SEEDS, CHUNK))
def test_the_default_search_places_every_pod_the_exact_search_places(start: int) -> None:
    misses = set()
    for seed in range(start, start + CHUNK):
        state = midsize(seed, varied=True).state
        default, exact = plan(state, DEFAULT), plan(state, EXACT)
        check_feasible(state, default, DEFAULT)
        check_feasible(state, exact, EXACT)
        mine, best = _placed(default), _placed(exact)
        if any(mine[level] < n for level, n in best.items()):
            misses.add(seed)
    assert not misses, f"the default search places fewer pods than the exact one on seeds {sorted(misses)}"
