"""Helpers for the `makeroom run` end-to-end tests (tests/e2e/test_run_controller.py): the Helm chart
rendered and applied, `makeroom` as a process impersonating the chart's ServiceAccount, seed scenarios
with the scheduler's preemption off (as the simulator runs evict and migrate), and what makeroom may
leave behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import makeroom.examples

from .cluster import ControlPlane
from .procs import _die_with_parent
from .scenario import LoadedScenario, read_scenario, template_labels
from .tenancy import delete_cluster_scoped, is_hook, wait_established

REPO = Path(__file__).resolve().parents[2]  # e2e/makeroom_e2e/ -> the repository
CHART = REPO / "deploy" / "helm" / "makeroom"
EXAMPLES = Path(makeroom.examples.__file__).parent
CACHE = Path(os.environ.get("MAKEROOM_E2E_CACHE", Path.home() / ".cache" / "makeroom-e2e"))
# The one value the chart requires: its image (here only a name; the e2e plane runs no container).
E2E_VALUES: dict[str, Any] = {"image": {"repository": "makeroom.test/makeroom"}}
# The Kubernetes `helm template` renders for (without a cluster helm assumes 1.20, which the chart's
# kubeVersion refuses): the e2e control plane's (e2e/build.sh).
KUBE_VERSION = "1.36.0"


def helm_binary() -> str:
    found = shutil.which("helm") or (
        str(CACHE / "bin" / "helm") if (CACHE / "bin" / "helm").exists() else None
    )
    if found is None:
        raise FileNotFoundError(
            "helm missing: run `bash e2e/build-helm.sh` (builds helm.sh/helm/v3 from the Go module registry)"
        )
    return found


def render_chart(
    release: str, namespace: str, values: dict[str, Any] | None = None, tmp: Path | None = None
) -> list[dict[str, Any]]:
    args = [helm_binary(), "template", release, str(CHART), "--namespace", namespace]
    args += ["--kube-version", KUBE_VERSION]
    for layer in (E2E_VALUES, values or {}):  # a later file wins, key by key
        path = (tmp or Path("/tmp")) / f"values-{uuid.uuid4().hex[:8]}.yaml"
        path.write_text(yaml.safe_dump(layer))
        args += ["-f", str(path)]
    out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=60).stdout
    return [d for d in yaml.safe_load_all(out) if d]


@dataclass
class Installed:
    cp: ControlPlane
    namespace: str
    release: str
    objects: list[dict[str, Any]]

    @property
    def service_account(self) -> str:
        (sa,) = [o for o in self.objects if o["kind"] == "ServiceAccount"]
        return str(sa["metadata"]["name"])

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"

    def deployment_args(self) -> list[str]:
        (d,) = [o for o in self.objects if o["kind"] == "Deployment"]
        return [str(a) for a in d["spec"]["template"]["spec"]["containers"][0]["args"]]


def apply(cp: ControlPlane, objects: list[dict[str, Any]]) -> None:
    from kubernetes import utils  # type: ignore[import-untyped,unused-ignore]

    for obj in objects:
        if obj["kind"] == "Deployment" or is_hook(obj):
            continue  # the controller runs as a process here (no container runtime); its args are used
        utils.create_from_dict(cp.api, obj)  # type: ignore[no-untyped-call,unused-ignore]
    wait_established(cp, objects)


def delete(cp: ControlPlane, objects: list[dict[str, Any]]) -> None:
    from kubernetes import client

    rbac = client.RbacAuthorizationV1Api(cp.api)
    for obj in objects:
        name, ns = obj["metadata"]["name"], obj["metadata"].get("namespace")
        with contextlib.suppress(client.ApiException):
            if obj["kind"] == "ClusterRole":
                rbac.delete_cluster_role(name)
            elif obj["kind"] == "ClusterRoleBinding":
                rbac.delete_cluster_role_binding(name)
            elif obj["kind"] == "Role":
                rbac.delete_namespaced_role(name, ns)
            elif obj["kind"] == "RoleBinding":
                rbac.delete_namespaced_role_binding(name, ns)
            elif obj["kind"] == "PriorityClass":
                cp.scheduling.delete_priority_class(name)
    delete_cluster_scoped(cp, objects)


@contextlib.contextmanager
def installed_chart(cp: ControlPlane, values: dict[str, Any] | None = None) -> Iterator[Installed]:
    """The chart rendered by helm and applied (all but the Deployment) in a fresh namespace."""
    namespace = f"makeroom-{uuid.uuid4().hex[:6]}"
    release = "mr"
    objects = render_chart(release, namespace, values)
    cp.core.create_namespace({"metadata": {"name": namespace}})  # not E2E_LABEL: scenarios loaded reset those
    try:
        apply(cp, objects)  # an apply that fails halfway has still made objects to delete
        yield Installed(cp, namespace, release, objects)
    finally:
        delete(cp, objects)
        with contextlib.suppress(Exception):
            cp.core.delete_namespace(namespace, grace_period_seconds=0)


# --- makeroom as a process ---------------------------------------------------------------------------
def makeroom_command() -> list[str]:
    exe = REPO / ".venv" / "bin" / "makeroom"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "makeroom"]


@dataclass
class Makeroom:
    """One `makeroom run` process; its JSON log lines are kept in a file. ``command``: what runs
    makeroom (the venv's by default; test_install.py runs the image's)."""

    args: list[str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    command: list[str] = field(default_factory=makeroom_command)

    def start(self) -> Makeroom:
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [*self.command, *self.args],
            stdout=log,
            stderr=log,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 (a dying test run takes makeroom with it)
        )
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                d = yaml.safe_load(line) if line.startswith("{") else None
                if isinstance(d, dict):
                    out.append(d)
        return out

    def messages(self, msg: str) -> list[dict[str, Any]]:
        return [d for d in self.lines() if d.get("msg") == msg]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        return self.proc.returncode

    def tail(self, n: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])


def run_args(
    cp: ControlPlane,
    inst: Installed,
    groups: Path,
    *,
    strategy: str,
    identity: str,
    leader_elect: bool = True,
    interval: float = 1.0,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """`makeroom run` with the chart's own arguments, out of cluster, as the chart's ServiceAccount.
    interval: real seconds between reconciliations (makeroom's 2 s times the harness's time scale)."""
    chart_args = [
        a for a in inst.deployment_args() if not a.startswith(("--strategy", "--metrics-port", "--interval"))
    ]
    if not leader_elect:
        chart_args = [a for a in chart_args if not a.startswith(("--leader-elect", "--lease-"))] + [
            "--no-leader-elect"
        ]
    return [
        *chart_args,
        "--kubeconfig",
        str(cp.kubeconfig),
        "--as",
        inst.user,
        "--strategy",
        strategy,
        "--interval",
        f"{interval:.3f}",
        "--metrics-port",
        "0",
        "--identity",
        identity,
        "--groups",
        str(groups),
        *extra,
    ]


# --- scenarios ---------------------------------------------------------------------------------------
Seed = int | str  # 1..4: seed-<n>-*.yaml; a name such as "constrained-seed-1": <name>-*.yaml


def seed_file(n: Seed) -> Path:
    (path,) = EXAMPLES.glob(f"seed-{n}-*.yaml" if isinstance(n, int) else f"{n}-*.yaml")
    return path


def prepared_seed(n: Seed, tmp: Path) -> tuple[Path, Path]:
    """The seed scenario with kube-scheduler's preemption off (the simulator's evict and migrate run
    its scheduler without preemption: makeroom moves the pods), and its groups file for `--groups`
    (the autoscaler's status ConfigMap is absent here)."""
    data = yaml.safe_load(seed_file(n).read_text())
    data["scheduler"] = {**(data.get("scheduler") or {}), "preemption": False}
    scenario = tmp / f"seed-{n}.yaml"
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    entries: list[dict[str, Any]] = []
    for g in read_scenario(scenario).node_groups:
        raw = next(r for r in data["node_groups"] if r["name"] == g.name)
        entry: dict[str, Any] = {
            "name": g.name,
            "min": g.min,
            "max": g.max,
            "price_per_hour": raw.get("price_per_hour", 0),
        }
        if g.zones:
            # A group over zones: its nodes share no zone label, so makeroom would model a new node
            # without one (and a zone spread then finds no place on it). The operator's answer is the
            # template's labels in the groups file: those the kwok provider gives the node it adds.
            entry["labels"] = template_labels(g)
        entries.append(entry)
    groups = tmp / f"groups-{n}.yaml"
    groups.write_text(yaml.safe_dump({"groups": entries}))
    return scenario, groups


@dataclass
class ReadySampler:
    """The fewest Ready replicas of a workload seen while it runs (polled every 0.2 s)."""

    ls: LoadedScenario
    workload: str
    low: int | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                n = len(self.ls.ready_pods(self.workload))
                self.low = n if self.low is None else min(self.low, n)
            self._stop.wait(0.2)

    def stop(self) -> int | None:
        self._stop.set()
        return self.low


def leftovers(cp: ControlPlane, namespace: str, desired: dict[str, int]) -> list[str]:
    """What makeroom must not leave: makeroom.io annotations or taints, its tolerations, changed
    replica counts."""
    found = []
    for pod in cp.core.list_namespaced_pod(namespace).items:
        for k in pod.metadata.annotations or {}:
            if k.startswith("makeroom.io/") or k == "cluster-autoscaler.kubernetes.io/pod-scale-up-delay":
                found.append(f"pod {pod.metadata.name}: annotation {k}")
        for t in pod.spec.tolerations or []:
            if (t.key or "").startswith("makeroom.io/"):
                found.append(f"pod {pod.metadata.name}: toleration {t.key}")
    for node in cp.core.list_node().items:
        for t in node.spec.taints or []:
            if t.key.startswith("makeroom.io/"):
                found.append(f"node {node.metadata.name}: taint {t.key}")
        for k in node.metadata.annotations or {}:
            if k.startswith("makeroom.io/"):
                found.append(f"node {node.metadata.name}: annotation {k}")
    for d in cp.apps.list_namespaced_deployment(namespace).items:
        for k in d.metadata.annotations or {}:
            if k.startswith("makeroom.io/"):
                found.append(f"deployment {d.metadata.name}: annotation {k}")
        want = desired.get(d.metadata.name)
        if want is not None and d.spec.replicas != want:
            found.append(f"deployment {d.metadata.name}: replicas {d.spec.replicas} != {want}")
    return found


def wait_quiet(cp: ControlPlane, what: str, check: Any, timeout: float) -> None:
    cp.wait_for(check, timeout, what)


def monotonic() -> float:
    return time.monotonic()
