"""From the image and the chart to makeroom at work on a real control plane (issue 21).

The image is the one `make image` builds (deploy/image/build.sh), cached under a key of its inputs
(e2e/makeroom_e2e/image.py), unpacked with umoci and run with chroot as a runtime would run it: its
entrypoint, its user, a read-only root filesystem.

The chart is installed with `helm install` (the helm built from its Go module) on the e2e control plane:
CRDs, RBAC, the admission policy, PDB, NetworkPolicy, Deployment and all. KWOK plays the kubelets and
runs no container, so this test is the container runtime: makeroom's pods are held off KWOK's nodes by
a nodeSelector (and the Deployment scaled to 0), and the controller runs from the image's root
filesystem with the installed Deployment's command, args, env and volumes and a token of its
ServiceAccount, against the real cluster-autoscaler on seed-2. `helm uninstall` then creates the
cleanup hook's Job; its command runs the same way, and only once it has succeeded does the Job's pod
get a node (KWOK then completes it), so helm goes on only after the real cleanup.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from makeroom_e2e import ControlPlane
from makeroom_e2e.cluster import E2E_LABEL, node_manifest
from makeroom_e2e.image import (
    SERVICE_ACCOUNT_DIR,
    Bundle,
    image_and_bundle,
    image_config,
    run_argv,
    service_account_dir,
    tools_missing,
    version,
)
from makeroom_e2e.makeroom_run import (
    CHART,
    E2E_VALUES,
    Makeroom,
    ReadySampler,
    helm_binary,
    leftovers,
    prepared_seed,
    render_chart,
)
from makeroom_e2e.procs import free_port
from makeroom_e2e.scenario import read_scenario

pytestmark = pytest.mark.e2e
SCALE = 0.1
RELEASE = "mr"
FULLNAME = "mr-makeroom"
RUNTIME = "e2e.makeroom.io/runtime"  # the label and taint of the node that "runs" a finished hook pod


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("MAKEROOM_E2E", "1") == "0":
        pytest.skip("MAKEROOM_E2E=0: end-to-end tests disabled explicitly")
    if os.geteuid() != 0:
        pytest.fail("the image is built and run with mmdebstrap and chroot: run as root", pytrace=False)
    missing = tools_missing()
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: `make image-tools` installs them (Debian)", pytrace=False)
    return image_and_bundle(tmp_path_factory.mktemp("image") / "build.log")[0]


@pytest.fixture(scope="module")
def bundle(image: Path, tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    """After ``image`` (its checks, its build): the image unpacked, from the cache once unpacked."""
    return image_and_bundle(tmp_path_factory.mktemp("image") / "build.log")[1]


def run(
    bundle: Bundle, argv: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        run_argv(bundle, argv, env or {}), capture_output=True, text=True, timeout=120, check=False
    )


def test_the_image_runs_its_entrypoint_as_its_user_on_a_read_only_root(image: Path, bundle: Bundle) -> None:
    config = image_config(image)["config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["/opt/makeroom/bin/makeroom"] and config["Cmd"] == ["run"]
    r = run(bundle, [*config["Entrypoint"], "--version"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"makeroom {version()}"
    # who it runs as, and that nothing of the root filesystem is writable but /tmp
    probe = run(bundle, ["/bin/sh", "-c", "id -u; touch /opt/x 2>/dev/null || echo read-only; touch /tmp/x"])
    assert probe.returncode == 0 and probe.stdout.split() == ["65532", "read-only"], probe
    # the kube and exact extras are in, and the SBOM says what the image holds
    extras = run(bundle, ["/opt/makeroom/bin/python", "-c", "import kubernetes, prometheus_client, ortools"])
    assert extras.returncode == 0, extras.stderr
    sbom = yaml.safe_load((bundle.rootfs / "usr/share/doc/makeroom/sbom.cdx.json").read_text())
    purls = {c["purl"].split("@")[0] for c in sbom["components"]}
    assert sbom["bomFormat"] == "CycloneDX"
    assert {
        "pkg:pypi/makeroom",
        "pkg:pypi/kubernetes",
        "pkg:pypi/ortools",
        "pkg:deb/debian/python3.11",
    } <= purls


# --- the chart on the control plane --------------------------------------------------------------------
def helm(cp: ControlPlane, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [helm_binary(), *args, "--kubeconfig", str(cp.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def install_values(groups: Path, expander: str) -> dict[str, Any]:
    """The values a user sets (image, groups with prices) and the harness's time scale, as values."""
    return {
        **E2E_VALUES,
        "controller": {
            "interval": round(2 * SCALE, 3),
            "timeout": round(900 * SCALE, 3),
            "cooldown": round(600 * SCALE, 3),
        },
        "consolidation": {"window": round(600 * SCALE, 3), "wait": round(1800 * SCALE, 3)},
        "nodeGroups": {
            "groups": yaml.safe_load(groups.read_text())["groups"],
            "autoscalerExpander": expander,
        },
        "metrics": {"port": free_port()},
        "priorityClasses": {"create": True},
        # KWOK runs no container: makeroom's pods stay off its nodes (this test runs them)
        "nodeSelector": {RUNTIME: "chroot"},
        "tolerations": [{"key": RUNTIME, "operator": "Exists", "effect": "NoSchedule"}],
    }


def dynamic(cp: ControlPlane) -> Any:
    from kubernetes import dynamic as kdynamic  # type: ignore[import-untyped,unused-ignore]

    return kdynamic.DynamicClient(cp.api)  # type: ignore[no-untyped-call,unused-ignore]


def exists(dyn: Any, obj: dict[str, Any]) -> bool:
    from kubernetes.dynamic.exceptions import NotFoundError

    resource = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    try:
        dyn.get(resource, name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
    except NotFoundError:
        return False
    return True


def container_env(container: Any, pod_name: str) -> dict[str, str]:
    env = {}
    for e in container.env or []:
        if e.value_from is not None:
            assert e.value_from.field_ref.field_path == "metadata.name", e
            env[e.name] = pod_name
        else:
            env[e.name] = e.value
    return env


class Runtime:
    """Runs a pod's (only) container from the image's root filesystem, as the kubelet would."""

    def __init__(self, cp: ControlPlane, bundle: Bundle, image: Path, tmp: Path) -> None:
        self.cp, self.bundle, self.tmp = cp, bundle, tmp
        self.entrypoint = image_config(image)["config"]["Entrypoint"]

    def argv(self, namespace: str, pod_spec: Any, pod_name: str) -> list[str]:
        from kubernetes import client

        (container,) = pod_spec.containers
        token = self.cp.core.create_namespaced_service_account_token(
            pod_spec.service_account_name,
            namespace,
            client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[])),
        ).status.token
        mounts = {
            SERVICE_ACCOUNT_DIR: service_account_dir(
                self.tmp / f"sa-{pod_name}", token, self.cp.credentials.ca_cert, namespace
            )
        }
        volumes = {v.name: v for v in pod_spec.volumes or []}
        for m in container.volume_mounts or []:
            cm = volumes[m.name].config_map
            if cm is None:
                assert volumes[m.name].empty_dir is not None and m.mount_path == "/tmp", m
                continue  # run_argv gives every run a fresh /tmp
            data = self.cp.core.read_namespaced_config_map(cm.name, namespace).data
            folder = self.tmp / f"cm-{cm.name}"
            folder.mkdir(exist_ok=True)
            for key, text in data.items():
                (folder / key).write_text(text)
            mounts[m.mount_path] = folder
        env = {
            **container_env(container, pod_name),
            # what the kubelet tells every container about the API server (its Service)
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(self.cp.api_url.rsplit(":", 1)[1]),
        }
        argv = [*(container.command or self.entrypoint), *(container.args or [])]
        return run_argv(self.bundle, argv, env, mounts)


def wait_for_hook_pod(cp: ControlPlane, namespace: str) -> Any:
    found: list[Any] = []

    def appeared() -> bool:
        pods = cp.core.list_namespaced_pod(
            namespace, label_selector="app.kubernetes.io/name=makeroom-cleanup"
        )
        found[:] = pods.items
        return bool(found)

    cp.wait_for(appeared, 120, "the cleanup hook's pod")
    return found[0]


def runtime_node(name: str) -> dict[str, Any]:
    """A KWOK node outside every node group, for makeroom's pods only (their nodeSelector, the taint)."""
    body = node_manifest(
        name,
        group="runtime",
        capacity={"cpu": "4", "memory": "8Gi", "pods": "10"},
        labels={RUNTIME: "chroot"},
        taints=[{"key": RUNTIME, "value": "chroot", "effect": "NoSchedule"}],
        annotations={},
    )
    del body["spec"]["providerID"]  # not the kwok cloud provider's: the autoscaler leaves it alone
    body["metadata"]["annotations"] = {"kwok.x-k8s.io/node": "fake"}
    body["metadata"]["labels"][E2E_LABEL] = "true"
    return body


def test_the_chart_installs_and_the_image_relocates_seed_2_then_uninstalls_clean(
    cp: ControlPlane, image: Path, bundle: Bundle, tmp_path: Path
) -> None:
    scenario, groups = prepared_seed(2, tmp_path)
    expander = str(read_scenario(scenario).autoscaler.get("expander", "least-waste"))
    namespace = f"makeroom-{uuid.uuid4().hex[:6]}"
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(install_values(groups, expander)))
    runtime = Runtime(cp, bundle, image, tmp_path)
    dyn = dynamic(cp)
    manifest: list[dict[str, Any]] = []
    ls = mr = None
    try:
        r = helm(cp, "install", RELEASE, str(CHART), "-n", namespace, "--create-namespace", "-f", str(values))
        assert r.returncode == 0, r.stderr
        got = helm(cp, "get", "manifest", RELEASE, "-n", namespace)
        manifest = [d for d in yaml.safe_load_all(got.stdout) if d]
        kinds = {o["kind"] for o in manifest}
        assert {
            "CustomResourceDefinition",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "PodDisruptionBudget",
            "NetworkPolicy",
            "Deployment",
            "PriorityClass",
            "ConfigMap",
            "ServiceAccount",
        } <= kinds
        assert all(exists(dyn, o) for o in manifest)
        # No container runtime here: this test runs makeroom's container itself (below).
        cp.apps.patch_namespaced_deployment_scale(FULLNAME, namespace, {"spec": {"replicas": 0}})

        ls = cp.load_scenario(scenario, strategy="migrate", time_scale=SCALE)
        pod_spec = cp.apps.read_namespaced_deployment(FULLNAME, namespace).spec.template.spec
        mr = Makeroom(
            [], tmp_path / "makeroom.log", command=runtime.argv(namespace, pod_spec, "mr-0")
        ).start()
        iris = ReadySampler(ls, "iris-classifier")

        def text_generator_on_gpu_0() -> bool:
            pods = ls.ready_pods("text-generator")
            return len(pods) == 1 and pods[0].spec.node_name == "gpu-0"

        cp.wait_for(text_generator_on_gpu_0, 2 * ls.scenario.duration_s * SCALE + 120, "text-generator Ready")
        cp.wait_for(lambda: bool(mr.messages("relocation done")), 60, "the relocation done")
        assert mr.alive(), mr.tail()
        assert ls.nodes_added() == {"cpu": 1, "gpu": 0}, "one CPU node for the moved replicas, no GPU node"
        assert iris.stop() == 15, "make-before-break: iris never ran fewer Ready replicas than it wants"
        assert not [d for d in mr.lines() if "403" in str(d.get("error", ""))], mr.tail()
        assert mr.messages("starting")[0]["cluster"].endswith("(in-cluster service account)")
        assert mr.stop() == 0, mr.tail()  # the Deployment is at 0: its pods would be stopped so

        # `helm uninstall`: its pre-delete hook's command runs from the image, then the Job may finish.
        uninstall = subprocess.Popen(
            [
                *(helm_binary(), "uninstall", RELEASE, "-n", namespace, "--kubeconfig", str(cp.kubeconfig)),
                *("--wait", "--timeout", "4m"),  # until every object is gone, CRDs included
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            hook = wait_for_hook_pod(cp, namespace)
            assert hook.status.phase == "Pending"
            # admitted with the chart's own PriorityClass, which needs no quota in any namespace
            assert (
                hook.spec.priority_class_name == f"{FULLNAME}-controller" and hook.spec.priority == 1_000_000
            )
            cleanup = subprocess.run(
                runtime.argv(namespace, hook.spec, hook.metadata.name),
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
            assert cleanup.returncode == 0, cleanup.stdout + cleanup.stderr
            assert cleanup.stdout.startswith("cleaning up makeroom on https://127.0.0.1:"), cleanup.stdout
            cp.core.create_node(runtime_node(f"runtime-{namespace}"))
            out, err = uninstall.communicate(timeout=180)
        finally:
            if uninstall.poll() is None:
                uninstall.kill()
                uninstall.wait()
        assert uninstall.returncode == 0, err
        assert f'release "{RELEASE}" uninstalled' in out

        # Nothing of makeroom is left but what the user asked to keep: the API PriorityClasses.
        kept = {o["metadata"]["name"] for o in manifest if exists(dyn, o)}
        assert kept == {"api-critical", "api-standard", "api-batch"}
        assert not leftovers(cp, ls.namespace, {"iris-classifier": 15, "text-generator": 1})
        from kubernetes import client

        coordination: Any = client.CoordinationV1Api(cp.api)
        assert not [x.metadata.name for x in coordination.list_namespaced_lease(namespace).items]
        # the hook's pod goes with its Job, by the garbage collector
        cp.wait_for(lambda: not cp.core.list_namespaced_pod(namespace).items, 60, "the hook's pod gone")
    finally:
        if mr is not None:
            mr.stop()
        if ls is not None:
            ls.stop()
        helm(cp, "uninstall", RELEASE, "-n", namespace, "--no-hooks", timeout=60)
        for o in manifest:
            if o["kind"] == "PriorityClass":
                with contextlib.suppress(Exception):
                    cp.scheduling.delete_priority_class(o["metadata"]["name"])
        with contextlib.suppress(Exception):
            cp.core.delete_namespace(namespace, grace_period_seconds=0)


def test_every_rendered_object_is_valid_for_the_api_server(cp: ControlPlane, tmp_path: Path) -> None:
    """Every object the chart renders, with every optional part on, passes the real API server's own
    validation (server-side dry run, unknown fields refused) for the Kubernetes it was built as."""
    namespace = f"makeroom-{uuid.uuid4().hex[:6]}"
    values = {
        "priorityClasses": {"create": True},
        "dashboard": {"enabled": True},
        "nodeGroups": {"groups": [{"name": "cpu", "min": 1, "max": 3, "price_per_hour": 0.2}]},
        "scope": {"roomFor": {"namespaces": [namespace]}, "move": {"namespaces": [namespace]}},
        "metrics": {"networkPolicy": {"from": [{"podSelector": {"matchLabels": {"app": "prometheus"}}}]}},
    }
    objects = render_chart(RELEASE, namespace, values, tmp_path)
    assert {"Job", "ConfigMap", "NetworkPolicy", "PodDisruptionBudget"} <= {o["kind"] for o in objects}
    cp.core.create_namespace({"metadata": {"name": namespace, "labels": {E2E_LABEL: "true"}}})
    dyn = dynamic(cp)
    try:
        for obj in objects:
            resource = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            dyn.create(
                resource,
                body=obj,
                namespace=obj["metadata"].get("namespace"),
                query_params=[("dryRun", "All"), ("fieldValidation", "Strict")],
            )
    finally:
        with contextlib.suppress(Exception):
            cp.core.delete_namespace(namespace, grace_period_seconds=0)


def test_a_scope_namespace_that_does_not_exist_is_named_before_anything_is_made(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """A RoleBinding in a namespace that is not there made `helm install` fail halfway with a bare 404:
    on a live cluster the chart now says which namespace, and that it must exist first."""
    there = f"team-{uuid.uuid4().hex[:6]}"
    cp.core.create_namespace({"metadata": {"name": there, "labels": {E2E_LABEL: "true"}}})
    values = tmp_path / "values.yaml"
    for scope, missing in (
        ({"roomFor": {"namespaces": [there, "no-such-team"]}}, "no-such-team"),
        ({"move": {"namespaces": ["nor-this-one"]}}, "nor-this-one"),
    ):
        values.write_text(yaml.safe_dump({**E2E_VALUES, "scope": scope}))
        namespace = f"makeroom-{uuid.uuid4().hex[:6]}"
        r = helm(cp, "install", RELEASE, str(CHART), "-n", namespace, "--dry-run=server", "-f", str(values))
        assert r.returncode != 0
        assert f'namespace "{missing}" is named in controller.namespaces' in r.stderr, r.stderr
        assert "create it first" in r.stderr
    values.write_text(yaml.safe_dump({**E2E_VALUES, "scope": {"roomFor": {"namespaces": [there]}}}))
    ok = helm(cp, "install", RELEASE, str(CHART), "-n", "default", "--dry-run=server", "-f", str(values))
    assert ok.returncode == 0, ok.stderr
    assert f"namespace: {there}" in ok.stdout  # its RoleBinding
