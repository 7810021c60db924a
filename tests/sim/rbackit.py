"""Shared by the RBAC tests: ServiceAccount tokens and clients that act as an identity on the sim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from sim.cluster import world

RBAC = "rbac.authorization.k8s.io"
YEAR = 365 * 24 * 3600
"""Seconds a test token lives: longer than any test advances the sim's clock."""


def service_account_token(api: client.ApiClient, namespace: str, name: str, *, seconds: int = YEAR) -> str:
    """Makes the ServiceAccount if it is missing, then asks TokenRequest for a token, as the admin."""
    core = client.CoreV1Api(api)
    if not core.list_namespaced_service_account(namespace, field_selector=f"metadata.name={name}").items:
        core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)
    )
    answer = core.create_namespaced_service_account_token(name, namespace, request)
    return str(answer.status.token)


def token_client(sim: world.BackgroundWorld, token: str) -> client.ApiClient:
    configuration = client.Configuration(host=sim.url)
    configuration.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(configuration)


def impersonating_client(sim: world.BackgroundWorld, user: str, *groups: str) -> client.ApiClient:
    """The admin acting as `user` (kubectl --as / --as-group)."""
    api = client.ApiClient(client.Configuration(host=sim.url))
    api.set_default_header("Impersonate-User", user)
    for group in groups:  # the client keeps one value per header; one group is all these tests need
        api.set_default_header("Impersonate-Group", group)
    return api


def write_token_kubeconfig(sim: world.BackgroundWorld, path: Path, token: str) -> Path:
    config: dict[str, Any] = sim.world.kubeconfig()
    config["users"][0]["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return path


def role(kind: str, name: str, rules: list[dict[str, Any]], namespace: str = "") -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": f"{RBAC}/v1", "kind": kind, "metadata": metadata, "rules": rules}


def binding(
    kind: str, name: str, role_kind: str, role_name: str, subjects: list[dict[str, Any]], namespace: str = ""
) -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": kind,
        "metadata": metadata,
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role_name},
        "subjects": subjects,
    }


def create(api: client.ApiClient, obj: dict[str, Any]) -> None:
    """Any served RBAC object (or ServiceAccount), by its kind, as `kubectl create -f` would."""
    rbac = client.RbacAuthorizationV1Api(api)
    namespace = obj["metadata"].get("namespace", "")
    if obj["kind"] == "ServiceAccount":
        client.CoreV1Api(api).create_namespaced_service_account(namespace, obj)
    elif obj["kind"] == "Role":
        rbac.create_namespaced_role(namespace, obj)
    elif obj["kind"] == "RoleBinding":
        rbac.create_namespaced_role_binding(namespace, obj)
    elif obj["kind"] == "ClusterRole":
        rbac.create_cluster_role(obj)
    elif obj["kind"] == "ClusterRoleBinding":
        rbac.create_cluster_role_binding(obj)
    else:
        raise ValueError(f"not an RBAC kind: {obj['kind']}")


def may(
    api: client.ApiClient,
    verb: str,
    resource: str,
    *,
    namespace: str = "",
    group: str = "",
    subresource: str = "",
    name: str = "",
) -> Any:
    """SelfSubjectAccessReview's status for whoever `api` is."""
    attributes = client.V1ResourceAttributes(
        verb=verb,
        resource=resource,
        group=group,
        namespace=namespace or None,
        subresource=subresource or None,
        name=name or None,
    )
    review = client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes)
    )
    return client.AuthorizationV1Api(api).create_self_subject_access_review(review).status
