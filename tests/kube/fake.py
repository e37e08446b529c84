"""A small in-memory API server behind the adapter's Transport: objects by path, create/get/put/merge
patch/delete with resourceVersions and conflicts, the eviction and scale subresources, paged lists
and scripted watch streams. Only what the adapter uses; the real API server is the e2e tests' job."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from makeroom.kube.client import Transport

JSON = dict[str, Any]


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


class FakeApiServer(Transport):
    def __init__(self) -> None:
        self.objects: dict[str, JSON] = {}
        self.rv = 100
        self.calls: list[tuple[str, str, Any]] = []
        self.fail_next: list[int] = []  # statuses to answer with before serving normally
        self.blocked_evictions: set[str] = set()
        self.watch_scripts: dict[str, list[tuple[int, list[bytes]]]] = {}
        self.drop_status_fields: set[str] = set()  # status fields the "cluster" does not keep
        self.on_request: Callable[[str, str], None] | None = None
        self.refused: dict[str, int] = {}
        """Path prefix -> status for every request under it: 404 a resource the cluster does not serve
        (a CRD not installed), 403 one the caller may not touch."""

    # --- objects -----------------------------------------------------------------------------------
    def put(self, path: str, obj: JSON) -> JSON:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        self.objects[path] = obj
        return obj

    def _collection(self, path: str) -> list[JSON]:
        """Direct children, or for a cluster-wide path (/api/v1/pods) the objects of every namespace."""
        base, _, plural = path.rstrip("/").rpartition("/")
        out = []
        for p, o in sorted(self.objects.items()):
            parent, _, _name = p.rpartition("/")
            if parent == path.rstrip("/") or (
                "/namespaces/" not in path
                and parent.startswith(base + "/namespaces/")
                and parent.endswith("/" + plural)
            ):
                out.append(o)
        return out

    # --- Transport ---------------------------------------------------------------------------------
    def request(
        self, method: str, path: str, body: Any, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, bytes]:
        self.calls.append((method, path, copy.deepcopy(body)))
        if self.on_request is not None:
            self.on_request(method, path)
        if self.fail_next:
            status = self.fail_next.pop(0)
            if status == 0:
                raise ConnectionError("connection refused")
            return status, json.dumps({"kind": "Status", "message": f"injected {status}"}).encode()
        url = urlsplit(path)
        p, query = url.path, parse_qs(url.query)
        refused = next((code for prefix, code in self.refused.items() if p.startswith(prefix)), None)
        if refused is not None:
            message = "the server could not find the requested resource" if refused == 404 else "forbidden"
            return refused, json.dumps({"kind": "Status", "code": refused, "message": message}).encode()
        if method == "PATCH" and headers.get("Content-Type") == "application/apply-patch+yaml":
            return self._apply(p, query, body)
        status, answer = self._serve(method, p, query, body)
        return status, json.dumps(answer).encode()

    def _apply(self, p: str, query: Mapping[str, list[str]], body: Any) -> tuple[int, bytes]:
        """Server-side apply by one field manager that owns every field it sends: create, or replace."""
        if not query.get("fieldManager"):
            return 422, json.dumps({"kind": "Status", "message": "fieldManager is required"}).encode()
        created = p not in self.objects
        stored = self.put(p, body)
        return (201 if created else 200), json.dumps(stored).encode()

    def _serve(self, method: str, p: str, query: Mapping[str, list[str]], body: Any) -> tuple[int, Any]:
        def status(code: int, message: str) -> tuple[int, JSON]:
            return code, {"kind": "Status", "code": code, "message": message}

        if p.endswith("/eviction") and method == "POST":
            pod = p[: -len("/eviction")]
            if pod not in self.objects:
                return status(404, "pod not found")
            if pod in self.blocked_evictions:
                return status(429, "Cannot evict pod as it would violate the pod's disruption budget.")
            del self.objects[pod]
            return 201, {"kind": "Status", "status": "Success"}
        if p.endswith("/scale") and method == "PATCH":
            target = self.objects.get(p[: -len("/scale")])
            if target is None:
                return status(404, "not found")
            target["spec"]["replicas"] = body["spec"]["replicas"]
            self.put(p[: -len("/scale")], target)
            return 200, {"spec": {"replicas": target["spec"]["replicas"]}}
        if p.endswith("/status") and method == "PATCH":
            obj_path = p[: -len("/status")]
            target = self.objects.get(obj_path)
            if target is None:
                return status(404, "not found")
            patch = {"status": {k: v for k, v in body["status"].items() if k not in self.drop_status_fields}}
            return 200, self.put(obj_path, merge_patch(target, patch))
        if method == "GET":
            if p in self.objects:
                return 200, self.objects[p]
            items = self._collection(p)
            if items or p.endswith("s"):
                limit = int(query.get("limit", ["0"])[0] or 0)
                start = int(query.get("continue", ["0"])[0] or 0)
                page = items[start : start + limit] if limit else items
                cont = str(start + limit) if limit and start + limit < len(items) else ""
                return 200, {"items": page, "metadata": {"resourceVersion": str(self.rv), "continue": cont}}
            return status(404, "not found")
        if method == "POST":
            name = body["metadata"]["name"]
            target_path = f"{p}/{name}"
            if target_path in self.objects:
                return status(409, "already exists")
            return 201, self.put(target_path, body)
        if method == "PUT":
            current = self.objects.get(p)
            if current is None:
                return status(404, "not found")
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                return status(409, "the object has been modified")
            return 200, self.put(p, body)
        if method == "PATCH":
            current = self.objects.get(p)
            if current is None:
                return status(404, "not found")
            want_rv = (body.get("metadata") or {}).get("resourceVersion")
            if want_rv is not None and want_rv != current["metadata"]["resourceVersion"]:
                return status(409, "the object has been modified")
            return 200, self.put(p, merge_patch(current, body))
        if method == "DELETE":
            if self.objects.pop(p, None) is None:
                return status(404, "not found")
            return 200, {"kind": "Status", "status": "Success"}
        return status(405, "method not allowed")

    def stream(self, path: str, timeout: float) -> tuple[int, Iterator[bytes], Callable[[], None]]:
        base = urlsplit(path).path
        if self.on_request is not None:
            self.on_request("WATCH", path)
        script = self.watch_scripts.get(base) or []
        if not script:
            return 200, iter([]), lambda: None
        code, chunks = script.pop(0)
        return code, iter(chunks), lambda: None


def event_bytes(kind: str, obj: JSON) -> bytes:
    return (json.dumps({"type": kind, "object": obj}) + "\n").encode()
