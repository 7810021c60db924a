"""Kueue's controllers, minimal, on the sim clock: workloads for queued pods, admission in queue order within
the nominal quota, ungating with the flavor's node labels, finishing, and the queues' status counts.

Upstream (kubernetes-sigs/kueue v0.19.2): jobframework/reconciler.go (ConstructWorkload, Finished),
pkg/scheduler/scheduler.go (admit, requeueAndUpdate's Pending condition), pkg/workload/workload.go
(SetQuotaReservation), pkg/workload/admissionchecks.go (SyncAdmittedCondition), pkg/controller/jobs/pod
(Run: podset.Merge of nodeSelector and tolerations, then ungate), pkg/controller/core/workload_controller.go
(getQueueBlocker's Inadmissible messages).
"""

from __future__ import annotations

import copy
from typing import Any

from sim.cluster import fit, kueueapi
from sim.cluster.kueue import (
    CLUSTER_QUEUES,
    FLAVORS,
    GATE,
    JOB_UID_LABEL,
    LOCAL_QUEUES,
    MANAGED_LABEL,
    POD_SET,
    QUEUE_LABEL,
    STRICT_FIFO,
    WATCHED,
    WORKLOADS,
    flavor_quotas,
    is_pending,
    is_true,
    no_fit_message,
    pending_in,
    quantity,
    requests,
    set_condition,
    workload_name,
)
from sim.cluster.store import Change, Obj, Store, rfc3339


class Kueue:
    def __init__(self, store: Store) -> None:
        self.store, self.clock = store, store.clock
        self._queued = False
        store.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        if change.resource in WATCHED and not self._queued:
            self._queued = True
            self.clock.call_soon(self.run_pass)

    def run_pass(self) -> None:
        self._queued = False
        self.sync_workloads()
        self.mark_misconfigured()
        for cq in list(self.store.iter_raw(CLUSTER_QUEUES)):
            self.admit(cq)
        self.write_queue_status()

    # -- jobframework: one workload per managed pod ----------------------------------------------------------
    def sync_workloads(self) -> None:
        pods = {p["metadata"]["uid"]: p for p in self.store.iter_raw("pods")}
        owned: set[str] = set()
        for wl in list(self.store.iter_raw(WORKLOADS)):
            owner: dict[str, Any] = next(iter(wl["metadata"].get("ownerReferences") or []), {})
            if owner.get("kind") != "Pod":
                continue  # a Workload made by hand (or another integration) is not a pod's to finish
            pod = pods.get(owner.get("uid", ""))
            meta = wl["metadata"]
            if pod is None:  # the garbage collector follows the controller reference
                self.store.remove(WORKLOADS, meta["namespace"], meta["name"])
                continue
            owned.add(owner["uid"])
            phase = pod.get("status", {}).get("phase")
            if phase in fit.TERMINAL_PHASES and not is_true(wl, "Finished"):
                reason = "Succeeded" if phase == "Succeeded" else "Failed"
                message = pod.get("status", {}).get("message", "")
                self._set(wl, "Finished", "True", reason, message)
        for uid, pod in pods.items():
            labels = pod["metadata"].get("labels") or {}
            managed = labels.get(MANAGED_LABEL) == "true" and labels.get(QUEUE_LABEL)
            if uid not in owned and managed and pod.get("status", {}).get("phase") not in fit.TERMINAL_PHASES:
                self.store.create(WORKLOADS, new_workload(pod))

    def mark_misconfigured(self) -> None:
        """getQueueBlocker, legacy form (UnadmittedWorkloadsObservability off): reason Inadmissible."""
        for wl in list(self.store.iter_raw(WORKLOADS)):
            if not is_pending(wl):
                continue
            meta, queue = wl["metadata"], (wl.get("spec") or {}).get("queueName", "")
            lq = self.store.get(LOCAL_QUEUES, meta["namespace"], queue)
            cq_name = ((lq or {}).get("spec") or {}).get("clusterQueue", "")
            if lq is None:
                message = f"LocalQueue {queue} doesn't exist"
            elif self.store.get(CLUSTER_QUEUES, "", cq_name) is None:
                message = f"ClusterQueue {cq_name} doesn't exist"
            else:
                continue
            self._set(wl, "QuotaReserved", "False", "Inadmissible", message)

    # -- the scheduler: admission within the nominal quota ---------------------------------------------------
    def admit(self, cq: Obj) -> None:
        name = cq["metadata"]["name"]
        quotas = flavor_quotas(cq)
        used: fit.Resources = {}
        for wl in self.store.iter_raw(WORKLOADS):
            admission = (wl.get("status") or {}).get("admission") or {}
            if admission.get("clusterQueue") == name and not is_true(wl, "Finished"):
                fit.add_resources(used, requests(wl))
        strict = (cq.get("spec") or {}).get("queueingStrategy") == STRICT_FIFO
        for wl in pending_in(self.store, name):
            need = requests(wl)
            message = no_fit_message(need, used, quotas)
            if message:
                self._mark_pending(wl, need, message)
                if strict:  # StrictFIFO: the head blocks the rest of the queue
                    return
                continue
            fit.add_resources(used, need)
            self._admit(wl, name, need, quotas)

    def _mark_pending(self, wl: Obj, need: fit.Resources, message: str) -> None:
        """requeueAndUpdate: QuotaReserved=False, reason Pending (UnadmittedWorkloadsObservability is off by
        default at v0.19.2), with the pod set's requests in status.resourceRequests."""

        def change(w: Obj) -> None:
            set_condition(w, "QuotaReserved", "False", "Pending", message, self.now())
            w["status"]["resourceRequests"] = [
                {"name": POD_SET, "resources": {k: quantity(k, v) for k, v in sorted(need.items())}}
            ]

        self.store.mutate(WORKLOADS, wl["metadata"]["namespace"], wl["metadata"]["name"], change)

    def _admit(self, wl: Obj, cq_name: str, need: fit.Resources, quotas: dict[str, tuple[str, int]]) -> None:
        flavors = {k: quotas[k][0] for k in sorted(need)}
        admission = {
            "clusterQueue": cq_name,
            "podSetAssignments": [
                {
                    "name": POD_SET,
                    "flavors": flavors,
                    "resourceUsage": {k: quantity(k, v) for k, v in sorted(need.items())},
                    "count": 1,
                }
            ],
        }

        def change(w: Obj) -> None:
            now = self.now()
            w["status"]["admission"] = admission
            set_condition(
                w, "QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq_name}", now
            )
            set_condition(w, "Admitted", "True", "Admitted", "The workload is admitted", now)

        meta = wl["metadata"]
        self.store.mutate(WORKLOADS, meta["namespace"], meta["name"], change)
        owner: dict[str, Any] = next(iter(meta.get("ownerReferences") or []), {})
        labels, tolerations = self._flavor_placement(set(flavors.values()))
        self.store.mutate(
            "pods", meta["namespace"], owner.get("name", ""), lambda p: ungate(p, labels, tolerations)
        )

    def _flavor_placement(self, names: set[str]) -> tuple[dict[str, str], list[Obj]]:
        labels: dict[str, str] = {}
        tolerations: list[Obj] = []
        for name in sorted(names):
            flavor = self.store.get(FLAVORS, "", name) or {}
            labels.update((flavor.get("spec") or {}).get("nodeLabels") or {})
            tolerations += (flavor.get("spec") or {}).get("tolerations") or []
        return labels, tolerations

    # -- status counts ---------------------------------------------------------------------------------------
    def write_queue_status(self) -> None:
        counts: dict[tuple[str, str], list[int]] = {}  # (namespace, name) of a queue → pending, reserving
        for wl in self.store.iter_raw(WORKLOADS):
            if is_true(wl, "Finished"):
                continue
            admission = (wl.get("status") or {}).get("admission") or {}
            slot = 1 if admission else 0
            lq = (wl["metadata"]["namespace"], (wl.get("spec") or {}).get("queueName", ""))
            counts.setdefault(lq, [0, 0])[slot] += 1
            cq = ("", admission.get("clusterQueue") or self._cluster_queue_of(*lq))
            counts.setdefault(cq, [0, 0])[slot] += 1
        for kind, message in (
            (LOCAL_QUEUES, "Can submit new workloads to localQueue"),
            (CLUSTER_QUEUES, "Can admit new workloads"),
        ):
            for queue in list(self.store.iter_raw(kind)):
                meta = queue["metadata"]
                pending, reserving = counts.get((meta.get("namespace", ""), meta["name"]), [0, 0])

                def change(
                    q: Obj, pending: int = pending, reserving: int = reserving, message: str = message
                ) -> None:
                    q.setdefault("status", {}).update(
                        pendingWorkloads=pending, reservingWorkloads=reserving, admittedWorkloads=reserving
                    )
                    set_condition(q, "Active", "True", "Ready", message, self.now())

                self.store.mutate(kind, meta.get("namespace", ""), meta["name"], change)

    def _cluster_queue_of(self, namespace: str, queue: str) -> str:
        lq = self.store.get(LOCAL_QUEUES, namespace, queue)
        return str(((lq or {}).get("spec") or {}).get("clusterQueue", ""))

    def _set(self, wl: Obj, kind: str, status: str, reason: str, message: str) -> None:
        def change(w: Obj) -> None:
            set_condition(w, kind, status, reason, message, self.now())

        self.store.mutate(WORKLOADS, wl["metadata"]["namespace"], wl["metadata"]["name"], change)

    def now(self) -> str:
        return rfc3339(self.clock)


def new_workload(pod: Obj) -> Obj:
    """ConstructWorkload for a plain pod: one pod set `main`, the pod's priority, a controller reference."""
    meta, spec = pod["metadata"], pod["spec"]
    wl_spec: dict[str, Any] = {
        "active": True,
        "queueName": meta["labels"][QUEUE_LABEL],
        "podSets": [{"name": POD_SET, "count": 1, "template": {"metadata": {}, "spec": copy.deepcopy(spec)}}],
        "priority": int(spec.get("priority") or 0),
    }
    if spec.get("priorityClassName"):
        wl_spec["priorityClassRef"] = {
            "group": kueueapi.POD_PRIORITY_GROUP,
            "kind": kueueapi.POD_PRIORITY_KIND,
            "name": spec["priorityClassName"],
        }
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": f"{kueueapi.GROUP}/{kueueapi.STORAGE_VERSION}",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(pod),
            "namespace": meta["namespace"],
            "labels": {JOB_UID_LABEL: meta["uid"]},
            "ownerReferences": [owner],
        },
        "spec": wl_spec,
        "status": {},
    }


def ungate(pod: Obj, labels: dict[str, str], tolerations: list[Obj]) -> None:
    """Pod.Run: podset.Merge adds the flavor's nodeLabels and tolerations, then the admission gate goes."""
    spec = pod["spec"]
    if labels:
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **labels}
    for toleration in tolerations:
        if toleration not in (spec.get("tolerations") or []):
            spec.setdefault("tolerations", []).append(toleration)
    remaining = [g for g in spec.get("schedulingGates") or [] if g.get("name") != GATE]
    if remaining:
        spec["schedulingGates"] = remaining
    else:
        spec.pop("schedulingGates", None)
