"""A minimal Kueue v0.19.2 on the sim clock: plain pods queue through LocalQueues into one ClusterQueue each,
are admitted in queue order while the nominal quota of the ClusterQueue's flavor allows, and are then ungated.

Upstream (kubernetes-sigs/kueue, tag v0.19.2): pkg/controller/jobs/pod/pod_webhook.go (label and gate at
admission), pkg/controller/jobframework (workload names, ConstructWorkload, Finished), pkg/scheduler
(admission, flavorassigner messages), pkg/workload/workload.go (conditions), pkg/cache/queue (queue order).
What this does not do is listed in docs/sim.md ("Kueue").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from sim.cluster import fit, kueueapi, schema
from sim.cluster.store import Obj, Store

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # pkg/controller/constants QueueLabel
MANAGED_LABEL = "kueue.x-k8s.io/managed"  # pkg/constants ManagedByKueueLabelKey, value "true"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # pkg/controller/constants JobUIDLabel
GATE = "kueue.x-k8s.io/admission"  # pkg/controller/jobs/pod/constants SchedulingGateName
POD_SET = "main"  # kueue.DefaultPodSetName
UNMANAGED_NAMESPACES = ("kube-system", "kueue-system")
"""The default managedJobsNamespaceSelector (apis/config/v1beta2/defaults.go) leaves these alone."""
BEST_EFFORT_FIFO, STRICT_FIFO = "BestEffortFIFO", "StrictFIFO"
WORKLOADS, CLUSTER_QUEUES = kueueapi.WORKLOADS.key, kueueapi.CLUSTER_QUEUES.key
LOCAL_QUEUES, FLAVORS = kueueapi.LOCAL_QUEUES.key, kueueapi.RESOURCE_FLAVORS.key
WATCHED = {"pods", WORKLOADS, CLUSTER_QUEUES, LOCAL_QUEUES, FLAVORS}


# -- the pod webhook -----------------------------------------------------------------------------------------
def default_pod(pod: Obj) -> None:
    """PodWebhook.Default: a pod naming a queue is managed by Kueue and waits behind its admission gate."""
    meta = pod.setdefault("metadata", {})
    labels = meta.get("labels") or {}
    if not labels.get(QUEUE_LABEL) or meta.get("namespace") in UNMANAGED_NAMESPACES:
        return
    meta["labels"] = {**labels, MANAGED_LABEL: "true"}
    gates = pod.setdefault("spec", {}).setdefault("schedulingGates", [])
    if not any(g.get("name") == GATE for g in gates if isinstance(g, dict)):
        gates.append({"name": GATE})


def workload_name(pod: Mapping[str, Any]) -> str:
    """GetWorkloadNameForOwnerWithGVK (jobframework/workload_names.go): `pod-NAME-` and 5 hex of a sha1 of
    kind, group, name and uid; the prefix cut to 253 - 6 (ShortWorkloadNames is off by default at v0.19.2)."""
    name, uid = pod["metadata"]["name"], pod["metadata"].get("uid", "")
    digest = hashlib.sha1(f"Pod\n\n{name}\n{uid}".encode()).hexdigest()[:5]
    return f"{('pod-' + name)[:247]}-{digest}"


# -- pure helpers --------------------------------------------------------------------------------------------
def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for found in (obj.get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return found  # type: ignore[no-any-return]
    return None


def is_true(obj: Mapping[str, Any], kind: str) -> bool:
    found = condition(obj, kind)
    return bool(found and found.get("status") == "True")


def set_condition(obj: Obj, kind: str, status: str, reason: str, message: str, now: str) -> None:
    """apimeta.SetStatusCondition: lastTransitionTime moves only when the status does."""
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    new = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
        "observedGeneration": obj["metadata"].get("generation", 1),
    }
    for i, old in enumerate(conditions):
        if old.get("type") == kind:
            if old.get("status") == status:
                new["lastTransitionTime"] = old.get("lastTransitionTime", now)
            conditions[i] = new
            return
    conditions.append(new)


def priority(wl: Mapping[str, Any]) -> int:
    return int((wl.get("spec") or {}).get("priority") or 0)


def queue_order(workloads: Iterable[Obj]) -> list[Obj]:
    """The ClusterQueue's heap order (pkg/cache/queue, queueOrderingFunc): higher priority first, then the
    earlier creation, then the name (our tie-break for equal seconds)."""
    return sorted(
        workloads, key=lambda w: (-priority(w), w["metadata"]["creationTimestamp"], w["metadata"]["name"])
    )


def requests(wl: Mapping[str, Any]) -> fit.Resources:
    """The podSets' requests times their count, as Kueue accounts them (no `pods` resource)."""
    total: fit.Resources = {}
    for pod_set in (wl.get("spec") or {}).get("podSets") or []:
        one = fit.pod_requests(pod_set.get("template") or {})
        for name, amount in one.items():
            if name != fit.PODS and amount:
                total[name] = total.get(name, 0) + amount * int(pod_set.get("count", 1))
    return total


def quantity(resource: str, amount: int) -> str:
    return schema.canonical_quantity(f"{amount}m" if resource == fit.CPU else str(amount))


def is_pending(wl: Mapping[str, Any]) -> bool:
    return not is_true(wl, "QuotaReserved") and not is_true(wl, "Finished")


def flavor_quotas(cq: Mapping[str, Any]) -> dict[str, tuple[str, int]]:
    """resource → (its flavor, nominal quota): the first flavor of the group covering it (one flavor per
    resource is all this simulates)."""
    out: dict[str, tuple[str, int]] = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        flavors = group.get("flavors") or []
        if not flavors:
            continue
        for quota in flavors[0].get("resources") or []:
            name = quota.get("name", "")
            out.setdefault(
                name, (flavors[0].get("name", ""), fit.to_base_units(name, quota.get("nominalQuota", 0)))
            )
    return out


def no_fit_message(need: fit.Resources, used: fit.Resources, quotas: Mapping[str, tuple[str, int]]) -> str:
    """Assignment.Message for the one pod set, in flavorassigner.go's words; "" when it fits."""
    for name in sorted(need):
        if name not in quotas:
            return (
                f"couldn't assign flavors to pod set {POD_SET}: resource {name} unavailable in ClusterQueue"
            )
        flavor, nominal = quotas[name]
        if need[name] > nominal:
            return (
                f"couldn't assign flavors to pod set {POD_SET}: insufficient quota for {name} in flavor "
                f"{flavor}, previously considered podsets requests ({quantity(name, 0)}) + current podset "
                f"request ({quantity(name, need[name])}) > maximum capacity ({quantity(name, nominal)})"
            )
        if used.get(name, 0) + need[name] > nominal:
            more = quantity(name, used.get(name, 0) + need[name] - nominal)
            return (
                f"couldn't assign flavors to pod set {POD_SET}: insufficient unused quota for {name} "
                "in flavor "
                f"{flavor}, {more} more needed"
            )
    return ""


def pending_in(store: Store, cq_name: str) -> list[Obj]:
    """The ClusterQueue's pending workloads in queue order: what the visibility API numbers."""
    queues = {
        (lq["metadata"]["namespace"], lq["metadata"]["name"])
        for lq in store.iter_raw(LOCAL_QUEUES)
        if (lq.get("spec") or {}).get("clusterQueue") == cq_name
    }
    waiting = (
        w
        for w in store.iter_raw(WORKLOADS)
        if is_pending(w) and (w["metadata"]["namespace"], (w.get("spec") or {}).get("queueName")) in queues
    )
    return queue_order(waiting)


# -- installing it in the sim --------------------------------------------------------------------------------
FLAVOR, CLUSTER_QUEUE, LOCAL_QUEUE = "gpu-t4", "gpu-cluster-queue", "gpu-queue"


def install_objects(
    namespace: str, gpu_quota: int, *, accelerator: str = "nvidia-tesla-t4"
) -> list[tuple[str, Obj]]:
    """What an admin applies after installing Kueue (as in Kueue's site/content/en/docs/tasks/manage/
    administer_cluster_quotas.md): one flavor for the GPU nodes, a ClusterQueue with a GPU quota (cpu and
    memory covered generously, so only GPUs queue), and a LocalQueue in the workloads' namespace."""
    api_version = f"{kueueapi.GROUP}/{kueueapi.STORAGE_VERSION}"
    flavor = {
        "apiVersion": api_version,
        "kind": "ResourceFlavor",
        "metadata": {"name": FLAVOR},
        "spec": {"nodeLabels": {"cloud.google.com/gke-accelerator": accelerator}},
    }
    quotas = [("cpu", "1000"), ("memory", "4Ti"), ("nvidia.com/gpu", str(gpu_quota))]
    cluster_queue = {
        "apiVersion": api_version,
        "kind": "ClusterQueue",
        "metadata": {"name": CLUSTER_QUEUE},
        "spec": {
            "namespaceSelector": {},
            "queueingStrategy": BEST_EFFORT_FIFO,
            "resourceGroups": [
                {
                    "coveredResources": [name for name, _ in quotas],
                    "flavors": [
                        {"name": FLAVOR, "resources": [{"name": n, "nominalQuota": q} for n, q in quotas]}
                    ],
                }
            ],
        },
    }
    local_queue = {
        "apiVersion": api_version,
        "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
        "spec": {"clusterQueue": CLUSTER_QUEUE},
    }
    return [(FLAVORS, flavor), (CLUSTER_QUEUES, cluster_queue), (LOCAL_QUEUES, local_queue)]
