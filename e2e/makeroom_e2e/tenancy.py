"""Helpers for the multi-tenancy e2e tests (tests/e2e/test_tenancy.py): the chart's cluster-scoped
objects beyond RBAC (CRDs, the ValidatingAdmissionPolicy), clients that impersonate a tenant or
makeroom's ServiceAccount, and a tenant with the usual namespace-scoped rights."""

from __future__ import annotations

import contextlib
from typing import Any

from .cluster import ControlPlane

HOOK = "helm.sh/hook"


def is_hook(obj: dict[str, Any]) -> bool:
    """A Helm hook (the pre-delete cleanup Job): not installed with the release."""
    return HOOK in ((obj.get("metadata") or {}).get("annotations") or {})


def wait_established(cp: ControlPlane, objects: list[dict[str, Any]], timeout: float = 30.0) -> None:
    """Custom resources can be served only once their CRD is Established."""
    from kubernetes import client

    ext: Any = client.ApiextensionsV1Api(cp.api)
    names = [o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"]

    def established() -> bool:
        for name in names:
            crd = ext.read_custom_resource_definition(name)
            conditions = (crd.status.conditions if crd.status else None) or []
            if not any(c.type == "Established" and c.status == "True" for c in conditions):
                return False
        return True

    cp.wait_for(established, timeout, "makeroom's CRDs established")


def delete_cluster_scoped(cp: ControlPlane, objects: list[dict[str, Any]], timeout: float = 60.0) -> None:
    """The CRDs (with any record left in them), the admission policy and its binding; waits for the
    CRDs to be gone, so that the next test can install them again."""
    from kubernetes import client

    ext: Any = client.ApiextensionsV1Api(cp.api)
    adm: Any = client.AdmissionregistrationV1Api(cp.api)
    crds = []
    for obj in objects:
        name = obj["metadata"]["name"]
        with contextlib.suppress(client.ApiException):
            if obj["kind"] == "CustomResourceDefinition":
                crds.append(name)
                ext.delete_custom_resource_definition(name)
            elif obj["kind"] == "ValidatingAdmissionPolicy":
                adm.delete_validating_admission_policy(name)
            elif obj["kind"] == "ValidatingAdmissionPolicyBinding":
                adm.delete_validating_admission_policy_binding(name)

    def gone() -> bool:
        names = {c.metadata.name for c in ext.list_custom_resource_definition().items}
        return not names & set(crds)

    cp.wait_for(gone, timeout, "makeroom's CRDs deleted")


def impersonating(cp: ControlPlane, user: str, groups: tuple[str, ...] = ()) -> Any:
    """An ApiClient whose every call is made as ``user`` (the admin's token impersonates)."""
    from kubernetes import client

    api: Any = client.ApiClient(cp.api.configuration)
    api.set_default_header("Impersonate-User", user)
    for group in groups:  # the client sends one header; one group is all these tests need
        api.set_default_header("Impersonate-Group", group)
    return api


def tenant(cp: ControlPlane, namespace: str, user: str) -> Any:
    """A namespace administered by ``user`` with Kubernetes' own `admin` ClusterRole (what a team
    gets in a shared cluster), and a client that acts as that user."""
    from kubernetes import client

    with contextlib.suppress(client.ApiException):
        cp.core.create_namespace({"metadata": {"name": namespace, "labels": {"makeroom.io/e2e": "true"}}})
    rbac: Any = client.RbacAuthorizationV1Api(cp.api)
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": f"{user}-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        },
    )
    return impersonating(cp, user, ("system:authenticated",))


def service_account_client(cp: ControlPlane, namespace: str, name: str) -> Any:
    """An ApiClient that carries a token of the ServiceAccount itself (TokenRequest), as a thief who
    read it from the pod would: no impersonation, nothing of the admin's."""
    import copy

    from kubernetes import client

    request = cp.core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 600}}
    )
    config = copy.copy(cp.api.configuration)
    config.api_key = {"authorization": f"Bearer {request.status.token}"}
    config.api_key_prefix = {}
    config.refresh_api_key_hook = None  # the kubeconfig's hook would put the admin's token back
    config.cert_file = config.key_file = None
    return client.ApiClient(config)
