"""Core: what `gpubot doctor` gathers, and the verdict each check returns; frozen values, no I/O.

The service fills these from the cluster, the store and the cloud; the checks in `doctor` and
`manifests` read only these, so every verdict and its wording is table-tested without a cluster.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.core import cluster_nodes, kueue, labels, lifecycle, models, pools, taints
from bot.core.pools import PoolView

GKE, EKS = "gke", "eks"
MAX_NODE_PROVISION_TIME = timedelta(minutes=15)
"""Cluster Autoscaler --max-node-provision-time default: a node unregistered by then is a failed scale-up."""


class Status(enum.Enum):
    PASS = "pass"
    WARN = "warn"
    """Not known to be broken, but not known to work either (e.g. a pool at zero nodes)."""
    FAIL = "fail"
    SKIP = "skip"
    """Not applicable here (e.g. EKS tags on a cluster with no EKS node group configured)."""


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    message: str
    fix: str = ""
    """What to run or edit; only failures and warnings carry one."""

    @property
    def ok(self) -> bool:
        return self.status is not Status.FAIL

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status.value,
            "ok": self.ok,
            "message": self.message,
            "fix": self.fix,
        }


# -- facts -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolFacts:
    name: str
    nodes: tuple[cluster_nodes.Node, ...] = ()
    min_size: int | None = None
    max_size: int | None = None
    autoscaled: bool | None = None
    """True when the autoscaler's status lists the pool; None when that status could not be read."""
    cloud: str = ""
    view: PoolView | None = None
    """The pool as its cloud reports it (what a new node gets); None when no cloud was asked."""

    def known_taints(self) -> tuple[taints.Taint, ...] | None:
        """The pool's configured taints: from its nodes (transient ones aside), else its cloud's view."""
        if self.nodes:
            found = {t for node in self.nodes for t in node.taints if not taints.is_transient(t)}
            return tuple(sorted(found, key=str))
        return self.view.taints if self.view else None

    def known_labels(self) -> list[Mapping[str, str]] | None:
        """Each node's labels, or the cloud's; None when nothing is known (no nodes, no cloud view)."""
        if self.nodes:
            return [node.labels for node in self.nodes]
        return [self.view.labels] if self.view else None


def source(view: PoolView) -> str:
    """Where a pool's template was read, for messages."""
    if view.cloud is pools.Cloud.GKE:
        return f"the GKE node pool's config ({view.name})"
    return f"the EKS node group ({view.name})"


def says_gpu(view: PoolView) -> bool:
    """The cloud says the pool's nodes have GPUs: accelerators, a GPU machine, or a GPU AMI."""
    return bool(view.accelerator_count or view.accelerator_type) or view.ami_type in pools.EKS_GPU_AMIS


@dataclass(frozen=True)
class AutoscalerFacts:
    text: str | None = None
    """The status ConfigMap's `status` text; None when there is no such ConfigMap."""
    last_updated: datetime | None = None
    now: datetime | None = None
    """The API server's clock when the ConfigMap was read (its Date header), else this machine's."""
    error: str = ""
    """Why the ConfigMap could not be read at all (forbidden, unreachable)."""


@dataclass(frozen=True)
class AccessRule:
    verb: str
    resource: str
    group: str = ""
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    """e.g. `log` for `pods/log`, which RBAC grants apart from the pods themselves."""

    def __str__(self) -> str:
        plain = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        resource = f"{plain}.{self.group}" if self.group else plain
        named = f"{resource}/{self.name}" if self.name else resource
        return f"{self.verb} {named}" + (f" in {self.namespace}" if self.namespace else "")


@dataclass(frozen=True)
class AccessAnswer:
    rule: AccessRule
    allowed: bool
    reason: str = ""


@dataclass(frozen=True)
class Permissions:
    answers: tuple[AccessAnswer, ...] = ()
    error: str = ""
    """Why the API server could not be asked (SelfSubjectAccessReview not served, unreachable)."""


@dataclass(frozen=True)
class Manifest:
    path: str
    text: str


@dataclass(frozen=True)
class KueueFacts:
    served: bool = False
    """The API server serves kueue.x-k8s.io/v1beta2 (Kueue's CRDs are installed)."""
    error: str = ""
    """Why Kueue's objects could not be read (other than not being served)."""
    local_queues: Mapping[str, str] = field(default_factory=dict)
    """LocalQueue name (the workload namespace's) → the ClusterQueue it points at; absent if none."""
    cluster_queues: Mapping[str, kueue.ClusterQueue] = field(default_factory=dict)


@dataclass(frozen=True)
class Facts:
    pools: tuple[PoolFacts, ...] = ()
    autoscaler: AutoscalerFacts = AutoscalerFacts()
    profiles: Mapping[str, models.GpuProfile] = field(default_factory=dict)
    profiles_error: str = ""
    manifest: Manifest | None = None
    provisioning: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    """Pool → seconds from TriggeredScaleUp to GPU allocatable, newest first, as the tracker measured them."""
    max_node_provision_time: timedelta = MAX_NODE_PROVISION_TIME
    eks: tuple[PoolView, ...] | None = None
    """The EKS node groups of the GPU pools; None when no EKS cluster was asked, so the check is skipped."""
    permissions: Permissions = Permissions()
    cluster: str = ""
    """The cluster's name on its cloud, when known, for the fix commands (else they say CLUSTER)."""
    cloud: str = ""
    """The cloud whose node pools were read (GKE or EKS); empty when none was asked."""
    cloud_error: str = ""
    """Why that cloud could not be asked; the checks then know what the cluster alone shows."""
    cluster_error: str = ""
    """Why the cluster could not be read at all (unreachable, refused); nothing else is checked then."""
    unknown_pools: tuple[str, ...] = ()
    """Pools asked for by name that neither the cluster, the autoscaler nor the cloud knows."""
    known_pools: tuple[str, ...] = ()
    """Every pool name seen, to say what `--pool` could have been."""
    kueue: KueueFacts | None = None
    """Kueue's objects, read only when a profile has `queue:`."""
    namespace: str = ""


# -- assembling pools from what the cluster says ----------------------------------------------------


def cloud_of(group_id: str, nodes: tuple[cluster_nodes.Node, ...], read: PoolView | None = None) -> str:
    if read is not None:
        return read.cloud.value
    if "/instanceGroups/gke-" in group_id or any(labels.GKE_NODEPOOL_LABEL in n.labels for n in nodes):
        return GKE
    if group_id.startswith("eks-") or any(labels.EKS_NODEGROUP_LABEL in n.labels for n in nodes):
        return EKS
    return ""


def group_pool(group_name: str, node_pools: set[str], cloud: Mapping[str, PoolView]) -> str:
    """The pool an autoscaler group scales: GKE MIG URLs name it; an EKS ASG is `eks-<nodegroup>-<id>`."""
    named = [p.name for p in cloud.values() if p.asg_name and p.asg_name == group_name]
    if named:
        return named[0]
    name = lifecycle.pool_name(group_name)
    matches = [p for p in node_pools if p and name.startswith(f"eks-{p}-")]
    return max(matches, key=len) if matches else name


def known_pools(
    nodes: list[cluster_nodes.Node], groups: Mapping[str, tuple[int, int]], cloud: Mapping[str, PoolView]
) -> set[str]:
    """Every pool the cluster, the autoscaler or the cloud names, GPU or not."""
    node_pools = {n.pool for n in nodes if n.pool} | set(cloud)
    return node_pools | {group_pool(name, node_pools, cloud) for name in groups}


def assemble_pools(
    nodes: list[cluster_nodes.Node],
    groups: Mapping[str, tuple[int, int]],
    *,
    status_readable: bool,
    cloud: Mapping[str, PoolView] | None = None,
    only: frozenset[str] = frozenset(),
) -> tuple[PoolFacts, ...]:
    """The GPU pools to check: the ones named, else those with GPU nodes, plus autoscaled pools at zero.

    A pool at zero is taken for a GPU pool unless its cloud says otherwise: the autoscaler's status says
    nothing of what a group's nodes have, and a scale-from-zero pool is what doctor is for.
    """
    cloud = cloud or {}
    node_pools = {n.pool for n in nodes} | set(cloud)
    group_of = {group_pool(name, node_pools, cloud): name for name in groups}
    at_zero = {p for p in group_of if not any(n.pool == p for n in nodes)}
    if only:
        names = set(only) & (node_pools | set(group_of))
    else:
        names = (
            {n.pool for n in nodes if n.looks_like_gpu}
            | {p for p in at_zero if p not in cloud or says_gpu(cloud[p])}
            | {p for p, read in cloud.items() if says_gpu(read)}
        )
    found = []
    for name in sorted(names):
        members = tuple(n for n in nodes if n.pool == name)
        group = group_of.get(name, "")
        low, high = groups.get(group, (None, None))
        found.append(
            PoolFacts(
                name=name,
                nodes=members,
                min_size=low,
                max_size=high,
                autoscaled=bool(group) if status_readable else None,
                cloud=cloud_of(group, members, cloud.get(name)),
                view=cloud.get(name),
            )
        )
    return tuple(found)
