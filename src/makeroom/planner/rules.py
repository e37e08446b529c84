"""The victim rules of design.md: which pods may be moved at all, whatever they make room for."""

from __future__ import annotations

from makeroom.model import DO_NOT_MOVE, OwnerKind, Pod
from makeroom.model.objects import MOVED_AT
from makeroom.planner.budgets import Budgets
from makeroom.planner.types import NotMovable, Policy

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
_FALSE = frozenset({"false", "no", "0", "off"})


def not_movable(pod: Pod, policy: Policy, budgets: Budgets | None = None) -> NotMovable | None:
    """Why the pod may not be moved now, or None when it may be (if its priority is low enough).
    With ``budgets``, a pod whose PodDisruptionBudget allows no disruption now may not be moved."""
    if pod.node is None:
        return NotMovable.NOT_BOUND
    if pod.terminating:
        return NotMovable.TERMINATING
    if pod.owner_kind == OwnerKind.NODE or MIRROR_ANNOTATION in pod.annotations:
        return NotMovable.MIRROR
    if pod.owner_kind in (OwnerKind.NONE, OwnerKind.JOB) and pod.namespace not in policy.move_jobs_in:
        # A Job's pod evicted may fail its Job (backoffLimit), a bare pod is gone for good: only
        # where the admin says so.
        return NotMovable.NO_CONTROLLER if pod.owner_kind == OwnerKind.NONE else NotMovable.JOB
    if pod.owner_kind == OwnerKind.DAEMON_SET:
        return NotMovable.DAEMON_SET
    if pod.is_system_critical():
        return NotMovable.SYSTEM_CRITICAL
    if pod.spec.local_storage:
        return NotMovable.LOCAL_STORAGE
    if pod.owner_kind == OwnerKind.STATEFUL_SET and pod.spec.claims_volume:
        return NotMovable.PERSISTENT_VOLUME
    opt_out = pod.annotations.get(DO_NOT_MOVE)
    if opt_out is not None and opt_out.strip().lower() not in _FALSE:
        return NotMovable.OPTED_OUT
    if pod.key in policy.pinned:
        return NotMovable.PINNED
    if pod.key in policy.recently_moved:
        return NotMovable.COOLDOWN
    moved_at = pod.annotations.get(MOVED_AT)
    if moved_at is not None:
        try:
            when = float(moved_at)
        except ValueError:
            when = None  # an unreadable stamp does not protect the pod
        if when is not None and policy.now - when < policy.cooldown:
            return NotMovable.COOLDOWN
    if budgets is not None and budgets.blocks(pod, policy.make_before_break):
        return NotMovable.DISRUPTION_BUDGET
    return None
