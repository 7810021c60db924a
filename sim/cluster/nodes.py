"""Node lifecycle: Node objects follow each pool's target size, and new nodes come up as on GKE.

A new node registers NotReady with the not-ready and uninitialized taints, turns Ready, and only
later shows `nvidia.com/gpu` in allocatable once the driver and device plugin are up.
"""

from __future__ import annotations

import functools
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

from sim.cluster import events, messages, pools
from sim.cluster.config import Faults, Timings
from sim.cluster.store import Obj, Store, rfc3339

logger = logging.getLogger(__name__)

GPU = "nvidia.com/gpu"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNINITIALIZED_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler"
POOL_LABEL = "cloud.google.com/gke-nodepool"
EKS_POOL_LABEL = "eks.amazonaws.com/nodegroup"
KUBELET_VERSION = messages.GIT_VERSION


@dataclass
class Instance:
    """A VM the cloud is starting for a pool, not yet registered as a Node."""

    name: str
    pool: str
    requested_at: float


@dataclass
class PoolNodes:
    instances: list[Instance] = field(default_factory=list)


def node_name(pool: pools.NodePool) -> str:
    if pool.cloud == pools.EKS:
        return f"ip-10-0-{secrets.randbelow(255)}-{secrets.randbelow(255)}.ec2.internal"
    return f"gke-demo-{pool.name}-{secrets.token_hex(4)}-{secrets.token_hex(2)}"


def pool_of(node: Obj) -> str:
    labels = node["metadata"].get("labels") or {}
    return str(labels.get(POOL_LABEL) or labels.get(EKS_POOL_LABEL) or "")


def template_labels(pool: pools.NodePool, name: str) -> dict[str, str]:
    """The labels a node of this pool carries; the autoscaler's template uses the same."""
    shape = pools.machine(pool.machine_type)
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": pool.machine_type,
        "topology.kubernetes.io/zone": pool.zone,
        "topology.kubernetes.io/region": pool.zone.rsplit("-", 1)[0],
    }
    if pool.cloud == pools.GKE:
        labels |= {
            POOL_LABEL: pool.name,
            "cloud.google.com/gke-os-distribution": "cos",
            "cloud.google.com/machine-family": pool.machine_type.split("-")[0],
            "cloud.google.com/gke-boot-disk": "pd-balanced",
        }
        if pool.accelerator:
            labels |= {
                "cloud.google.com/gke-accelerator": pool.accelerator,
                "cloud.google.com/gke-gpu": "true",
                "cloud.google.com/gke-gpu-driver-version": "default",
                "nvidia.com/gpu.present": "true",
            }
    else:
        labels |= {EKS_POOL_LABEL: pool.name, "eks.amazonaws.com/capacityType": "ON_DEMAND"}
        if pool.accelerator:
            labels["k8s.amazonaws.com/accelerator"] = pool.accelerator
    del shape
    return labels | pool.labels


def capacity(pool: pools.NodePool, *, with_gpus: bool) -> dict[str, str]:
    shape = pools.machine(pool.machine_type)
    out = {
        "cpu": f"{shape.cpu_milli // 1000}",
        "memory": f"{shape.memory_bytes // 1024}Ki",
        "pods": "110",
        "ephemeral-storage": "98831908Ki",
    }
    if with_gpus and pool.gpus_per_node:
        out[GPU] = str(pool.gpus_per_node)
    return out


def allocatable(pool: pools.NodePool, *, with_gpus: bool) -> dict[str, str]:
    """Capacity less what GKE reserves for the system (roughly 6% of CPU, 1.5 GiB of memory)."""
    shape = pools.machine(pool.machine_type)
    out = capacity(pool, with_gpus=with_gpus)
    out["cpu"] = f"{shape.cpu_milli - 60 - shape.cpu_milli // 25}m"
    out["memory"] = f"{max(shape.memory_bytes - 1536 * 1024 * 1024, 0) // 1024}Ki"
    out["ephemeral-storage"] = "47060071478"
    return out


def template_node(pool: pools.NodePool) -> Obj:
    """What the autoscaler believes a new node of the pool will look like once ready."""
    name = f"template-node-for-{pool.name}"
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": name, "labels": template_labels(pool, name)},
        "spec": {"taints": [vars(t) for t in pool.taints]},
        "status": {
            "allocatable": allocatable(pool, with_gpus=True),
            "capacity": capacity(pool, with_gpus=True),
        },
    }


def is_ready(node: Obj) -> bool:
    for condition in node.get("status", {}).get("conditions", []):
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def has_unready_gpu(node: Obj) -> bool:
    """CA's GPU processor: a node labelled as GPU with no GPU allocatable yet is treated as unready."""
    labels = node["metadata"].get("labels") or {}
    gpu_node = "cloud.google.com/gke-accelerator" in labels or "k8s.amazonaws.com/accelerator" in labels
    return gpu_node and not node.get("status", {}).get("allocatable", {}).get(GPU)


class NodeController:
    """Makes Node objects follow pool target sizes, through the same store as every other write."""

    def __init__(
        self,
        store: Store,
        registry: pools.PoolRegistry,
        recorder: events.Recorder,
        timings: Timings,
        faults: Faults,
    ) -> None:
        self.store, self.registry, self.recorder = store, registry, recorder
        self.timings, self.faults = timings, faults
        self.clock = store.clock
        self.pending: dict[str, PoolNodes] = {}
        self._ip = 10
        registry.subscribe(self._pool_changed)

    def _pool_changed(self, name: str) -> None:
        self.clock.call_soon(lambda: self.reconcile(name))

    # -- queries the autoscaler uses ---------------------------------------------------------
    def nodes_of(self, pool: str) -> list[Obj]:
        """The pool's Node objects, read-only (the store's own, not copies: this runs every scan)."""
        return [n for n in self.store.iter_raw("nodes") if pool_of(n) == pool]

    def instances_of(self, pool: str) -> list[Instance]:
        return list(self.pending.get(pool, PoolNodes()).instances)

    # -- reconciling -------------------------------------------------------------------------
    def reconcile(self, pool_name: str) -> None:
        try:
            pool = self.registry.get(pool_name)
        except pools.PoolNotFound:
            self._drain_pool(pool_name)
            return
        live = [n for n in self.nodes_of(pool_name) if not _being_deleted(n)]
        waiting = self.pending.setdefault(pool_name, PoolNodes()).instances
        have = len(live) + len(waiting)
        # A pool being created has no nodes yet; one being deleted loses them during the deletion.
        target = pool.target_size if pool.serving else 0
        for _ in range(target - have):
            self._start_instance(pool)
        surplus = have - target
        while surplus > 0 and waiting:
            waiting.pop()
            surplus -= 1
        for node in sorted(live, key=lambda n: n["metadata"]["creationTimestamp"], reverse=True)[
            : max(surplus, 0)
        ]:
            self.delete_node(node["metadata"]["name"])

    def _start_instance(self, pool: pools.NodePool) -> None:
        instance = Instance(node_name(pool), pool.name, self.clock.now())
        self.pending.setdefault(pool.name, PoolNodes()).instances.append(instance)
        if pool.name not in self.faults.never_register:
            self.clock.call_later(self.timings.provision_delay, lambda: self._register(instance))

    def forget_instances(self, pool_name: str, count: int) -> list[Instance]:
        """The autoscaler gives up on instances that never registered."""
        waiting = self.pending.get(pool_name, PoolNodes()).instances
        dropped = waiting[:count]
        del waiting[:count]
        return dropped

    def add_ready_nodes(self, pool: pools.NodePool, count: int) -> None:
        """World start-up: nodes that were already there, Ready, with GPUs allocatable."""
        for _ in range(count):
            name = node_name(pool)
            self.store.create("nodes", self._node_object(pool, name, ready=True))

    def _register(self, instance: Instance) -> None:
        waiting = self.pending.get(instance.pool, PoolNodes()).instances
        if instance not in waiting:
            return
        try:
            pool = self.registry.get(instance.pool)
        except pools.PoolNotFound:
            return
        waiting.remove(instance)
        node = self.store.create("nodes", self._node_object(pool, instance.name, ready=False))
        for reason, message in (
            ("Starting", messages.STARTING_KUBELET),
            ("NodeHasSufficientMemory", messages.node_status_now(instance.name, "NodeHasSufficientMemory")),
            ("NodeAllocatableEnforced", messages.ALLOCATABLE_ENFORCED),
        ):
            self.recorder.record(
                node, "Normal", reason, message, component=messages.KUBELET, host=instance.name
            )
        self.recorder.record(
            node,
            "Normal",
            "RegisteredNode",
            messages.registered_node(instance.name),
            component="node-controller",
        )
        self.clock.call_later(self.timings.node_ready_delay, lambda: self._mark_ready(instance.name))

    def _node_object(self, pool: pools.NodePool, name: str, *, ready: bool) -> Obj:
        self._ip += 1
        taints: list[dict[str, Any]] = [vars(t).copy() for t in pool.taints]
        if not ready:
            taints += [
                {"key": NOT_READY_TAINT, "effect": "NoSchedule", "timeAdded": rfc3339(self.clock)},
                {"key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"},
            ]
        now = rfc3339(self.clock)
        ready_condition = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": messages.KUBELET_READY_REASON if ready else messages.KUBELET_NOT_READY_REASON,
            "message": messages.KUBELET_READY if ready else messages.KUBELET_NOT_READY,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        provider = (
            f"gce://demo/{pool.zone}/{name}"
            if pool.cloud == pools.GKE
            else f"aws:///{pool.zone}/i-{secrets.token_hex(8)}"
        )
        annotations = {"node.alpha.kubernetes.io/ttl": "0"}
        if pool.taints and pool.cloud == pools.GKE:
            annotations["node.gke.io/last-applied-node-taints"] = ",".join(
                f"{t.key}={t.value}:{t.effect}" for t in pool.taints
            )
        return {
            "kind": "Node",
            "apiVersion": "v1",
            "metadata": {"name": name, "labels": template_labels(pool, name), "annotations": annotations},
            "spec": {"providerID": provider, "podCIDR": f"10.4.{self._ip}.0/24", "taints": taints},
            "status": {
                "capacity": capacity(pool, with_gpus=ready),
                "allocatable": allocatable(pool, with_gpus=ready),
                "conditions": [
                    {
                        "type": t,
                        "status": "False",
                        "reason": r,
                        "message": m,
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                    for t, r, m in messages.NODE_PRESSURE_CONDITIONS
                ]
                + [ready_condition],
                "addresses": [
                    {"type": "InternalIP", "address": f"10.128.0.{self._ip}"},
                    {"type": "Hostname", "address": name},
                ],
                "nodeInfo": {
                    "kubeletVersion": KUBELET_VERSION,
                    "kubeProxyVersion": KUBELET_VERSION,
                    "osImage": "Container-Optimized OS from Google",
                    "kernelVersion": "6.6.72+",
                    "containerRuntimeVersion": "containerd://1.7.27",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "machineID": secrets.token_hex(16),
                    "systemUUID": secrets.token_hex(16),
                    "bootID": secrets.token_hex(16),
                },
            },
        }

    def _mark_ready(self, name: str) -> None:
        def ready(node: Obj) -> None:
            node["spec"]["taints"] = [
                t
                for t in node["spec"].get("taints", [])
                if t["key"] not in (NOT_READY_TAINT, UNINITIALIZED_TAINT)
            ]
            now = rfc3339(self.clock)
            for condition in node["status"]["conditions"]:
                if condition["type"] == "Ready":
                    condition.update(
                        status="True",
                        reason=messages.KUBELET_READY_REASON,
                        message=messages.KUBELET_READY,
                        lastHeartbeatTime=now,
                        lastTransitionTime=now,
                    )

        node = self.store.mutate("nodes", "", name, ready)
        if node is None:
            return
        self.recorder.record(
            node,
            "Normal",
            "NodeReady",
            messages.node_status_now(name, "NodeReady"),
            component=messages.KUBELET,
            host=name,
        )
        if has_unready_gpu(node):
            self.clock.call_later(self.timings.gpu_plugin_delay, lambda: self._gpus_up(name))

    def resume(self) -> None:
        """After a restart from saved state: finish bringing up nodes that were on their way."""
        for node in self.store.items("nodes"):
            name = node["metadata"]["name"]
            if not is_ready(node):
                self.clock.call_later(
                    self.timings.node_ready_delay, functools.partial(self._mark_ready, name)
                )
            elif has_unready_gpu(node):
                self.clock.call_later(self.timings.gpu_plugin_delay, functools.partial(self._gpus_up, name))

    def _gpus_up(self, name: str) -> None:
        node = self.store.get("nodes", "", name)
        if node is None:
            return
        try:
            pool = self.registry.get(pool_of(node))
        except pools.PoolNotFound:
            return

        def add_gpus(node: Obj) -> None:
            node["status"]["capacity"][GPU] = str(pool.gpus_per_node)
            node["status"]["allocatable"][GPU] = str(pool.gpus_per_node)

        self.store.mutate("nodes", "", name, add_gpus)

    # -- removal -----------------------------------------------------------------------------
    def delete_node(self, name: str) -> None:
        """The cloud deletes the VM: pods on it are gone with it, then the Node object."""
        for pod in self.store.items("pods"):
            if pod["spec"].get("nodeName") == name:
                self.store.remove("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
        if self.store.get("nodes", "", name) is not None:
            self.store.remove("nodes", "", name)

    def _drain_pool(self, pool_name: str) -> None:
        self.pending.pop(pool_name, None)
        for node in self.nodes_of(pool_name):
            self.delete_node(node["metadata"]["name"])


def _being_deleted(node: Obj) -> bool:
    return any(t.get("key") == TO_BE_DELETED_TAINT for t in node.get("spec", {}).get("taints", []))
