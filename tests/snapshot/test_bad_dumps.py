"""A dump that breaks a rule is refused by `makeroom plan` with exit 2 and one line naming the file,
the key path and what was expected: a quantity beyond 1Pi or that is no number, a fractional GPU, a
field of the wrong shape (never read as empty, never split into characters), a selector with an
unknown operator, a garbled autoscaler status, deep nesting, an alias bomb. Never a traceback, and
nothing silently dropped: a List nested in the dump is read as its items."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import cli

DUMP = Path(__file__).parent / "data" / "small-dump.yaml"
IRIS, GPU_NODE, PENDING, PDB, STATUS = 2, 1, 8, 9, 10  # positions in small-dump.yaml


def dump() -> dict[str, Any]:
    """small-dump.yaml with both iris replicas Ready, so that iris' budget lets one move and the dump
    has a plan (the tests below break one field of it at a time)."""
    data = yaml.safe_load(DUMP.read_text())
    assert isinstance(data, dict)
    for item in data["items"]:
        if item["metadata"]["name"] == "iris-classifier-7d9f8b6c5-fghij":
            item["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return data


def requests(d: dict[str, Any], i: int = IRIS) -> dict[str, Any]:
    resources: dict[str, Any] = d["items"][i]["spec"]["containers"][0]["resources"]
    return resources.setdefault("requests", {})  # type: ignore[no-any-return]


def expression(d: dict[str, Any]) -> dict[str, Any]:
    terms = d["items"][PENDING]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    return terms["nodeSelectorTerms"][0]["matchExpressions"][0]  # type: ignore[no-any-return]


REQUESTS = f"items[{IRIS}].spec.containers[0].resources.requests"
AFFINITY = (
    f"items[{PENDING}].spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    ".nodeSelectorTerms[0].matchExpressions[0]"
)
Mutation = Callable[[dict[str, Any]], object]
CASES: dict[str, tuple[Mutation, str, str]] = {
    "memory-10Pi": (lambda d: requests(d).update(memory="10Pi"), f"{REQUESTS}.memory", "at most 1Pi"),
    "cpu-1e30": (lambda d: requests(d).update(cpu="1e30"), f"{REQUESTS}.cpu", "at most 1Pi"),
    "cpu-1e308": (lambda d: requests(d).update(cpu=1e308), f"{REQUESTS}.cpu", "at most 1Pi"),
    "memory-9999999Ei": (
        lambda d: requests(d).update(memory="9999999Ei"),
        f"{REQUESTS}.memory",
        "at most 1Pi",
    ),
    "cpu-1e999999999": (lambda d: requests(d).update(cpu="1e999999999"), f"{REQUESTS}.cpu", "at most 1Pi"),
    "cpu-inf": (lambda d: requests(d).update(cpu=float("inf")), f"{REQUESTS}.cpu", "expected a quantity"),
    "node-memory-10Pi": (
        lambda d: d["items"][GPU_NODE]["status"]["allocatable"].update(memory="10Pi"),
        f"items[{GPU_NODE}].status.allocatable.memory",
        "at most 1Pi",
    ),
    "gpu-half": (
        lambda d: requests(d, PENDING).update({"nvidia.com/gpu": "0.5"}),
        f"items[{PENDING}].spec.containers[0].resources.requests.nvidia.com/gpu",
        "whole number of nvidia.com/gpu",
    ),
    "node-gpu-half": (
        lambda d: d["items"][GPU_NODE]["status"]["allocatable"].update({"nvidia.com/gpu": "500m"}),
        f"items[{GPU_NODE}].status.allocatable.nvidia.com/gpu",
        "whole number of nvidia.com/gpu",
    ),
    "grace-abc": (
        lambda d: d["items"][IRIS]["spec"].update(terminationGracePeriodSeconds="abc"),
        f"items[{IRIS}].spec.terminationGracePeriodSeconds",
        "whole number of seconds",
    ),
    "priority-beyond-int32": (
        lambda d: d["items"][IRIS]["spec"].update(priority=2**40),
        f"items[{IRIS}].spec.priority",
        "from -2147483648 to 2147483647",
    ),
    "containers-oops": (
        lambda d: d["items"][IRIS]["spec"].update(containers="oops"),
        f"items[{IRIS}].spec.containers",
        "expected a list",
    ),
    "resources-a-list": (
        lambda d: d["items"][IRIS]["spec"]["containers"][0].update(resources=["cpu"]),
        f"items[{IRIS}].spec.containers[0].resources",
        "expected a mapping",
    ),
    "container-a-string": (
        lambda d: d["items"][IRIS]["spec"]["containers"].append("sidecar"),
        f"items[{IRIS}].spec.containers[2]",
        "expected a mapping",
    ),
    "spec-a-string": (
        lambda d: d["items"][IRIS].update(spec="oops"),
        f"items[{IRIS}].spec",
        "expected a mapping",
    ),
    "labels-a-list": (
        lambda d: d["items"][IRIS]["metadata"].update(labels=["app"]),
        f"items[{IRIS}].metadata.labels",
        "expected a mapping of string to string",
    ),
    "affinity-values-a-string": (
        lambda d: expression(d).update(values="g4dn.xlarge"),
        f"{AFFINITY}.values",
        "expected a list of strings",
    ),
    "affinity-unknown-operator": (
        lambda d: expression(d).update(operator="Near"),
        f"{AFFINITY}.operator",
        "expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt",
    ),
    "affinity-in-without-values": (
        lambda d: expression(d).pop("values"),
        f"{AFFINITY}.values",
        "at least one value",
    ),
    "pdb-unknown-operator": (
        lambda d: d["items"][PDB]["spec"].update(
            selector={"matchExpressions": [{"key": "app", "operator": "Like", "values": ["iris"]}]}
        ),
        f"items[{PDB}].spec.selector.matchExpressions[0].operator",
        "expected one of In, NotIn, Exists, DoesNotExist",
    ),
    "pdb-selector-a-string": (
        lambda d: d["items"][PDB]["spec"].update(selector="app=iris"),
        f"items[{PDB}].spec.selector",
        "expected a label selector",
    ),
    "pdb-over-100-percent": (
        lambda d: d["items"][PDB]["spec"].update(maxUnavailable="250%"),
        f"items[{PDB}].spec.maxUnavailable",
        "percentage",
    ),
    "status-garbled": (
        lambda d: d["items"][STATUS]["data"].update(status="%%% not a status %%%"),
        f"items[{STATUS}].data.status",
        "expected the cluster-autoscaler status",
    ),
    "status-group-without-max": (
        lambda d: d["items"][STATUS]["data"].update(
            status="nodeGroups:\n- name: eks-cpu\n  health: {minSize: 1}\n"
        ),
        f"items[{STATUS}].data.status.nodeGroups[0].health",
        "maxSize",
    ),
    "status-min-above-max": (
        lambda d: d["items"][STATUS]["data"].update(
            status="nodeGroups:\n- name: eks-cpu\n  health: {minSize: 3, maxSize: 1}\n"
        ),
        f"items[{STATUS}].data.status.nodeGroups[0].health",
        "minSize <= maxSize",
    ),
    "deployment-replicas-a-string": (
        lambda d: d["items"].append(
            {"kind": "Deployment", "metadata": {"name": "iris-classifier"}, "spec": {"replicas": "two"}}
        ),
        "items[11].spec.replicas",
        "a number of replicas",
    ),
    "nested-list-items-not-a-list": (
        lambda d: d["items"].append({"kind": "List", "items": "oops"}),
        "items[11].items",
        "expected a list of Kubernetes objects",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_broken_dump_is_refused_with_its_key_path(name: str, tmp_path: Path) -> None:
    mutate, path, message = CASES[name]
    data = dump()
    mutate(data)
    file = tmp_path / "dump.json"  # JSON: YAML would not carry 1e308 or inf as numbers
    file.write_text(json.dumps(data))
    result = cli("plan", file)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert all(line.startswith(f"makeroom: {file}: ") for line in lines), result.stderr
    where = f"makeroom: {file}: {path}: "
    assert any(line.startswith(where) and message in line for line in lines), result.stderr


def write(tmp_path: Path, text: str, name: str = "dump.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_deep_nesting_is_refused_in_json_and_yaml(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    for file in (
        write(tmp_path, '{"kind": "List", "items": ' + deep + "}", "deep.json"),
        write(tmp_path, '{"kind": "List", "items": [' + "[" * 100 + "]" * 100 + "]}", "deeper-than-64.json"),
        write(tmp_path, "kind: List\nitems: " + deep + "\n", "deep.yaml"),
    ):
        result = cli("plan", file)
        assert result.exit_code == 2, result.output
        assert f"{file}: not valid" in result.stderr and "nested deeper than 64 levels" in result.stderr


def test_a_key_that_is_a_list_is_refused(tmp_path: Path) -> None:
    file = write(tmp_path, DUMP.read_text() + "? [a, b]\n: 1\n")
    result = cli("plan", file)
    assert result.exit_code == 2
    assert f"{file}: not valid YAML: line" in result.stderr and "expected a plain key" in result.stderr


def test_an_alias_bomb_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    bomb = "".join(f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 10)}]\n" for i in range(1, 10))
    text = (
        "x0: &x0 [{key: a}]\n"
        + bomb
        + DUMP.read_text().replace(
            "    tolerations:\n    - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n",
            "    tolerations: *x9\n",
            1,
        )
    )
    result = cli("plan", write(tmp_path, text))
    assert result.exit_code == 2
    assert "aliases expand to more than" in result.stderr


def test_a_list_nested_in_the_dump_is_read_as_its_items(tmp_path: Path) -> None:
    data = dump()
    pending = data["items"].pop(PENDING)
    data["items"].append({"apiVersion": "v1", "kind": "List", "items": [pending]})
    file = tmp_path / "nested.json"
    file.write_text(json.dumps(data))
    result = cli("plan", file, "--json")
    assert result.exit_code == 3, result.output  # a pod is pending now, and the plan places it
    placed = [p["pod"] for p in json.loads(result.stdout)["placements"]]
    assert placed == ["text-generator-5c7d-qwert"]  # the pod inside the nested List is planned for


def test_many_problems_are_cut_short(tmp_path: Path) -> None:
    data = dump()
    pod = data["items"][IRIS]
    for i in range(200):
        data["items"].append(
            {
                **pod,
                "metadata": {**pod["metadata"], "name": f"p{i}"},
                "spec": {**pod["spec"], "priority": "x"},
            }
        )
    file = tmp_path / "many.json"
    file.write_text(json.dumps(data))
    result = cli("plan", file)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 51 and lines[-1] == f"makeroom: {file}: ... and 150 more problems"


def test_brackets_inside_strings_are_no_nesting(tmp_path: Path) -> None:
    data = dump()
    data["items"][IRIS]["metadata"]["annotations"] = {"note": "[" * 200 + '\\"{{{' + "}" * 3}
    file = tmp_path / "brackets.json"
    file.write_text(json.dumps(data))
    result = cli("plan", file, "--json")
    assert result.exit_code == 3, result.output  # a pod is pending now, and the plan places it
