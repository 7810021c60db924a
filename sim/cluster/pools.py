"""Node pools: the cloud's side of the cluster, shared by the GKE and EKS APIs and the autoscaler.

A pool is the node group the Cluster Autoscaler scales. The cloud APIs change pools here; the
node lifecycle controller makes the Node objects follow `target_size`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sim.clock import Clock
from sim.cluster import messages

GKE = "gke"
EKS = "eks"

PROVISIONING, RUNNING, STOPPING, ERROR = "PROVISIONING", "RUNNING", "STOPPING", "ERROR"
"""A pool's life at its cloud (GKE's NodePool.Status words; EKS says CREATING, ACTIVE, DELETING and
CREATE_FAILED)."""


@dataclass(frozen=True)
class Machine:
    cpu_milli: int
    memory_bytes: int
    gpus: int = 0
    accelerator: str = ""


GIB = 1024**3

MACHINES: dict[str, Machine] = {
    "e2-standard-4": Machine(4000, 16 * GIB),
    "e2-medium": Machine(2000, 4 * GIB),
    "n1-standard-4": Machine(4000, 15 * GIB),
    "n1-standard-8": Machine(8000, 30 * GIB),
    "g2-standard-4": Machine(4000, 16 * GIB, 1, "nvidia-l4"),
    "a2-highgpu-1g": Machine(12000, 85 * GIB, 1, "nvidia-tesla-a100"),
    "m5.xlarge": Machine(4000, 16 * GIB),
    "g4dn.xlarge": Machine(4000, 16 * GIB, 1, "nvidia-tesla-t4"),
    "g5.xlarge": Machine(4000, 16 * GIB, 1, "nvidia-a10g"),
    "p4d.24xlarge": Machine(96000, 1152 * GIB, 8, "nvidia-tesla-a100"),
}
DEFAULT_MACHINE = Machine(4000, 16 * GIB)


def machine(machine_type: str) -> Machine:
    """Unknown machine types get a plain 4-vCPU shape rather than an error: the sim is forgiving here."""
    return MACHINES.get(machine_type, DEFAULT_MACHINE)


@dataclass
class Taint:
    key: str
    value: str
    effect: str
    """Kubernetes spelling: NoSchedule, PreferNoSchedule, NoExecute."""


@dataclass
class NodePool:
    name: str
    cloud: str
    machine_type: str
    min_size: int = 0
    max_size: int = 0
    autoscaling: bool = False
    target_size: int = 0
    """The cloud provider's target: how many nodes the pool should have right now."""
    accelerator_type: str = ""
    accelerator_count: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    zone: str = "local-a"
    created_at: float = 0.0
    version: str = messages.GKE_VERSION
    extra: dict[str, Any] = field(default_factory=dict)
    """What the cloud API was given and echoes back (GKE config, EKS subnets/nodeRole/tags, ...)."""
    status: str = RUNNING
    status_until: float = 0.0
    """When a PROVISIONING pool turns RUNNING, or a STOPPING one is gone (simulated seconds)."""

    @property
    def serving(self) -> bool:
        """Only a RUNNING pool has nodes started or scaled: not one being created or deleted."""
        return self.status == RUNNING

    @property
    def gpus_per_node(self) -> int:
        return self.accelerator_count or machine(self.machine_type).gpus

    @property
    def accelerator(self) -> str:
        return self.accelerator_type or machine(self.machine_type).accelerator

    def group_id(self) -> str:
        """The autoscaler's node-group id: the MIG URL on GKE, the ASG name on AWS."""
        if self.cloud == GKE:
            return (
                f"https://www.googleapis.com/compute/v1/projects/demo/zones/{self.zone}"
                f"/instanceGroups/gke-demo-{self.name}-grp"
            )
        return f"eks-{self.name}-asg"


class PoolError(Exception):
    pass


class PoolNotFound(PoolError):
    pass


class PoolExists(PoolError):
    pass


Rows = list[dict[str, Any]]
PoolList = list["NodePool"]
TaintList = list["Taint"]


class PoolRegistry:
    """All node pools of the simulated cloud; listeners hear of every change by pool name."""

    def __init__(self) -> None:
        self._pools: dict[str, NodePool] = {}
        self._listeners: list[Callable[[str], None]] = []

    def subscribe(self, listener: Callable[[str], None]) -> None:
        self._listeners.append(listener)

    def _changed(self, name: str) -> None:
        for listener in self._listeners:
            listener(name)

    def create(self, pool: NodePool) -> NodePool:
        if pool.name in self._pools:
            raise PoolExists(pool.name)
        pool.target_size = max(pool.target_size, pool.min_size if pool.autoscaling else 0)
        self._pools[pool.name] = pool
        self._changed(pool.name)
        return pool

    def get(self, name: str) -> NodePool:
        try:
            return self._pools[name]
        except KeyError:
            raise PoolNotFound(name) from None

    def list(self, cloud: str | None = None) -> PoolList:
        return [p for p in self._pools.values() if cloud is None or p.cloud == cloud]

    def delete(self, name: str) -> NodePool:
        """Removes the pool at once; the node controller then drains and removes its nodes."""
        pool = self.get(name)
        del self._pools[name]
        self._changed(name)
        return pool

    def set_autoscaling(self, name: str, *, enabled: bool, min_size: int, max_size: int) -> NodePool:
        pool = self.get(name)
        pool.autoscaling, pool.min_size, pool.max_size = enabled, min_size, max_size
        if enabled:
            pool.target_size = min(max(pool.target_size, min_size), max_size)
        self._changed(name)
        return pool

    def set_size(self, name: str, size: int) -> NodePool:
        pool = self.get(name)
        pool.target_size = max(size, 0)
        self._changed(name)
        return pool

    def update(
        self, name: str, *, labels: dict[str, str] | None = None, taints: TaintList | None = None
    ) -> NodePool:
        """New labels and taints apply to nodes created from now on, as on GKE."""
        pool = self.get(name)
        if labels is not None:
            pool.labels = dict(labels)
        if taints is not None:
            pool.taints = list(taints)
        self._changed(name)
        return pool

    def snapshot(self) -> Rows:
        return [
            copy.deepcopy(vars(p)) | {"taints": [vars(t) for t in p.taints]} for p in self._pools.values()
        ]

    def restore(self, rows: Rows) -> None:
        for row in rows:
            row = dict(row)
            row["taints"] = [Taint(**t) for t in row.get("taints", [])]
            self._pools[row["name"]] = NodePool(**row)


class Transitions:
    """Creating and deleting a pool take time at a cloud: PROVISIONING, then RUNNING; STOPPING, then gone.

    Kept on the pool itself (status, status_until), so a restart from saved state finishes them on time.
    """

    def __init__(self, registry: PoolRegistry, clock: Clock) -> None:
        self.registry, self.clock = registry, clock

    def create(self, pool: NodePool, seconds: float, *, fails: bool = False) -> NodePool:
        """`fails`: the pool ends in ERROR instead of RUNNING, and never gets a node."""
        if seconds > 0:
            pool.status, pool.status_until = PROVISIONING, self.clock.now() + seconds
            pool.extra["fails"] = fails
        elif fails:
            pool.status = ERROR
        created = self.registry.create(pool)
        self._schedule(pool)
        return created

    def delete(self, name: str, seconds: float) -> NodePool:
        pool = self.registry.get(name)
        if seconds <= 0:
            return self.registry.delete(name)
        pool.status, pool.status_until = STOPPING, self.clock.now() + seconds
        self.registry.update(name)
        self._schedule(pool)
        return pool

    def resume(self) -> None:
        """After a restore: pools caught mid-way finish at their time (at once if it has passed)."""
        for pool in self.registry.list():
            self._schedule(pool)

    def _schedule(self, pool: NodePool) -> None:
        if pool.status in (PROVISIONING, STOPPING):
            self.clock.call_later(pool.status_until - self.clock.now(), lambda: self._finish(pool))

    def _finish(self, pool: NodePool) -> None:
        """Checks identity, so a pool re-created under the same name is not touched by a stale timer."""
        try:
            if self.registry.get(pool.name) is not pool:
                return
        except PoolNotFound:
            return
        if pool.status == STOPPING:
            self.registry.delete(pool.name)
        elif pool.status == PROVISIONING:
            pool.status = ERROR if pool.extra.pop("fails", False) else RUNNING
            self.registry.update(pool.name)
