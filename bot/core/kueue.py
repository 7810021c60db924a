"""Core: a Kueue-managed pod's place, read from Kueue's own objects instead of the pending pods.

With a profile's `queue:`, its pods carry `kueue.x-k8s.io/queue-name` and Kueue holds them (a scheduling
gate) until their Workload is admitted by quota. So the line is Kueue's: the visibility API's
PendingWorkloadsSummary when it answers, else the Workloads' own order in the ClusterQueue (priority, then
creation, then uid: kubernetes-sigs/kueue v0.19.2 pkg/cache/queue/cluster_queue.go, `baseCompareFunc`),
else no place. The ETA is the plain line's (`queue`): the holders' leases, over the ClusterQueue's quota.
Field names and strings are Kueue v0.19.2's (apis/kueue/v1beta2/workload_types.go, clusterqueue_types.go,
localqueue_types.go; apis/visibility/v1beta2/types.go).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.core import explain, lifecycle, quantities, queue
from bot.core.fields import as_map, as_maps, as_text, as_time

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
"""The storage version of every Kueue kind at v0.19.2 (`+kubebuilder:storageversion`)."""
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
VISIBILITY_VERSION = "v1beta2"
WORKLOADS, LOCAL_QUEUES, CLUSTER_QUEUES = "workloads", "localqueues", "clusterqueues"
ADMITTED = "Admitted"
QUOTA_RESERVED = "QuotaReserved"
FINISHED = "Finished"
"""Condition types (workload_types.go: WorkloadAdmitted, WorkloadQuotaReserved, WorkloadFinished)."""

Body = Mapping[str, Any]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Workload:
    """A Kueue Workload as gpubot needs it: whose pod, which queue, in what order, and admitted or not."""

    namespace: str
    name: str
    uid: str
    pod_uid: str
    """The uid of the Pod it was made for (its owner reference); empty when it is not a pod's."""
    queue: str
    """spec.queueName: the LocalQueue, in the Workload's namespace."""
    priority: int
    created: datetime | None
    gpus: int
    admitted: bool
    reserved_in: str
    """status.admission.clusterQueue once quota is reserved; empty while it waits."""
    waiting_reason: str = ""
    waiting_message: str = ""
    """The QuotaReserved=False condition's reason and message: why Kueue does not admit it."""
    finished: bool = False
    pod_name: str = ""
    since: datetime | None = None
    """When it was admitted (the Admitted condition's lastTransitionTime), else when its wait was last
    explained (QuotaReserved's)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    quota: Mapping[str, int]
    """Resource → nominal quota, summed over its flavors (whole units: GPUs)."""
    reserved: Mapping[str, int]
    """Resource → quota reserved now (status.flavorsReservation), summed over flavors."""

    def free(self, resource: str, *, reserved_seen: int = 0) -> int:
        """Quota nobody holds: `reserved_seen` counts the reserving Workloads gpubot sees, for when the
        ClusterQueue's status has not caught up (or does not say)."""
        return max(self.quota.get(resource, 0) - max(self.reserved.get(resource, 0), reserved_seen), 0)


def _condition(status: Body, kind: str) -> Body | None:
    return next((c for c in as_maps(status.get("conditions")) if c.get("type") == kind), None)


def _pod_set_gpus(pod_set: Body, resource: str) -> int:
    """GPUs a pod set asks for: its count times each container's limit (else request) of `resource`."""
    spec = as_map(as_map(pod_set.get("template")).get("spec"))
    per_pod = 0
    for container in as_maps(spec.get("containers")):
        resources = as_map(container.get("resources"))
        requested = as_map(resources.get("requests")).get(resource)
        amount = as_map(resources.get("limits")).get(resource, requested)
        per_pod += quantities.count(amount)
    count = pod_set.get("count", 1)
    return per_pod * (count if isinstance(count, int) and not isinstance(count, bool) else 1)


def read_workload(obj: Body, *, resource: str) -> Workload:
    metadata, spec, status = as_map(obj.get("metadata")), as_map(obj.get("spec")), as_map(obj.get("status"))
    owner = next((o for o in as_maps(metadata.get("ownerReferences")) if o.get("kind") == "Pod"), {})
    quota = _condition(status, QUOTA_RESERVED) or {}
    admitted, finished = _condition(status, ADMITTED) or {}, _condition(status, FINISHED) or {}
    priority = spec.get("priority")
    waiting = quota.get("status") == "False"
    return Workload(
        namespace=as_text(metadata.get("namespace")),
        name=as_text(metadata.get("name")),
        uid=as_text(metadata.get("uid")),
        pod_uid=as_text(owner.get("uid")),
        queue=as_text(spec.get("queueName")),
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
        created=as_time(metadata.get("creationTimestamp")),
        gpus=sum(_pod_set_gpus(p, resource) for p in as_maps(spec.get("podSets"))),
        admitted=admitted.get("status") == "True",
        reserved_in=as_text(as_map(status.get("admission")).get("clusterQueue")),
        waiting_reason=as_text(quota.get("reason")) if waiting else "",
        waiting_message=as_text(quota.get("message")) if waiting else "",
        finished=finished.get("status") == "True",
        pod_name=as_text(owner.get("name")),
        since=as_time((admitted if admitted.get("status") == "True" else quota).get("lastTransitionTime")),
    )


def observe(workload: Workload, *, at: datetime) -> lifecycle.KueueSeen:
    """What its Workload tells the pod's thread: admitted, or why not (`at` when the Workload does not
    date it)."""
    when = workload.since or at
    if workload.admitted:
        return lifecycle.KueueSeen(when, admitted=True, queue=workload.queue)
    problem = waiting_problem(workload, workload.queue)
    return lifecycle.KueueSeen(when, admitted=False, queue=workload.queue, problem=problem)


def local_queue_target(obj: Body) -> tuple[str, str]:
    """(`namespace/name` of a LocalQueue, the ClusterQueue it points at)."""
    metadata = as_map(obj.get("metadata"))
    key = f"{as_text(metadata.get('namespace'))}/{as_text(metadata.get('name'))}"
    return key, as_text(as_map(obj.get("spec")).get("clusterQueue"))


def _totals(entries: Iterable[Body], field: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for flavor in entries:
        for resource in as_maps(flavor.get("resources")):
            name = as_text(resource.get("name"))
            found[name] = found.get(name, 0) + quantities.count(resource.get(field, 0))
    return found


def read_cluster_queue(obj: Body) -> ClusterQueue:
    spec, status = as_map(obj.get("spec")), as_map(obj.get("status"))
    flavors = [f for group in as_maps(spec.get("resourceGroups")) for f in as_maps(group.get("flavors"))]
    return ClusterQueue(
        name=as_text(as_map(obj.get("metadata")).get("name")),
        quota=_totals(flavors, "nominalQuota"),
        reserved=_totals(as_maps(status.get("flavorsReservation")), "total"),
    )


def read_summary(obj: Body) -> dict[str, int]:
    """A PendingWorkloadsSummary: each pending Workload (`namespace/name`) → its place in the ClusterQueue,
    1 for the next (the API counts `positionInClusterQueue` from 0)."""
    found = {}
    for item in as_maps(obj.get("items")):
        metadata, position = as_map(item.get("metadata")), item.get("positionInClusterQueue")
        if isinstance(position, int) and not isinstance(position, bool):
            found[f"{as_text(metadata.get('namespace'))}/{as_text(metadata.get('name'))}"] = position + 1
    return found


def line_order(pending: Iterable[Workload]) -> list[Workload]:
    """The ClusterQueue's order without the visibility API: priority first, then the oldest, then uid."""
    return sorted(pending, key=lambda w: (-w.priority, w.created is None, w.created or EPOCH, w.uid))


def places(
    pending: Iterable[Workload],
    holders: Iterable[queue.Holder],
    *,
    free: int,
    summary: Mapping[str, int] | None,
) -> dict[str, queue.Place]:
    """Each pending Workload's place (keyed `namespace/name`), with the plain line's ETA over the quota.
    With `summary` (the visibility API's answer) its order is Kueue's word; Workloads it leaves out have
    no place. Without it, the Workloads' own order."""
    waiting = [w for w in pending if not w.admitted and not w.reserved_in and not w.finished]
    if summary is not None:
        ordered = sorted((w for w in waiting if w.key in summary), key=lambda w: summary[w.key])
    else:
        ordered = line_order(waiting)
    waiters = [queue.Waiter(w.key, w.gpus, w.created or EPOCH, w.priority) for w in ordered]
    found = queue.ordered_places(waiters, holders, free=free)
    if summary is not None:  # Kueue's own number: it counts Workloads gpubot may not see
        found = {key: queue.Place(summary[key], p.soonest, p.latest, p.free_now) for key, p in found.items()}
    return found


# -- why it waits, in plain words ---------------------------------------------------------------------

MORE_NEEDED = re.compile(
    r"insufficient unused quota for (?P<resource>\S+) in flavor \S+, (?P<more>\S+) more needed"
)
MAX_CAPACITY = re.compile(
    r"insufficient quota for (?P<resource>\S+) in flavor .*maximum capacity \((?P<max>[^)]+)\)"
)
"""pkg/scheduler/flavorassigner/flavorassigner.go (v0.19.2), `fitsResourceQuota`: the two no-fit messages."""
QUOTA_KEY = explain.KUEUE_QUOTA


def waiting_problem(workload: Workload, queue_name: str) -> explain.Problem | None:
    """Why Kueue does not admit it (QuotaReserved=False), as a thread problem; None while nothing is
    said (Kueue has not looked at it yet). Quota in use is not a full pool: the words say whose quota."""
    reason, message = workload.waiting_reason, workload.waiting_message
    where = f"Kueue queue {queue_name}"
    if not reason:
        return None
    if (found := MORE_NEEDED.search(message)) is not None:
        return explain.Problem(
            QUOTA_KEY,
            f"the {where} has its GPU quota in use: {found['more']} more {found['resource']} needed",
            "wait for your turn (your place is above), or release a GPU of your own in this queue",
        )
    if (found := MAX_CAPACITY.search(message)) is not None or reason == "ExceedsMaxQuota":
        most = f" ({found['max']} {found['resource']})" if found else ""
        return explain.Problem(
            "kueue-too-big",
            f"this run asks for more than the {where} can ever give{most}",
            "release it and ask for fewer GPUs, or ask an admin to raise the ClusterQueue's nominalQuota",
        )
    if reason == "Misconfigured":
        return explain.Problem(
            "kueue-misconfigured",
            f"Kueue cannot admit it: {message}",
            "ask an admin to run `gpubot doctor`, which says what to create",
        )
    if reason == "Suspended":
        return explain.Problem(
            "kueue-stopped",
            f"the {where} is stopped: {message}",
            "ask an admin to lift the queue's stopPolicy; the run waits until then",
        )
    if reason == "NoMatchingFlavor":
        return explain.Problem(
            "kueue-flavor",
            f"no ResourceFlavor of the {where} matches this run's GPU: {message}",
            "ask an admin to give the ClusterQueue a flavor for this profile's nodes",
        )
    if reason == "WaitingForQuota":
        return explain.Problem(QUOTA_KEY, f"the {where} has its GPU quota in use", "wait for your turn")
    return explain.Problem(f"kueue-{reason}", f"Kueue has not admitted it yet: {message or reason}", "wait")
