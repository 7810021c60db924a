"""The resource types the API server serves, with what discovery and the client models need to know."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    singular: str
    namespaced: bool
    model: str
    """Class name in `kubernetes.client.models`: the schema writes are decoded against."""
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    store_key: str = ""
    """Resources served under two groups (events) share one store key."""

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        return self.group_version

    @property
    def key(self) -> str:
        return self.store_key or self.plural

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

PODS = Resource(
    "",
    "v1",
    "pods",
    "Pod",
    "pod",
    True,
    "V1Pod",
    ("po",),
    ("status", "binding", "eviction", "log", "ephemeralcontainers", "exec", "attach", "portforward", "proxy"),
)
NODES = Resource("", "v1", "nodes", "Node", "node", False, "V1Node", ("no",), ("status",))
EVENTS = Resource("", "v1", "events", "Event", "event", True, "CoreV1Event", ("ev",))
NAMESPACES = Resource(
    "", "v1", "namespaces", "Namespace", "namespace", False, "V1Namespace", ("ns",), ("status",)
)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", "configmap", True, "V1ConfigMap", ("cm",))
EVENTS_V1 = Resource(
    "events.k8s.io", "v1", "events", "Event", "event", True, "EventsV1Event", ("ev",), store_key="events"
)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", "lease", True, "V1Lease")
PDBS = Resource(
    "policy",
    "v1",
    "poddisruptionbudgets",
    "PodDisruptionBudget",
    "poddisruptionbudget",
    True,
    "V1PodDisruptionBudget",
    ("pdb",),
    ("status",),
)

SERVICEACCOUNTS = Resource(
    "",
    "v1",
    "serviceaccounts",
    "ServiceAccount",
    "serviceaccount",
    True,
    "V1ServiceAccount",
    ("sa",),
    ("token",),
)
RBAC_GROUP = "rbac.authorization.k8s.io"
ROLES = Resource(RBAC_GROUP, "v1", "roles", "Role", "role", True, "V1Role")
CLUSTERROLES = Resource(
    RBAC_GROUP, "v1", "clusterroles", "ClusterRole", "clusterrole", False, "V1ClusterRole"
)
ROLEBINDINGS = Resource(RBAC_GROUP, "v1", "rolebindings", "RoleBinding", "rolebinding", True, "V1RoleBinding")
CLUSTERROLEBINDINGS = Resource(
    RBAC_GROUP,
    "v1",
    "clusterrolebindings",
    "ClusterRoleBinding",
    "clusterrolebinding",
    False,
    "V1ClusterRoleBinding",
)

KUEUE_GROUP = "kueue.x-k8s.io"
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"


def _kueue_kinds(version: str) -> tuple[Resource, ...]:
    """Kueue's CRDs as v0.19.2 declares them (kubernetes-sigs/kueue config/components/crd/bases/
    kueue.x-k8s.io_*.yaml: names, scope, shortNames, the status subresource); no client model, so `model`
    is ""."""
    return (
        Resource(
            KUEUE_GROUP,
            version,
            "resourceflavors",
            "ResourceFlavor",
            "resourceflavor",
            False,
            "",
            ("flavor", "flavors", "rf"),
            store_key=f"resourceflavors.{KUEUE_GROUP}",
        ),
        Resource(
            KUEUE_GROUP,
            version,
            "clusterqueues",
            "ClusterQueue",
            "clusterqueue",
            False,
            "",
            ("cq",),
            ("status",),
            store_key=f"clusterqueues.{KUEUE_GROUP}",
        ),
        Resource(
            KUEUE_GROUP,
            version,
            "localqueues",
            "LocalQueue",
            "localqueue",
            True,
            "",
            ("queue", "queues", "lq"),
            ("status",),
            store_key=f"localqueues.{KUEUE_GROUP}",
        ),
        Resource(
            KUEUE_GROUP,
            version,
            "workloads",
            "Workload",
            "workload",
            True,
            "",
            ("kwl", "kueueworkload", "kueueworkloads"),
            ("status",),
            store_key=f"workloads.{KUEUE_GROUP}",
        ),
    )


def _visibility_kinds(version: str) -> tuple[Resource, ...]:
    """Kueue's aggregated visibility API (pkg/visibility/server.go at v0.19.2 serves v1beta2 and v1beta1
    from one storage): the queues themselves answer no verb, only their `pendingworkloads` subresource
    a get."""
    return (
        Resource(
            VISIBILITY_GROUP,
            version,
            "clusterqueues",
            "ClusterQueue",
            "clusterqueue",
            False,
            "",
            subresources=("pendingworkloads",),
        ),
        Resource(
            VISIBILITY_GROUP,
            version,
            "localqueues",
            "LocalQueue",
            "localqueue",
            True,
            "",
            subresources=("pendingworkloads",),
        ),
    )


KUEUE = (*_kueue_kinds("v1beta2"), *_kueue_kinds("v1beta1"))
VISIBILITY = (*_visibility_kinds("v1beta2"), *_visibility_kinds("v1beta1"))

BUILT_IN = (
    PODS,
    NODES,
    EVENTS,
    NAMESPACES,
    CONFIGMAPS,
    EVENTS_V1,
    LEASES,
    PDBS,
    SERVICEACCOUNTS,
    ROLES,
    CLUSTERROLES,
    ROLEBINDINGS,
    CLUSTERROLEBINDINGS,
)
ALL = (*BUILT_IN, *KUEUE, *VISIBILITY)
"""Everything the sim can serve; a world without Kueue serves BUILT_IN only, so discovery tells them apart."""


def group_versions(served: Sequence[Resource] = ALL) -> dict[str, list[Resource]]:
    """`v1` and `G/V` → the resources served there, in a stable order."""
    out: dict[str, list[Resource]] = {}
    for res in served:
        out.setdefault(res.group_version, []).append(res)
    return out


def lookup(group: str, version: str, plural: str, served: Sequence[Resource] = ALL) -> Resource | None:
    for res in served:
        if (res.group, res.version, res.plural) == (group, version, plural):
            return res
    return None
