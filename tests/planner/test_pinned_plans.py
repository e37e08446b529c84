"""The planner's decisions on ``makeroom bench plan``'s constrained cluster, pinned: a change that only
makes planning faster must give the same moves (tests/planner/pinned/, written by the code before the
speed-ups of issue 19's cost item). A change of decisions needs a reason, not a regenerated file.

To take a deliberate change, regenerate with ``MAKEROOM_WRITE_PINNED=1 pytest
tests/planner/test_pinned_plans.py`` and review the diff."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from makeroom.bench.plan import Size, generate
from makeroom.planner import Policy, plan
from makeroom.snapshot import state_from_objects

PINNED = Path(__file__).parent / "pinned"
# a third of the workloads spread over three zones and one per node, as the 5,000-node size
SIZE = Size("pinned", 150, 30, pending=30, constrained=True)
POLICIES = {"default": Policy(now=0.0), "per-pod": Policy(now=0.0, joint=False)}


def plans(policy: Policy) -> list[dict[str, Any]]:
    """The plans of the pending pods in tens, as the bench times them, and of all of them at once."""
    state = state_from_objects(generate(SIZE), source="generated")
    pending = sorted(state.pending(), key=lambda p: p.key)
    batches = [pending[i : i + 10] for i in range(0, len(pending), 10)] + [pending]
    out = []
    for batch in batches:
        result = plan(state, policy, pending=batch)
        out.append(
            {
                "placements": [p.to_json() for p in result.placements],
                "moves": [m.to_json() for m in result.moves],
                "unplaceable": [u.to_json() for u in result.unplaceable],
            }
        )
    return out


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_constrained_plans_are_unchanged(name: str) -> None:
    got = plans(POLICIES[name])
    assert sum(len(p["moves"]) for p in got) > 0, "the cluster should need relocations"
    path = PINNED / f"bench-constrained-{name}.json"
    text = json.dumps(got, indent=1, sort_keys=True) + "\n"
    if os.environ.get("MAKEROOM_WRITE_PINNED") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"{path.name}: the plans changed"
