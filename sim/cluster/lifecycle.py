"""Two node chores of the control plane and the kubelet: the cordon taint and the node Lease.

- The node lifecycle controller keeps `node.kubernetes.io/unschedulable:NoSchedule` in step with
  `spec.unschedulable` (doNoScheduleTaintingPass in pkg/controller/nodelifecycle/
  node_lifecycle_controller.go, v1.32.4), so `kubectl cordon` shows the taint and uncordon removes it.
- Each node's kubelet holds a coordination.k8s.io/v1 Lease named after the node in `kube-node-lease`,
  owned by the Node, renewed every `node_lease_duration / 4` simulated seconds
  (pkg/kubelet/nodelease and k8s.io/component-helpers/apimachinery/lease/controller.go, v1.32.4).
"""

from __future__ import annotations

import copy
from typing import Any

from sim.cluster import fit
from sim.cluster.config import Timings
from sim.cluster.store import ADDED, DELETED, Change, Obj, Store, micro_time, rfc3339

LEASE_NAMESPACE = "kube-node-lease"  # v1.NamespaceNodeLease
RENEW_FRACTION = 0.25  # kubelet NodeLeaseRenewIntervalFraction


def wants_cordon_taint(node: Obj) -> bool | None:
    """True to add the taint, False to remove it, None when it already agrees with spec.unschedulable."""
    spec = node.get("spec") or {}
    cordoned = bool(spec.get("unschedulable"))
    tainted = any(t.get("key") == fit.UNSCHEDULABLE_TAINT for t in spec.get("taints") or [])
    return None if cordoned == tainted else cordoned


def sync_cordon_taint(node: Obj, *, now: str) -> None:
    """SwapNodeControllerTaint stamps timeAdded on every taint it adds."""
    spec = node.setdefault("spec", {})
    taints = [t for t in spec.get("taints") or [] if t.get("key") != fit.UNSCHEDULABLE_TAINT]
    if spec.get("unschedulable"):
        taints.append({"key": fit.UNSCHEDULABLE_TAINT, "effect": "NoSchedule", "timeAdded": now})
    if taints:
        spec["taints"] = taints
    else:
        spec.pop("taints", None)


def node_lease(node: Obj, *, duration: float, renewed: str) -> Obj:
    """The Lease newNodeLease builds: holder and owner are the node."""
    name = node["metadata"]["name"]
    owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
    return {
        "kind": "Lease",
        "apiVersion": "coordination.k8s.io/v1",
        "metadata": {"name": name, "namespace": LEASE_NAMESPACE, "ownerReferences": [owner]},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": int(duration), "renewTime": renewed},
    }


class NodeLifecycle:
    def __init__(self, store: Store, timings: Timings) -> None:
        self.store, self.timings = store, timings
        self.clock = store.clock
        store.subscribe(self._on_change)
        self.clock.call_later(self.renew_interval, self._renew_all)

    @property
    def renew_interval(self) -> float:
        return self.timings.node_lease_duration * RENEW_FRACTION

    def _on_change(self, change: Change) -> None:
        if change.resource != "nodes":
            return
        name = change.obj["metadata"]["name"]
        if change.type == DELETED:
            # The garbage collector removes the Lease its owner reference ties to the node.
            self.clock.call_soon(lambda: self._forget_lease(name))
            return
        if wants_cordon_taint(change.obj) is not None:
            self.clock.call_soon(lambda: self._taint(name))
        if change.type == ADDED:
            self.clock.call_soon(lambda: self._renew(name))

    def _taint(self, name: str) -> None:
        now = rfc3339(self.clock)
        node = self.store.get("nodes", "", name)
        if node is not None and wants_cordon_taint(node) is not None:
            self.store.mutate("nodes", "", name, lambda n: sync_cordon_taint(n, now=now))

    def _renew_all(self) -> None:
        for node in self.store.items("nodes"):
            self._renew(node["metadata"]["name"])
        self.clock.call_later(self.renew_interval, self._renew_all)

    def _renew(self, name: str) -> None:
        node = self.store.get("nodes", "", name)
        if node is None or self.store.get("namespaces", "", LEASE_NAMESPACE) is None:
            return
        renewed = micro_time(self.clock)
        current = self.store.get("leases", LEASE_NAMESPACE, name)
        if current is None:
            lease = node_lease(node, duration=self.timings.node_lease_duration, renewed=renewed)
            self.store.create("leases", lease)
            return
        updated = copy.deepcopy(current)
        spec: dict[str, Any] = updated.setdefault("spec", {})
        spec["renewTime"] = renewed
        self.store.replace("leases", updated)

    def _forget_lease(self, name: str) -> None:
        if self.store.get("leases", LEASE_NAMESPACE, name) is not None:
            self.store.remove("leases", LEASE_NAMESPACE, name)
