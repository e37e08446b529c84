"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, KWOK and the cluster-autoscaler with its kwok cloud provider."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import ssl
import tempfile
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .binaries import Binaries, MissingBinariesError, find_binaries
from .certs import Credentials, make_credentials
from .procs import ComponentDiedError, Process, free_port, install_signal_handlers, wait_until

GROUP_LABEL = "makeroom.io/group"
E2E_LABEL = "makeroom.io/e2e"
# The label makeroom's Helm chart puts on every object it renders (its templates/_helpers.tpl).
CHART_SELECTOR = "app.kubernetes.io/name=makeroom"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
# The harness's own (not makeroom's: makeroom must leave no makeroom.io/ key behind, and tests check it).
PROVISION_DELAY_ANNOTATION = "e2e.makeroom.io/provision-delay"
# The kwok cloud provider's markers: it manages a node only when spec.providerID starts with "kwok",
# counts it in the group its annotation names, and deletes only nodes annotated kwok.x-k8s.io/node=fake.
PROVIDER_ID_PREFIX = "kwok:"
NODEGROUP_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/name"
# The GPU label the kwok provider is told about (nodes.gpuConfig.gpuLabelKey); value: the resource.
GPU_LABEL = "makeroom.io/gpu"
# The extended resources the cluster-autoscaler counts as GPUs (utils/gpu GPUVendorResourceNames).
GPU_RESOURCES = (
    "nvidia.com/gpu",
    "habana.ai/gaudi",
    "gpu.intel.com/xe",
    "amd.com/gpu",
    "microsoft.com/directx",
)
PRIORITY_EXPANDER_CONFIGMAP = "cluster-autoscaler-priority-expander"
STATUS_CONFIGMAP = "cluster-autoscaler-status"
KWOK_VERSION = "v0.8.0"


@dataclass
class Components:
    """Which components to start. etcd and kube-apiserver are always started."""

    controller_manager: bool = True
    scheduler: bool = True
    kwok: bool = True
    autoscaler: bool = True


@dataclass
class SchedulerSettings:
    preemption: bool = True
    scoring: str = "LeastAllocated"


@dataclass
class AutoscalerSettings:
    """Flags of the cluster-autoscaler, every duration already scaled to real seconds (the defaults
    here are the autoscaler's own, unscaled). See e2e/README.md for the mapping from a scenario."""

    scan_interval_s: float = 10.0
    expander: str = "least-waste"
    priorities: tuple[str, ...] = ()  # groups, most preferred first (the priority expander's ConfigMap)
    scale_down_unneeded_time_s: float = 600.0
    scale_down_delay_after_add_s: float = 600.0
    scale_down_utilization_threshold: float = 0.5
    expendable_pods_priority_cutoff: int = -10
    max_graceful_termination_s: float = 600.0
    max_node_provision_time_s: float = 900.0
    max_node_startup_time_s: float = 900.0
    scale_down_unready_time_s: float = 1200.0
    scale_down_delay_after_failure_s: float = 180.0
    unremovable_node_recheck_timeout_s: float = 300.0
    node_delete_delay_after_taint_s: float = 5.0
    max_pod_eviction_time_s: float = 120.0
    initial_node_group_backoff_s: float = 300.0
    max_node_group_backoff_s: float = 1800.0
    scale_down_enabled: bool = True
    capacity_buffers: bool = False
    """The CapacityBuffer controller and its fake pods (--capacity-buffer-controller-enabled,
    --capacity-buffer-pod-injection-enabled); the CRD is installed before the autoscaler starts."""


def _kube_client() -> Any:
    import kubernetes  # type: ignore[import-untyped,unused-ignore]

    return kubernetes


@dataclass
class ControlPlane:
    """A running control plane. Made by `up()`; stop it with `down()` (or use it as a context manager)."""

    workdir: Path
    api_url: str
    kubeconfig: Path
    credentials: Credentials
    binaries: Binaries
    components: Components
    processes: dict[str, Process] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    detach: bool = False
    scheduler_settings: SchedulerSettings = field(default_factory=SchedulerSettings)
    autoscaler_settings: AutoscalerSettings = field(default_factory=AutoscalerSettings)
    _owns_workdir: bool = False
    _api: Any = None

    # ----------------------------------------------------------------------------------- lifecycle
    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.down()

    def down(self) -> None:
        """Stop every component (process groups: nothing is left), newest first."""
        for name in list(reversed(list(self.processes))):
            self.processes.pop(name).stop()
        if self._api is not None:
            with contextlib.suppress(Exception):
                self._api.close()
            self._api = None
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def status(self) -> dict[str, bool]:
        return {name: p.alive() for name, p in self.processes.items()}

    def check_alive(self) -> None:
        dead = [n for n, p in self.processes.items() if not p.alive()]
        if dead:
            logs = "\n".join(
                f"--- {n} (exit {self.processes[n].popen.returncode}):\n{self.processes[n].tail()}"
                for n in dead
            )
            raise ComponentDiedError(f"control-plane component(s) died: {', '.join(dead)}\n{logs}")

    def logs(self, name: str, lines: int = 40) -> str:
        return self.processes[name].tail(lines) if name in self.processes else ""

    # ----------------------------------------------------------------------------------- API access
    @property
    def api(self) -> Any:
        """A `kubernetes.client.ApiClient` bound to this control plane."""
        if self._api is None:
            k = _kube_client()
            self._api = k.config.new_client_from_config(config_file=str(self.kubeconfig))
        return self._api

    @property
    def core(self) -> Any:
        return _kube_client().client.CoreV1Api(self.api)

    @property
    def apps(self) -> Any:
        return _kube_client().client.AppsV1Api(self.api)

    @property
    def policy(self) -> Any:
        return _kube_client().client.PolicyV1Api(self.api)

    @property
    def scheduling(self) -> Any:
        return _kube_client().client.SchedulingV1Api(self.api)

    def wait_for(self, check: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
        """Poll `check` until true (a real-time deadline, no fixed sleep); fail fast if a component died."""

        def guarded() -> bool:
            self.check_alive()
            return check()

        wait_until(guarded, timeout, what, interval=0.25)

    def nodes(self) -> list[Any]:
        return list(self.core.list_node().items)

    def nodes_per_group(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes():
            g = (n.metadata.labels or {}).get(GROUP_LABEL)
            if g:
                counts[g] = counts.get(g, 0) + 1
        return counts

    def node_names(self, group: str | None = None) -> list[str]:
        return sorted(
            n.metadata.name
            for n in self.nodes()
            if group is None or (n.metadata.labels or {}).get(GROUP_LABEL) == group
        )

    def list_pods(self, namespace: str, label_selector: str = "") -> list[Any]:
        return list(self.core.list_namespaced_pod(namespace, label_selector=label_selector).items)

    def events(self, namespace: str, reason: str | None = None) -> list[Any]:
        kw = {"field_selector": f"reason={reason}"} if reason else {}
        return list(self.core.list_namespaced_event(namespace, **kw).items)

    def all_events(self, reason: str | None = None) -> list[Any]:
        kw = {"field_selector": f"reason={reason}"} if reason else {}
        return list(self.core.list_event_for_all_namespaces(**kw).items)

    # ----------------------------------------------------------------------------------- nodes
    def create_node(
        self,
        name: str,
        *,
        group: str,
        capacity: dict[str, str],
        labels: dict[str, str] | None = None,
        taints: Sequence[dict[str, str]] = (),
        annotations: dict[str, str] | None = None,
    ) -> None:
        """A KWOK node (KWOK plays its kubelet) in node group `group`."""
        body = node_manifest(
            name,
            group=group,
            capacity=capacity,
            labels=labels or {},
            taints=taints,
            annotations=annotations or {},
        )
        self.core.create_node(body)

    def wait_nodes_ready(self, names: Iterable[str], timeout: float = 60.0) -> None:
        wanted = set(names)

        def ready() -> bool:
            ok = set()
            for n in self.nodes():
                for c in n.status.conditions or []:
                    if c.type == "Ready" and c.status == "True":
                        ok.add(n.metadata.name)
            return wanted <= ok

        self.wait_for(ready, timeout, f"nodes Ready: {sorted(wanted)}")

    def set_unschedulable(self, name: str, value: bool) -> None:
        self.core.patch_node(name, {"spec": {"unschedulable": value}})

    def reset_between_tests(self) -> None:
        """What one test may leave that the next must not meet: the autoscaler's settings, what
        scenarios made, and the chart's cluster-scoped objects (which no test deletes mid-test, for a
        test loads its scenarios with the chart installed)."""
        self.configure_autoscaler(None)
        self.delete_e2e_objects()
        self.delete_chart_leftovers()
        self.delete_orphan_pods()

    def delete_orphan_pods(self) -> None:
        """Pods on nodes that are gone, in any namespace: with no kubelet to confirm their deletion
        they wait for the pod garbage collector (a minute or more), and the next test would meet them."""
        k = _kube_client()
        nodes = {n.metadata.name for n in self.core.list_node().items}
        for p in self.core.list_pod_for_all_namespaces().items:
            if p.spec.node_name and p.spec.node_name not in nodes:
                with contextlib.suppress(k.client.ApiException):
                    self.core.delete_namespaced_pod(
                        p.metadata.name, p.metadata.namespace, grace_period_seconds=0
                    )

    def delete_chart_leftovers(self, timeout: float = 60.0) -> None:
        """The cluster-scoped objects of makeroom's chart that a test stopped mid-install left behind.

        Every test installs the chart afresh under the same release name; one PriorityClass or CRD left
        by a test that died between its install and its cleanup would fail every later install on this
        control plane with AlreadyExists, so the tests after it would fail for a reason not theirs.
        """
        k = _kube_client()
        sel = CHART_SELECTOR
        rbac = k.client.RbacAuthorizationV1Api(self.api)
        adm = k.client.AdmissionregistrationV1Api(self.api)
        ext = k.client.ApiextensionsV1Api(self.api)
        listed_and_deleted: list[tuple[Callable[..., Any], Callable[[str], Any]]] = [
            (self.scheduling.list_priority_class, self.scheduling.delete_priority_class),
            (rbac.list_cluster_role_binding, rbac.delete_cluster_role_binding),
            (rbac.list_cluster_role, rbac.delete_cluster_role),
            (adm.list_validating_admission_policy_binding, adm.delete_validating_admission_policy_binding),
            (adm.list_validating_admission_policy, adm.delete_validating_admission_policy),
            (ext.list_custom_resource_definition, ext.delete_custom_resource_definition),
        ]
        for listing, delete in listed_and_deleted:
            for obj in listing(label_selector=sel).items:
                with contextlib.suppress(k.client.ApiException):
                    delete(obj.metadata.name)
        # a CRD that is still terminating refuses the next install's create
        self.wait_for(
            lambda: not ext.list_custom_resource_definition(label_selector=sel).items,
            timeout,
            "makeroom's CRDs of an earlier install deleted",
        )

    def delete_e2e_objects(self, timeout: float = 60.0) -> None:
        """Remove what scenarios and tests made (labelled makeroom.io/e2e): namespaces, nodes, classes.

        Namespaces go first and their pods are force-deleted (no kubelet has to confirm), then nodes.
        """
        k = _kube_client()
        sel = f"{E2E_LABEL}=true"
        namespaces = [ns.metadata.name for ns in self.core.list_namespace(label_selector=sel).items]
        for name in namespaces:
            with contextlib.suppress(k.client.ApiException):
                self.core.delete_namespace(name, grace_period_seconds=0)
        for name in namespaces:
            with contextlib.suppress(k.client.ApiException):
                self.core.delete_collection_namespaced_pod(name, grace_period_seconds=0)

        def pods_gone() -> bool:
            # Terminating namespaces accept no new pods; force-delete what is left (no kubelet confirms).
            left = False
            for name in namespaces:
                if self.core.list_namespaced_pod(name).items:
                    left = True
                    with contextlib.suppress(k.client.ApiException):
                        self.core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
            return not left

        # The namespaces themselves finish terminating in the background; each scenario and test
        # uses a fresh namespace name.
        self.wait_for(pods_gone, timeout, "pods of e2e namespaces deleted")
        for pc in self.scheduling.list_priority_class(label_selector=sel).items:
            with contextlib.suppress(k.client.ApiException):
                self.scheduling.delete_priority_class(pc.metadata.name)
        for cm in ("kwok-provider-config", "kwok-provider-templates", PRIORITY_EXPANDER_CONFIGMAP):
            with contextlib.suppress(k.client.ApiException):
                self.core.delete_namespaced_config_map(cm, "kube-system")
        for n in self.core.list_node(label_selector=sel).items:
            with contextlib.suppress(k.client.ApiException):
                self.core.delete_node(n.metadata.name)
        self.wait_for(lambda: not self.core.list_node(label_selector=sel).items, timeout, "e2e nodes deleted")

    # ----------------------------------------------------------------------------------- reconfigure
    def configure_scheduler(self, preemption: bool = True, scoring: str = "LeastAllocated") -> None:
        """Restart kube-scheduler with this profile if it differs from the running one."""
        wanted = SchedulerSettings(preemption=preemption, scoring=scoring)
        if wanted == self.scheduler_settings and "kube-scheduler" in self.processes:
            return
        self.scheduler_settings = wanted
        if "kube-scheduler" in self.processes:
            self.processes.pop("kube-scheduler").stop()
        if self.components.scheduler:
            _start_scheduler(self)

    def configure_autoscaler(self, settings: AutoscalerSettings | None) -> None:
        """(Re)start the cluster-autoscaler with these flags; None stops it."""
        if "cluster-autoscaler" in self.processes:
            # On SIGTERM it deletes its status ConfigMap and, through the kwok provider's Cleanup, the
            # nodes of its groups; give it the time to finish.
            self.processes.pop("cluster-autoscaler").stop(grace=15.0)
        # Its loop may write the status once more while its signal handler cleans up: a status left
        # from one scenario must never be read (by makeroom run) as the next one's groups.
        k = _kube_client()
        with contextlib.suppress(k.client.ApiException):
            self.core.delete_namespaced_config_map(STATUS_CONFIGMAP, "kube-system")
        if settings is None:
            return
        self.autoscaler_settings = settings
        if self.components.autoscaler:
            _start_autoscaler(self)

    # ----------------------------------------------------------------------------------- scenarios
    def load_scenario(self, path: str | Path, **kwargs: Any) -> Any:
        """Load a spec-v1 scenario; see `makeroom_e2e.scenario.load_into` for the keyword arguments."""
        from .scenario import load_into

        return load_into(self, path, **kwargs)

    def to_state(self) -> dict[str, Any]:
        return {
            "workdir": str(self.workdir),
            "api_url": self.api_url,
            "kubeconfig": str(self.kubeconfig),
            "pids": {n: p.pid for n, p in self.processes.items()},
        }


def node_manifest(
    name: str,
    *,
    group: str,
    capacity: dict[str, str],
    labels: dict[str, str],
    taints: Sequence[dict[str, str]],
    annotations: dict[str, str],
) -> dict[str, Any]:
    """A KWOK node of node group `group`, managed by the kwok cloud provider as the nodes it creates
    are (provider ID `kwok:<name>`, its group annotation), so the autoscaler counts, simulates and may
    remove it like any node of the group. A group whose capacity has a GPU resource gets GPU_LABEL."""
    gpus = sorted(r for r in capacity if r in GPU_RESOURCES)
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        # A kubelet still sets the beta twins; without them the node controller patches them in.
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "type": "kwok",
        GROUP_LABEL: group,
        E2E_LABEL: "true",
        **({GPU_LABEL: gpu_type(gpus[0])} if gpus else {}),
        **labels,
    }
    spec: dict[str, Any] = {"providerID": f"{PROVIDER_ID_PREFIX}{name}"}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": all_labels,
            "annotations": {
                KWOK_ANNOTATION: "fake",
                NODEGROUP_ANNOTATION: group,
                "node.alpha.kubernetes.io/ttl": "0",
                **annotations,
            },
        },
        "spec": spec,
        "status": {"capacity": dict(capacity), "allocatable": dict(capacity)},
    }


def gpu_type(resource: str) -> str:
    """The GPU label's value for a GPU resource (a label value cannot hold '/')."""
    return resource.replace("/", "-")


# --------------------------------------------------------------------------------------- startup
def _http_ok(url: str, ctx: ssl.SSLContext | None = None, token: str | None = None) -> bool:
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=2, context=ctx) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def _insecure_ctx() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _start(cp: ControlPlane, name: str, argv: list[str]) -> Process:
    p = Process(name, argv, cp.workdir / "logs" / f"{name}.log", detach=cp.detach)
    cp.processes[name] = p
    return p


def _wait_healthy(
    cp: ControlPlane,
    name: str,
    url: str,
    timeout: float,
    ctx: ssl.SSLContext | None,
    *,
    token: str | None = None,
) -> None:
    p = cp.processes[name]

    def ok() -> bool:
        if not p.alive():
            raise ComponentDiedError(f"{name} exited with {p.popen.returncode}:\n{p.tail()}")
        return _http_ok(url, ctx, token)

    wait_until(ok, timeout, f"{name} healthy at {url}", on_timeout=p.tail)


def _write_kubeconfig(path: Path, server: str, ca: Path, token: str) -> None:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "makeroom-e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": "makeroom-e2e", "context": {"cluster": "makeroom-e2e", "user": "admin"}}],
        "current-context": "makeroom-e2e",
    }
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    path.chmod(0o600)


def _start_etcd(cp: ControlPlane) -> None:
    client, peer = free_port(), free_port()
    cp.ports["etcd"] = client
    data = cp.workdir / "etcd"
    _start(
        cp,
        "etcd",
        [
            str(cp.binaries.path("etcd")),
            "--name=e2e",
            f"--data-dir={data}",
            f"--listen-client-urls=http://127.0.0.1:{client}",
            f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=e2e=http://127.0.0.1:{peer}",
            "--listen-metrics-urls=",
            "--unsafe-no-fsync=true",
            "--quota-backend-bytes=4294967296",
            "--log-level=warn",
        ],
    )
    _wait_healthy(cp, "etcd", f"http://127.0.0.1:{client}/health", 30, None)


def _start_apiserver(cp: ControlPlane) -> None:
    port = cp.ports["kube-apiserver"]
    c = cp.credentials
    _start(
        cp,
        "kube-apiserver",
        [
            str(cp.binaries.path("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{cp.ports['etcd']}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={cp.workdir / 'apiserver-certs'}",
            f"--tls-cert-file={c.serving_cert}",
            f"--tls-private-key-file={c.serving_key}",
            f"--client-ca-file={c.ca_cert}",
            f"--token-auth-file={c.token_file}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={c.sa_pub}",
            f"--service-account-signing-key-file={c.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.96.0.0/24",
            "--endpoint-reconciler-type=none",
            "--disable-admission-plugins=ServiceAccount",
            "--enable-priority-and-fairness=false",
            "--allow-privileged=true",
            "--profiling=false",
            "--event-ttl=1h",
            "--v=0",
        ],
    )
    ctx = ssl.create_default_context(cafile=str(c.ca_cert))
    _wait_healthy(cp, "kube-apiserver", f"{cp.api_url}/readyz", 90, ctx, token=c.token)


def _component_common(cp: ControlPlane, name: str) -> list[str]:
    port = free_port()
    cp.ports[name] = port
    return [
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cp.workdir / (name + '-certs')}",
    ]


def _start_controller_manager(cp: ControlPlane) -> None:
    name = "kube-controller-manager"
    args = _component_common(cp, name)
    c = cp.credentials
    _start(
        cp,
        name,
        [
            str(cp.binaries.path(name)),
            f"--kubeconfig={cp.kubeconfig}",
            "--leader-elect=false",
            "--use-service-account-credentials=false",
            f"--root-ca-file={c.ca_cert}",
            f"--service-account-private-key-file={c.sa_key}",
            "--controllers=*",
            "--node-monitor-grace-period=40s",
            "--concurrent-deployment-syncs=10",
            "--concurrent-replicaset-syncs=10",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--profiling=false",
            *args,
        ],
    )
    _wait_healthy(cp, name, f"https://127.0.0.1:{cp.ports[name]}/healthz", 60, _insecure_ctx())


def scheduler_config(kubeconfig: Path, settings: SchedulerSettings) -> dict[str, Any]:
    plugins: dict[str, Any] = {}
    if not settings.preemption:
        plugins["postFilter"] = {"disabled": [{"name": "DefaultPreemption"}]}
    profile: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "pluginConfig": [
            {
                "name": "NodeResourcesFit",
                "args": {"scoringStrategy": {"type": settings.scoring}},
            }
        ],
    }
    if plugins:
        profile["plugins"] = plugins
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400},
        "leaderElection": {"leaderElect": False},
        "profiles": [profile],
    }


def _start_scheduler(cp: ControlPlane) -> None:
    name = "kube-scheduler"
    cfg = cp.workdir / "scheduler-config.yaml"
    cfg.write_text(yaml.safe_dump(scheduler_config(cp.kubeconfig, cp.scheduler_settings)), encoding="utf-8")
    args = _component_common(cp, name)
    _start(cp, name, [str(cp.binaries.path(name)), f"--config={cfg}", *args])
    _wait_healthy(cp, name, f"https://127.0.0.1:{cp.ports[name]}/healthz", 60, _insecure_ctx())


def _start_kwok(cp: ControlPlane) -> None:
    from .stages import write_kwok_config

    cfg = write_kwok_config(cp.workdir / "kwok.yaml", cp.binaries)
    port = free_port()
    cp.ports["kwok"] = port
    _start(
        cp,
        "kwok",
        [
            str(cp.binaries.path("kwok")),
            f"--config={cfg}",
            f"--kubeconfig={cp.kubeconfig}",
            f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
            "--cidr=10.244.0.1/16",
            "--node-ip=10.0.0.1",
            "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{port}",
        ],
    )
    _wait_healthy(cp, "kwok", f"http://127.0.0.1:{port}/healthz", 60, None)


def _dur(seconds: float) -> str:
    return f"{max(seconds, 0.001):.3f}s"


def autoscaler_args(cp: ControlPlane, s: AutoscalerSettings, port: int) -> list[str]:
    threshold = f"{s.scale_down_utilization_threshold}"
    return [
        "--cloud-provider=kwok",
        f"--kubeconfig={cp.kubeconfig}",
        "--namespace=kube-system",
        "--leader-elect=false",
        f"--scan-interval={_dur(s.scan_interval_s)}",
        f"--expander={s.expander}",
        f"--scale-down-enabled={'true' if s.scale_down_enabled else 'false'}",
        f"--scale-down-unneeded-time={_dur(s.scale_down_unneeded_time_s)}",
        f"--scale-down-delay-after-add={_dur(s.scale_down_delay_after_add_s)}",
        f"--scale-down-delay-after-failure={_dur(s.scale_down_delay_after_failure_s)}",
        f"--scale-down-unready-time={_dur(s.scale_down_unready_time_s)}",
        # One threshold in the scenario: CPU/memory nodes and (by their GPUs alone) GPU nodes.
        f"--scale-down-utilization-threshold={threshold}",
        f"--scale-down-gpu-utilization-threshold={threshold}",
        f"--unremovable-node-recheck-timeout={_dur(s.unremovable_node_recheck_timeout_s)}",
        f"--node-delete-delay-after-taint={_dur(s.node_delete_delay_after_taint_s)}",
        f"--expendable-pods-priority-cutoff={s.expendable_pods_priority_cutoff}",
        f"--max-graceful-termination-sec={max(1, math.ceil(s.max_graceful_termination_s))}",
        f"--max-pod-eviction-time={_dur(s.max_pod_eviction_time_s)}",
        f"--max-node-provision-time={_dur(s.max_node_provision_time_s)}",
        f"--max-node-startup-time={_dur(s.max_node_startup_time_s)}",
        f"--initial-node-group-backoff-duration={_dur(s.initial_node_group_backoff_s)}",
        f"--max-node-group-backoff-duration={_dur(s.max_node_group_backoff_s)}",
        "--skip-nodes-with-local-storage=false",
        "--skip-nodes-with-system-pods=false",
        "--balance-similar-node-groups=false",
        "--kube-client-qps=200",
        "--kube-client-burst=400",
        f"--address=127.0.0.1:{port}",
        "--v=2",
    ] + (
        ["--capacity-buffer-controller-enabled=true", "--capacity-buffer-pod-injection-enabled=true"]
        if s.capacity_buffers
        else []
    )


def priority_expander_configmap(groups: Sequence[str]) -> dict[str, Any]:
    """The priority expander's ConfigMap: the first group gets the highest priority (a larger number
    wins), each matched by its exact name."""
    n = len(groups)
    priorities = {10 * (n - i): [f"^{re.escape(g)}$"] for i, g in enumerate(groups)}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": PRIORITY_EXPANDER_CONFIGMAP,
            "namespace": "kube-system",
            "labels": {E2E_LABEL: "true"},
        },
        "data": {"priorities": yaml.safe_dump(priorities)},
    }


def autoscaler_env(cp: ControlPlane) -> dict[str, str]:
    """The kwok provider builds its own client: out of a pod it needs KWOK_PROVIDER_MODE=local and
    KUBECONFIG; POD_NAMESPACE is where it reads kwok-provider-config and kwok-provider-templates."""
    return {
        **os.environ,
        "KWOK_PROVIDER_MODE": "local",
        "KUBECONFIG": str(cp.kubeconfig),
        "POD_NAMESPACE": "kube-system",
        "KWOK_PROVIDER_CONFIGMAP": "kwok-provider-config",
    }


def install_crds(cp: ControlPlane, paths: Iterable[Path], what: str, timeout: float = 60.0) -> None:
    """The CRDs in these files (one already there is kept); returns once they are established."""
    k = _kube_client()
    ext = k.client.ApiextensionsV1Api(cp.api)
    names = []
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not doc:
                continue
            names.append(doc["metadata"]["name"])
            with contextlib.suppress(k.client.ApiException):
                ext.create_custom_resource_definition(doc)

    def established() -> bool:
        for name in names:
            crd = ext.read_custom_resource_definition(name)
            if not any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or []):
                return False
        return True

    cp.wait_for(established, timeout, f"{what} established")


def _start_autoscaler(cp: ControlPlane) -> None:
    name = "cluster-autoscaler"
    s = cp.autoscaler_settings
    k = _kube_client()
    with contextlib.suppress(k.client.ApiException):
        cp.core.delete_namespaced_config_map(PRIORITY_EXPANDER_CONFIGMAP, "kube-system")
    if s.expander.split(",")[0] == "priority":
        cp.core.create_namespaced_config_map("kube-system", priority_expander_configmap(s.priorities))
    if s.capacity_buffers:
        crd = cp.binaries.capacity_buffer_crd()
        if crd is None:
            raise MissingBinariesError(
                f"no CapacityBuffer CRD under {cp.binaries.directory.parent}: "
                "run `bash e2e/build.sh autoscaler`"
            )
        install_crds(cp, [crd], "the CapacityBuffer CRD")
    port = free_port()
    cp.ports[name] = port
    argv = [str(cp.binaries.path(name)), *autoscaler_args(cp, s, port)]
    p = Process(name, argv, cp.workdir / "logs" / f"{name}.log", env=autoscaler_env(cp), detach=cp.detach)
    cp.processes[name] = p
    # /health-check answers once the autoscaler has built its provider and started its loop.
    _wait_healthy(cp, name, f"http://127.0.0.1:{port}/health-check", 60, None)


def up(
    workdir: str | Path | None = None,
    components: Components | None = None,
    binaries: Binaries | None = None,
    scheduler: SchedulerSettings | None = None,
    detach: bool = False,
) -> ControlPlane:
    """Start a control plane on loopback and return it once it is healthy.

    The autoscaler is not started here: it needs a scenario's node groups; `load_scenario` (or
    `configure_autoscaler`) starts it. On any failure, everything started so far is stopped.
    """
    bins = binaries or find_binaries()
    bins.require()
    comps = components or Components()
    owns = workdir is None
    wd = Path(tempfile.mkdtemp(prefix="makeroom-e2e-")) if workdir is None else Path(workdir)
    (wd / "logs").mkdir(parents=True, exist_ok=True)
    install_signal_handlers()
    creds = make_credentials(wd / "pki")
    api_port = free_port()
    api_url = f"https://127.0.0.1:{api_port}"
    kubeconfig = wd / "kubeconfig"
    _write_kubeconfig(kubeconfig, api_url, creds.ca_cert, creds.token)
    cp = ControlPlane(
        workdir=wd,
        api_url=api_url,
        kubeconfig=kubeconfig,
        credentials=creds,
        binaries=bins,
        components=comps,
        detach=detach,
        scheduler_settings=scheduler or SchedulerSettings(),
        _owns_workdir=owns and not detach,
    )
    cp.ports["kube-apiserver"] = api_port
    try:
        _start_etcd(cp)
        _start_apiserver(cp)
        if comps.controller_manager:
            _start_controller_manager(cp)
        if comps.scheduler:
            _start_scheduler(cp)
        if comps.kwok:
            _start_kwok(cp)
        # Wait for the default namespace and the built-in priority classes.
        cp.wait_for(lambda: cp.core.read_namespace("default") is not None, 30, "namespace default")
    except BaseException:
        cp.down()
        raise
    (wd / "state.json").write_text(json.dumps(cp.to_state(), indent=2), encoding="utf-8")
    return cp
