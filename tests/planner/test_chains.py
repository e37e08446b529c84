"""What the rule against chains costs (issue 22, item 2): when the chosen plan buys a node, ``makeroom
plan`` says whether a plan that moves pods to a node pods leave (its arrivals after its departures)
would buy less, and at how many more moves; in its text and in the JSON's ``chains`` key."""

from __future__ import annotations

import pytest

from makeroom.bench.midsize import midsize
from makeroom.model.view import ClusterView
from makeroom.planner import Policy, plan
from makeroom.planner.budgets import Budgets
from makeroom.planner.chains import chain_cost
from makeroom.planner.context import Context
from makeroom.planner.cpsat import optimum
from makeroom.planner.search import pending_pods
from tests.planner.helpers import SCENARIOS, example, run, run_json

pytest.importorskip("ortools")

CHAIN = SCENARIOS / "chain-saves-a-node.yaml"


def test_plan_says_a_chain_would_need_no_new_node_and_keeps_the_rule() -> None:
    out = run_json("plan", CHAIN)
    assert [(p["pod"], p["new_node_group"]) for p in out["placements"] if p["node"] is None] == [
        ("batch-0", "cpu")
    ]
    assert all(m["to_node"] != "gpu-0" for m in out["moves"])  # the plan itself makes no chain
    chains = out["chains"]
    assert (chains["more_moves"], chains["new_nodes"], chains["saved_per_hour"]) == (1, 0, 0.34)
    text = run("plan", CHAIN).output
    assert "a plan with 1 more move(s) needs no new node ($0.34/h less)" in text


def test_a_plan_that_buys_no_node_has_nothing_to_explain() -> None:
    out = run_json("plan", example("seed-1"), "--at", "70s")
    assert out["placements"] and not out["scale_ups"]
    assert out["chains"] is None


@pytest.mark.parametrize("seed", range(0, 40, 4))
def test_chains_only_ever_help_and_are_reported_only_when_they_do(seed: int) -> None:
    state = midsize(seed).state
    policy = Policy()
    pods = pending_pods(state, policy, None)
    ctx = Context(ClusterView(state), policy, Budgets.of(state))
    strict, relaxed = optimum(ctx, pods), optimum(ctx, pods, chains=True)
    assert strict is not None and relaxed is not None
    assert relaxed.key() <= strict.key()  # the rule only takes plans away
    chosen = plan(state, policy)
    cost = chain_cost(state, policy, chosen)
    if cost is not None:
        assert chosen.scale_ups
        assert cost.new_nodes < sum(chosen.scale_ups.values()) or cost.saved_per_hour > 0


def test_no_chain_claim_where_pods_have_rules_about_other_pods() -> None:
    """constrained-seed-2's pods spread over zones and keep apart: the exact model sees those rules only
    against the cluster as it is, and without the rule against chains it found a plan with no new node
    that the rules refuse (before: plan claimed it saved $0.17/h)."""
    out = run_json("plan", example("constrained-seed-2"))
    assert out["scale_ups"]
    assert out["chains"] is None
