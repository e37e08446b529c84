"""The scope an admin gives makeroom: for whom it makes room, and whose pods it may move.

Each side admits a pod by its namespace (names, and a label selector on the namespace's labels, which
only an admin can set) and by its PriorityClass (which an admin creates and may keep from tenants with
a ResourceQuota). Nothing a tenant writes on its own objects widens either side.

Defaults (``Scope()``): every namespace but the control plane's own (``kube-system``, ``kube-public``,
``kube-node-lease``, by their immutable ``kubernetes.io/metadata.name`` label), every PriorityClass.
makeroom never moves a pod for one the scheduler would not rank higher anyway (its priority must be
above the victim's); docs/security.md says how to narrow both sides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from makeroom.model import NodeSelectorRequirement, Pod

NAME_LABEL = "kubernetes.io/metadata.name"
"""Set by the API server on every namespace, to its name; nobody can change it."""
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
DEFAULT_SELECTOR = f"{NAME_LABEL} notin ({','.join(SYSTEM_NAMESPACES)})"

NamespaceLabels = Mapping[str, Mapping[str, str]]
"""Namespace name -> its labels."""


class SelectorError(ValueError):
    """A label selector that does not parse; the message says where."""


_TERM = re.compile(
    r"""\s*(?:
        (?P<not>!)\s*(?P<absent>[\w./-]+)                               # !key
      | (?P<setkey>[\w./-]+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)  # key in (a,b)
      | (?P<eqkey>[\w./-]+)\s*(?P<eq>==|=|!=)\s*(?P<value>[\w./-]*)       # key=value
      | (?P<present>[\w./-]+)                                           # key
    )\s*(?:,|$)""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Selector:
    """A label selector as kubectl writes it (``a=b,c!=d,e in (f,g),h notin (i),j,!k``); the empty
    selector matches everything."""

    text: str = ""
    requirements: tuple[NodeSelectorRequirement, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Selector:
        out: list[NodeSelectorRequirement] = []
        at = 0
        text = text.strip()
        while at < len(text):
            m = _TERM.match(text, at)
            if m is None or m.end() == at:
                raise SelectorError(f"cannot read a label selector at {text[at:]!r}")
            at = m.end()
            if m["absent"]:
                out.append(NodeSelectorRequirement(m["absent"], "DoesNotExist"))
            elif m["setkey"]:
                values = tuple(v.strip() for v in m["values"].split(",") if v.strip())
                if not values:
                    raise SelectorError(f"{m['setkey']} {m['op']} (): expected at least one value")
                out.append(NodeSelectorRequirement(m["setkey"], "In" if m["op"] == "in" else "NotIn", values))
            elif m["eqkey"]:
                op = "NotIn" if m["eq"] == "!=" else "In"
                out.append(NodeSelectorRequirement(m["eqkey"], op, (m["value"],)))
            else:
                out.append(NodeSelectorRequirement(m["present"], "Exists"))
        return cls(text, tuple(out))

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return self.text or "(everything)"


@dataclass(frozen=True, slots=True)
class Side:
    """One side of the scope: a pod is admitted when its namespace is among ``namespaces`` (when any
    are named), its namespace's labels match ``selector``, and its PriorityClass is among
    ``priority_classes`` (when any are named)."""

    namespaces: frozenset[str] = frozenset()
    selector: Selector = field(default_factory=lambda: Selector.parse(DEFAULT_SELECTOR))
    priority_classes: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls, namespaces: Iterable[str] = (), selector: str | None = None, priority_classes: Iterable[str] = ()
    ) -> Side:
        """From flags or values: ``selector`` None keeps the default."""
        chosen = Selector.parse(DEFAULT_SELECTOR if selector is None else selector)
        return cls(frozenset(namespaces), chosen, frozenset(priority_classes))

    def refuses(self, pod: Pod, namespaces: NamespaceLabels) -> str | None:
        """Why the pod is outside this side, or None when it is inside."""
        return self.refuses_namespace(pod.namespace, namespaces) or self.refuses_class(pod)

    def refuses_namespace(self, namespace: str, namespaces: NamespaceLabels) -> str | None:
        if self.namespaces and namespace not in self.namespaces:
            return f"namespace {namespace} is not among {', '.join(sorted(self.namespaces))}"
        if self.selector.requirements:
            labels = namespaces.get(namespace)
            if labels is None:
                # Not seen yet (the cache is behind, or it is being made): out until its labels are
                # known. Judged by its name alone, a `notin` selector would let it in before the
                # labels that keep it out are read (fail-open).
                return f"namespace {namespace} is not known yet"
            if not self.selector.matches(labels):
                return f"namespace {namespace} does not match {self.selector}"
        return None

    def refuses_class(self, pod: Pod) -> str | None:
        if self.priority_classes and pod.spec.priority_class not in self.priority_classes:
            shown = pod.spec.priority_class or "(no class)"
            return f"PriorityClass {shown} is not among {', '.join(sorted(self.priority_classes))}"
        return None

    @property
    def everything(self) -> bool:
        return not self.namespaces and not self.selector.requirements and not self.priority_classes

    def outside(self, pods: Mapping[str, Pod], namespaces: NamespaceLabels) -> frozenset[str]:
        """The keys of the pods (by key) outside this side: each namespace judged once, each pod by a
        set lookup (150,000 pods in tens of milliseconds)."""
        if self.everything:
            return frozenset()
        verdict: dict[str, bool] = {}
        classes = self.priority_classes
        out = []
        for key, pod in pods.items():
            refused = verdict.get(pod.namespace)
            if refused is None:
                refused = verdict[pod.namespace] = (
                    self.refuses_namespace(pod.namespace, namespaces) is not None
                )
            if refused or (classes and pod.spec.priority_class not in classes):
                out.append(key)
        return frozenset(out)


@dataclass(frozen=True, slots=True)
class Scope:
    """For whom makeroom makes room (``room_for``: pending pods) and whose pods it may move (``move``:
    victims of a relocation, pods of a node being consolidated)."""

    room_for: Side = field(default_factory=Side)
    move: Side = field(default_factory=Side)
