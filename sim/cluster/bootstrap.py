"""The RBAC objects a new cluster starts with, from plugin/pkg/auth/authorizer/rbac/bootstrappolicy
(policy.go, kubernetes/kubernetes v1.32.4): only the ones every identity relies on.

Every authenticated user may ask what it may do (`system:basic-user`), read discovery and the OpenAPI
documents (`system:discovery`) and the version and health endpoints (`system:public-info-viewer`);
`system:masters` is bound to `cluster-admin`. The aggregated `admin`/`edit`/`view` roles are not made.
"""

from __future__ import annotations

from typing import Any

from sim.cluster import resources
from sim.cluster.store import Store

RBAC_V1 = f"{resources.RBAC_GROUP}/v1"
META = {
    "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
    "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
}
PUBLIC_INFO = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
DISCOVERY = [
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
]
CLUSTER_ROLES: dict[str, list[dict[str, Any]]] = {
    "cluster-admin": [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
        {"nonResourceURLs": ["*"], "verbs": ["*"]},
    ],
    "system:basic-user": [
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
            "verbs": ["create"],
        },
        {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
    ],
    "system:discovery": [{"nonResourceURLs": DISCOVERY, "verbs": ["get"]}],
    "system:public-info-viewer": [{"nonResourceURLs": PUBLIC_INFO, "verbs": ["get"]}],
}
BINDINGS = {
    "cluster-admin": ["system:masters"],
    "system:basic-user": ["system:authenticated"],
    "system:discovery": ["system:authenticated"],
    "system:public-info-viewer": ["system:authenticated", "system:unauthenticated"],
}
"""ClusterRoleBinding (named as its ClusterRole) → the groups it binds."""


def create_policy(store: Store) -> None:
    for name, rules in CLUSTER_ROLES.items():
        role = {
            "kind": "ClusterRole",
            "apiVersion": RBAC_V1,
            "metadata": {"name": name, **META},
            "rules": rules,
        }
        store.create("clusterroles", role)
    for name, groups in BINDINGS.items():
        subjects = [{"kind": "Group", "apiGroup": resources.RBAC_GROUP, "name": g} for g in groups]
        binding = {
            "kind": "ClusterRoleBinding",
            "apiVersion": RBAC_V1,
            "metadata": {"name": name, **META},
            "roleRef": {"apiGroup": resources.RBAC_GROUP, "kind": "ClusterRole", "name": name},
            "subjects": subjects,
        }
        store.create("clusterrolebindings", binding)
