"""The planner's policy of a controller's configuration: the one place it is derived, for the
controller's rounds (``Relocations.policy``, with what it holds in flight) and for ``makeroom plan``
(with nothing in flight), so that both take the same decision on the same cluster."""

from __future__ import annotations

from makeroom.controller.config import ControllerConfig
from makeroom.controller.scope import NamespaceLabels, Scope
from makeroom.model.state import ClusterState
from makeroom.planner import Policy
from makeroom.planner.consolidate import ConsolidationPolicy

EXACT_BUDGET = 0.5
"""The exact joint search's deterministic time limit (about seconds) in a controller's round: the
first action of a round waits for it, and Karpenter batches pending pods for about a second. Mid-size
problems are proven optimal in tens of milliseconds; past the limit the plan is the best found, never
worse than the default search's that seeds it."""


def relocation_policy(
    config: ControllerConfig,
    now: float,
    *,
    skip: frozenset[str] = frozenset(),
    recently_moved: frozenset[str] = frozenset(),
    pinned: frozenset[str] = frozenset(),
    moves_in_flight: int = 0,
) -> Policy:
    """The policy a round plans with: the config's knobs (cooldown, move limit, make-before-break
    under ``migrate``, the autoscaler's expander), the exact joint search where OR-Tools is installed,
    and what the caller holds out: pending pods not to plan for (``skip``), pods it keeps in place
    (``pinned``: outside the scope, moving for a relocation under way), pods in their cooldown, and
    the moves already in flight."""
    return Policy(
        now=now,
        cooldown=config.cooldown,
        max_moves_in_flight=config.max_moves_in_flight - moves_in_flight,
        skip=skip,
        recently_moved=recently_moved,
        make_before_break=config.strategy.make_before_break,
        pinned=pinned,
        expander=config.autoscaler_expander,
        move_jobs_in=frozenset(config.move_jobs_in),
        # Only where it is cheap (planner/search.py: a default plan the bound proves is kept, a problem
        # past AUTO_EXACT_SIZE is left to the default search), with OR-Tools imported before the first
        # round (kube/runner.py): a round that paid the import took 3.8 s to its first action under
        # load, and Karpenter launched the GPU node seed 3 must not buy (tests/e2e/test_karpenter.py).
        exact_if_available=True,
        exact_budget=EXACT_BUDGET,
    )


def known_namespaces(state: ClusterState) -> NamespaceLabels:
    """Without the live cache's namespaces (a scenario, a dump): each namespace as the state knows
    it, with the name label the API server sets on every namespace."""
    names = {p.namespace for p in state.pods.values()} | set(state.namespaces)
    return {ns: state.namespace_labels(ns) for ns in names}


def plan_policy(
    config: ControllerConfig,
    scope: Scope,
    state: ClusterState,
    now: float,
    namespaces: NamespaceLabels | None = None,
) -> Policy:
    """The policy of a round with nothing under way (``makeroom plan``): the pending pods outside the
    scope's ``room_for`` side are not planned for, the pods outside its ``move`` side stay."""
    labels = namespaces or known_namespaces(state)
    skip = frozenset(p.key for p in state.pending() if scope.room_for.refuses(p, labels) is not None)
    return relocation_policy(config, now, skip=skip, pinned=scope.move.outside(state.pods, labels))


def consolidation_policy(
    config: ControllerConfig,
    now: float,
    *,
    budget: int | None = None,
    recently_moved: frozenset[str] = frozenset(),
    pinned: frozenset[str] = frozenset(),
    skip_nodes: frozenset[str] = frozenset(),
) -> ConsolidationPolicy:
    """The consolidation search's policy of a round: the config's cooldown, saving and move budget
    (``budget``: what is left of it in the window; default all of it), and what the caller holds."""
    return ConsolidationPolicy(
        now=now,
        cooldown=config.cooldown,
        recently_moved=recently_moved,
        max_moves=config.consolidation.max_moves if budget is None else budget,
        min_saving=config.consolidation.min_saving,
        skip_nodes=skip_nodes,
        pinned=pinned,
        expander=config.autoscaler_expander,
    )


def plan_consolidation_policy(
    config: ControllerConfig, scope: Scope, state: ClusterState, now: float
) -> ConsolidationPolicy:
    """The consolidation policy of a round with nothing under way (``makeroom plan``): the pods outside
    the scope's ``move`` side stay."""
    return consolidation_policy(config, now, pinned=scope.move.outside(state.pods, known_namespaces(state)))
