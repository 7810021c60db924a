"""Core: one model of a Kubernetes Node, and the one reader that makes it from the API's dict.

The tracker, the scale episodes, the drain explanation and the doctor all read nodes; they share this
model so a node field is read (and trusted, or not) in one place. A missing or odd field never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from bot.core import labels, quantities, taints
from bot.core.fields import Body, as_map, as_maps, as_text, as_texts, as_time


@dataclass(frozen=True)
class Node:
    name: str
    ready: bool = True
    gpus: int = 0
    """Allocatable GPUs: zero until the device plugin registers with the kubelet, even on a Ready node."""
    pool: str = ""
    created: datetime | None = None
    ready_since: datetime | None = None
    """When it turned Ready: a watch that catches up late sees the node long after, and a timeline must
    still put each step where it happened."""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[taints.Taint, ...] = ()

    @property
    def has_accelerator(self) -> bool:
        return any(k in self.labels for k in (labels.GKE_ACCELERATOR_LABEL, labels.EKS_ACCELERATOR_LABEL))

    @property
    def looks_like_gpu(self) -> bool:
        return self.gpus > 0 or self.has_accelerator or any(taints.is_gpu_taint(t) for t in self.taints)


def read(node: Body) -> Node:
    """A Node dict as the API server sent it."""
    metadata = as_map(node.get("metadata"))
    return Node(
        name=as_text(metadata.get("name")),
        ready=is_ready(node),
        gpus=gpus(node),
        pool=pool_of(node),
        created=as_time(metadata.get("creationTimestamp")),
        ready_since=ready_since(node),
        labels=as_texts(metadata.get("labels")),
        annotations=as_texts(metadata.get("annotations")),
        taints=taints.from_node(node),
    )


def pool_of(node: Body) -> str:
    found = as_texts(as_map(node.get("metadata")).get("labels"))
    return next((found[key] for key in labels.POOL_LABELS if found.get(key)), "")


def is_ready(node: Body) -> bool:
    return _ready_condition(node) is not None


def ready_since(node: Body) -> datetime | None:
    """When the node last turned Ready (its Ready condition's transition), if it is Ready."""
    ready = _ready_condition(node)
    return as_time(ready.get("lastTransitionTime")) if ready else None


def gpus(node: Body) -> int:
    allocatable = as_map(as_map(node.get("status")).get("allocatable"))
    return sum(quantities.count(v) for k, v in allocatable.items() if labels.is_gpu_resource(str(k)))


def last_seen(node: Body) -> datetime | None:
    """The node's newest timestamp: creation, or a condition's transition or heartbeat."""
    metadata, status = as_map(node.get("metadata")), as_map(node.get("status"))
    moments = [as_time(metadata.get("creationTimestamp"))]
    for condition in as_maps(status.get("conditions")):
        moments += [as_time(condition.get("lastTransitionTime")), as_time(condition.get("lastHeartbeatTime"))]
    return max((m for m in moments if m is not None), default=None)


def _ready_condition(node: Body) -> Body | None:
    found = as_maps(as_map(node.get("status")).get("conditions"))
    return next((c for c in found if c.get("type") == "Ready" and c.get("status") == "True"), None)
