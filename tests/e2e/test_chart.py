"""The Helm chart as a package (issue 21): `helm lint`, `helm package`, its values.schema.json refusing
bad values with a clear message, its kubeVersion, and the traps it must not hold. helm is the one built
from its Go module into the e2e cache (e2e/build-helm.sh); no control plane is needed here (the objects
are checked against a real API server in test_install.py).
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from makeroom_e2e.makeroom_run import CHART, E2E_VALUES, KUBE_VERSION, REPO, helm_binary, render_chart

pytestmark = pytest.mark.e2e

KUBE_VERSIONS = [f"1.{minor}.0" for minor in range(30, 37)]


@pytest.fixture(scope="module")
def helm() -> str:
    import os

    if os.environ.get("MAKEROOM_E2E", "1") == "0":
        pytest.skip("MAKEROOM_E2E=0: end-to-end tests disabled explicitly")
    try:
        return helm_binary()
    except FileNotFoundError as exc:
        pytest.fail(str(exc), pytrace=False)


def run_helm(helm: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *map(str, args)], capture_output=True, text=True, timeout=120, check=False)


def values_file(tmp: Path, values: dict[str, Any]) -> Path:
    path = tmp / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def test_helm_lint_passes_and_the_image_is_required(helm: str, tmp_path: Path) -> None:
    ok = run_helm(helm, "lint", CHART, "--strict", "-f", values_file(tmp_path, E2E_VALUES))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bare = run_helm(helm, "template", "mr", CHART, "--kube-version", KUBE_VERSION)
    assert bare.returncode != 0
    assert "image.repository: set it to where you pushed makeroom's image" in bare.stderr


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"controller": {"strategy": "teleport"}}, ["/controller/strategy", "migrate", "evict"]),
        ({"controler": {"strategy": "evict"}}, ["controler"]),
        ({"consolidation": {"minSaving": 2}}, ["/consolidation/minSaving", "maximum"]),
        ({"controller": {"interval": "soon"}}, ["/controller/interval"]),
        ({"controller": {"maxMoves": 0}}, ["/controller/maxMoves", "minimum"]),
        ({"metrics": {"port": 70000}}, ["/metrics/port"]),
        ({"controllerPriorityClass": {"value": 2000000000}}, ["/controllerPriorityClass/value"]),
        ({"nodeGroups": {"groups": [{"min": 1}]}}, ["/nodeGroups/groups/0", "name"]),
    ],
    ids=["strategy", "typo", "min-saving", "duration", "max-moves", "port", "priority", "group-name"],
)
def test_the_values_schema_refuses_bad_values_naming_them(
    helm: str, tmp_path: Path, values: dict[str, Any], expected: list[str]
) -> None:
    r = run_helm(
        helm,
        "template",
        "mr",
        CHART,
        "--kube-version",
        KUBE_VERSION,
        "-f",
        values_file(tmp_path, {**E2E_VALUES, **values}),
    )
    assert r.returncode == 1
    assert "values don't meet the specifications of the schema" in r.stderr, r.stderr
    for word in expected:
        assert word in r.stderr, r.stderr


def test_helm_package_holds_the_schema_and_the_dashboard(helm: str, tmp_path: Path) -> None:
    r = run_helm(helm, "package", CHART, "--destination", tmp_path)
    assert r.returncode == 0, r.stderr
    (archive,) = tmp_path.glob("makeroom-*.tgz")
    with tarfile.open(archive) as t:
        names = set(t.getnames())
        dashboard = t.extractfile("makeroom/dashboards/makeroom.json")
        assert dashboard is not None
        panels = json.load(dashboard)["panels"]
    assert {"makeroom/values.schema.json", "makeroom/Chart.yaml"} <= names
    # the dashboard reads only metrics makeroom serves
    served = set((REPO / "src" / "makeroom" / "kube" / "metrics.py").read_text().split('"'))
    queried = {
        word.removesuffix("_bucket")
        for p in panels
        for t in p["targets"]
        for word in t["expr"].replace("(", " ").replace(")", " ").replace("[", " ").split()
        if word.startswith("makeroom_")
    }
    assert queried and queried <= served, queried - served
    shown = run_helm(
        helm,
        "template",
        "mr",
        archive,
        "--kube-version",
        KUBE_VERSION,
        "-f",
        values_file(tmp_path, E2E_VALUES),
    )
    assert shown.returncode == 0, shown.stderr


def test_kube_version_is_1_30_or_later(helm: str, tmp_path: Path) -> None:
    values = values_file(tmp_path, E2E_VALUES)
    old = run_helm(helm, "template", "mr", CHART, "-f", values, "--kube-version", "1.29.9")
    assert old.returncode != 0 and ">=1.30.0-0" in old.stderr, old.stderr
    for v in KUBE_VERSIONS:
        r = run_helm(helm, "template", "mr", CHART, "-f", values, "--kube-version", v)
        assert r.returncode == 0, f"{v}: {r.stderr}"


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def test_no_traps_in_the_defaults(tmp_path: Path, helm: str) -> None:
    objects = render_chart("makeroom", "makeroom", None, tmp_path)
    (deployment,) = by_kind(objects, "Deployment")
    pod = deployment["spec"]["template"]
    # the controller's own class is the chart's (allowed in any namespace), not system-cluster-critical
    (own,) = by_kind(objects, "PriorityClass")
    assert pod["spec"]["priorityClassName"] == own["metadata"]["name"] == "makeroom-controller"
    assert own["value"] < 1_000_000_000
    (hook,) = [o for o in objects if o["kind"] == "Job"]
    assert hook["spec"]["template"]["spec"]["priorityClassName"] == own["metadata"]["name"]
    # nothing invites a scrape that the NetworkPolicy would drop
    (policy,) = by_kind(objects, "NetworkPolicy")
    annotations = pod["metadata"].get("annotations") or {}
    if annotations.get("prometheus.io/scrape") == "true":
        assert policy["spec"]["ingress"], "scraping invited, every scraper blocked"
    # the name docs/install.md and docs/kube.md give to `kubectl logs`
    assert deployment["metadata"]["name"] == "makeroom"
    for doc in ("docs/install.md", "docs/kube.md"):
        text = (REPO / doc).read_text()
        assert "deploy/makeroom-makeroom" not in text
        assert "logs deploy/makeroom" in text, doc


def test_api_priority_classes_outlive_an_uninstall(tmp_path: Path, helm: str) -> None:
    objects = render_chart("mr", "makeroom", {"priorityClasses": {"create": True}}, tmp_path)
    classes = {o["metadata"]["name"]: o for o in by_kind(objects, "PriorityClass")}
    assert set(classes) == {"api-critical", "api-standard", "api-batch", "mr-makeroom-controller"}
    for name in ("api-critical", "api-standard", "api-batch"):
        assert classes[name]["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    # the controller's class is used by makeroom's pods only: it goes with the release
    assert "annotations" not in classes["mr-makeroom-controller"]["metadata"]
    named = render_chart("mr", "makeroom", {"priorityClassName": "system-cluster-critical"}, tmp_path)
    assert not by_kind(named, "PriorityClass")
    (deployment,) = by_kind(named, "Deployment")
    assert deployment["spec"]["template"]["spec"]["priorityClassName"] == "system-cluster-critical"
