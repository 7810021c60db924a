"""Core: the API objects the watches deliver, read as gpubot's models, purely and without trusting shapes.

Adapters hand over plain dicts exactly as the API server sent them (camelCase keys, RFC 3339 strings);
these functions turn them into a `Workload` and into the lifecycle's observations. A missing or odd field
never raises: the object is read as far as it goes, because one strange pod must not stop a watch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from bot.core import cluster_nodes, labels, lifecycle, quantities, reaping, starts
from bot.core.fields import Body, as_map, as_maps, as_text, as_time


@dataclass(frozen=True)
class Workload:
    """One gpubot pod as the cluster holds it: what was asked (annotations) and where it is (status)."""

    name: str
    namespace: str
    uid: str
    owner_id: str
    """The Slack user id of who asked (the requester annotation, else the owner label)."""
    requester_name: str
    profile: str
    channel: str
    thread_ts: str | None
    lease_end: datetime | None
    requested_at: datetime | None
    gpus: int
    phase: str
    """The pod's status.phase (`Pending` until the kubelet reports one)."""
    node: str
    command: str
    """The slash command as typed, e.g. `/gpu run pytorch --gpus 1`."""
    deletion_requested: bool
    """A deletionTimestamp is set: the pod is terminating and counts as released."""
    image: str = ""
    created_at: datetime | None = None
    resource_version: str = ""
    audit: str = ""
    """The audit annotation as stored (a JSON list), so a release can append to it."""
    marks: reaping.Marks = field(default_factory=reaping.Marks)
    """What the reaper already did (reminders, idle warning, keep), from annotations."""
    finished_at: datetime | None = None
    """When its container terminated, for a Succeeded or Failed pod."""
    request: str = ""
    """The digest of the Slack request that asked for it (`podspec.request_key`); empty for older pods."""
    start: starts.Start = field(default_factory=starts.Start)
    """How its container waits to start (reason, message), and since when the kubelet has been starting it."""
    ports: tuple[int, ...] = ()
    """Its container's ports (`--port`, or its profile's), which the thread's Connect section forwards."""
    queue: str = ""
    """The Kueue LocalQueue it was submitted to (its `kueue.x-k8s.io/queue-name` label); empty when Kueue
    does not manage it."""
    held_by_kueue: bool = False
    """Kueue's scheduling gate is still on: it waits for its queue's quota, not for a node."""

    @property
    def key(self) -> str:
        """`namespace/name`, the identity informer caches and logs use."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class EventSubject:
    """The object an Event is about, so a tracker can route the event to the right workload."""

    kind: str
    namespace: str
    name: str
    uid: str


def name_in_key(key: str) -> str | None:
    """The workload name a button's `namespace/name` value carries; None for anything else.

    A click's value comes back from Slack as the clicker's client sent it, so it can be forged: an empty
    name must not fall through to "your only workload" (issue 21), as `/gpu release` without a name does."""
    namespace, slash, name = key.partition("/")
    if not slash or not labels.is_dns1123_label(namespace) or not labels.is_dns1123_label(name):
        return None
    return name


def _latest(moments: Iterable[datetime | None]) -> datetime | None:
    return max((m for m in moments if m is not None), default=None)


def container_gpus(container: Body) -> int:
    """GPUs one container asks for: limits win, as extended resources require limits = requests."""
    resources = as_map(container.get("resources"))
    for section in ("limits", "requests"):
        found = [
            quantities.count(v)
            for k, v in as_map(resources.get(section)).items()
            if labels.is_gpu_resource(str(k))
        ]
        if found:
            return sum(found)
    return 0


def pod_gpus(pod: Body) -> int:
    return sum(container_gpus(c) for c in as_maps(as_map(pod.get("spec")).get("containers")))


def is_managed(pod: Body) -> bool:
    pod_labels = as_map(as_map(pod.get("metadata")).get("labels"))
    return pod_labels.get(labels.MANAGED_BY_LABEL) == labels.MANAGED_BY_VALUE


def from_pod(pod: Body) -> Workload | None:
    """The workload a pod dict describes; None for pods gpubot does not manage."""
    if not is_managed(pod):
        return None
    metadata = as_map(pod.get("metadata"))
    notes, pod_labels = as_map(metadata.get("annotations")), as_map(metadata.get("labels"))
    # The label is the Slack id made label-safe; the annotation keeps it exactly, so it wins.
    owner_id = as_text(notes.get(labels.REQUESTER_ANNOTATION)) or as_text(pod_labels.get(labels.OWNER_LABEL))
    spec, status = as_map(pod.get("spec")), as_map(pod.get("status"))
    containers = as_maps(spec.get("containers"))
    return Workload(
        name=as_text(metadata.get("name")),
        namespace=as_text(metadata.get("namespace")),
        uid=as_text(metadata.get("uid")),
        owner_id=owner_id,
        requester_name=as_text(notes.get(labels.REQUESTER_NAME_ANNOTATION)),
        profile=as_text(pod_labels.get(labels.PROFILE_LABEL)),
        channel=as_text(notes.get(labels.CHANNEL_ANNOTATION)),
        thread_ts=as_text(notes.get(labels.THREAD_TS_ANNOTATION)) or None,
        lease_end=as_time(notes.get(labels.LEASE_END_ANNOTATION)),
        requested_at=as_time(notes.get(labels.REQUESTED_AT_ANNOTATION)),
        gpus=pod_gpus(pod),
        phase=as_text(status.get("phase")) or "Pending",
        node=as_text(spec.get("nodeName")),
        command=as_text(notes.get(labels.COMMAND_ANNOTATION)),
        deletion_requested=bool(metadata.get("deletionTimestamp")),
        image=as_text(containers[0].get("image")) if containers else "",
        created_at=as_time(metadata.get("creationTimestamp")),
        resource_version=as_text(metadata.get("resourceVersion")),
        audit=as_text(notes.get(labels.AUDIT_ANNOTATION)),
        marks=reaping.Marks(
            reminded_for=as_time(notes.get(labels.REMINDED_FOR_ANNOTATION)),
            nudged_for=as_time(notes.get(labels.NUDGED_FOR_ANNOTATION)),
            idle_warned_at=as_time(notes.get(labels.IDLE_WARNED_AT_ANNOTATION)),
            idle_evidence=as_text(notes.get(labels.IDLE_EVIDENCE_ANNOTATION)),
            kept_until=as_time(notes.get(labels.KEPT_UNTIL_ANNOTATION)),
            telling_since=as_time(notes.get(labels.TELLING_SINCE_ANNOTATION)),
        ),
        request=as_text(notes.get(labels.REQUEST_ANNOTATION)),
        finished_at=finished_at(pod),
        start=start_of(status),
        ports=container_ports(containers[0]) if containers else (),
        queue=as_text(pod_labels.get(labels.KUEUE_QUEUE_LABEL)),
        held_by_kueue=_gated(pod),
    )


def container_ports(container: Body) -> tuple[int, ...]:
    ports = (quantities.count(port.get("containerPort")) for port in as_maps(container.get("ports")))
    return tuple(port for port in ports if port > 0)


def start_of(status: Body) -> starts.Start:
    """The first waiting container's reason and message, with the pod's startTime."""
    waiting = _waiting(_container_statuses(status))
    return starts.Start(
        reason=as_text(waiting.get("reason")),
        message=as_text(waiting.get("message")),
        since=as_time(status.get("startTime")),
    )


# -- observations for the lifecycle state machine --------------------------------------------------


def _container_statuses(status: Body) -> list[Body]:
    return as_maps(status.get("containerStatuses"))


def _state_times(container_status: Body) -> list[datetime | None]:
    out: list[datetime | None] = []
    for state_key in ("state", "lastState"):
        for detail in as_map(container_status.get(state_key)).values():
            details = as_map(detail)
            out += [as_time(details.get("startedAt")), as_time(details.get("finishedAt"))]
    return out


def pod_time(pod: Body) -> datetime | None:
    """The newest moment the pod itself records: creation, start, conditions, container transitions.

    Milestones carry the cluster's own times, so a thread tells when things happened, not when we heard.
    """
    metadata, status = as_map(pod.get("metadata")), as_map(pod.get("status"))
    moments = [as_time(metadata.get("creationTimestamp")), as_time(status.get("startTime"))]
    moments += [as_time(c.get("lastTransitionTime")) for c in as_maps(status.get("conditions"))]
    for container_status in _container_statuses(status):
        moments += _state_times(container_status)
    return _latest(moments)


def _waiting(statuses: list[Body]) -> Body:
    return next((w for w in (as_map(as_map(s.get("state")).get("waiting")) for s in statuses) if w), {})


def _terminated(statuses: list[Body]) -> Body:
    """The current termination, else the last one (a restarted container's OOMKilled still matters)."""
    for state_key in ("state", "lastState"):
        for container_status in statuses:
            found = as_map(as_map(container_status.get(state_key)).get("terminated"))
            if found:
                return found
    return {}


def _exit_code(terminated: Body) -> int | None:
    code = terminated.get("exitCode")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def finished_at(pod: Body) -> datetime | None:
    """A Succeeded or Failed pod's end: its last container's finishedAt, else its newest timestamp."""
    status = as_map(pod.get("status"))
    if status.get("phase") not in ("Succeeded", "Failed"):
        return None
    ends = [
        as_time(as_map(as_map(c.get("state")).get("terminated")).get("finishedAt"))
        for c in as_maps(status.get("containerStatuses"))
    ]
    return _latest(ends) or pod_time(pod)


def observe_pod(pod: Body, *, deleted: bool = False, at: datetime | None = None) -> lifecycle.PodSeen:
    """What one pod dict says, for `lifecycle.advance`.

    `deleted` comes from the watch event type (a DELETED object looks like any other). `at` defaults to
    the pod's own newest timestamp, or its deletionTimestamp once deleted; a pod with no timestamps at
    all needs `at`, since the core never reads the clock.
    """
    metadata, status = as_map(pod.get("metadata")), as_map(pod.get("status"))
    when = at or (deleted and as_time(metadata.get("deletionTimestamp"))) or pod_time(pod)
    if when is None:
        raise ValueError("pod has no timestamps; pass `at`")
    statuses = _container_statuses(status)
    waiting, terminated = _waiting(statuses), _terminated(statuses)
    return lifecycle.PodSeen(
        at=when,
        phase=as_text(status.get("phase")) or "Pending",
        node=as_text(as_map(pod.get("spec")).get("nodeName")),
        waiting_reason=as_text(waiting.get("reason")),
        waiting_message=as_text(waiting.get("message")),
        terminated_reason=as_text(terminated.get("reason")),
        exit_code=_exit_code(terminated),
        restarts=sum(quantities.count(s.get("restartCount")) for s in statuses),
        deleted=deleted,
        admitted_to=_admitted_to(pod),
    )


def _admitted_to(pod: Body) -> str:
    """The Kueue queue that admitted this pod: it carries the queue label and Kueue lifted its gate (a
    webhook gates such a pod as it is created, so it is never seen ungated before admission)."""
    queue = as_text(as_map(as_map(pod.get("metadata")).get("labels")).get(labels.KUEUE_QUEUE_LABEL))
    return queue if queue and not _gated(pod) else ""


def _gated(pod: Body) -> bool:
    gates = as_maps(as_map(pod.get("spec")).get("schedulingGates"))
    return any(gate.get("name") == labels.KUEUE_GATE for gate in gates)


def event_time(event: Body) -> datetime | None:
    """When an Event last happened: lastTimestamp for repeats, else eventTime, else its creation."""
    series = as_map(event.get("series"))
    candidates = (
        event.get("lastTimestamp"),
        series.get("lastObservedTime"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        event.get("deprecatedLastTimestamp"),
        as_map(event.get("metadata")).get("creationTimestamp"),
    )
    return next((t for t in map(as_time, candidates) if t is not None), None)


def observe_event(event: Body) -> lifecycle.EventSeen | None:
    """A core/v1 (or events.k8s.io/v1) Event as an observation; None for one without reason or time."""
    reason, when = as_text(event.get("reason")), event_time(event)
    if not reason or when is None:
        return None
    message = as_text(event.get("message")) or as_text(event.get("note"))
    return lifecycle.EventSeen(
        at=when, reason=reason, message=message, type=as_text(event.get("type")) or "Normal"
    )


def event_subject(event: Body) -> EventSubject | None:
    """The object the Event is about (`involvedObject`, or `regarding` in events.k8s.io/v1)."""
    ref = as_map(event.get("involvedObject")) or as_map(event.get("regarding"))
    name = as_text(ref.get("name"))
    if not name:
        return None
    return EventSubject(
        kind=as_text(ref.get("kind")),
        namespace=as_text(ref.get("namespace")),
        name=name,
        uid=as_text(ref.get("uid")),
    )


def observe_node(node: Body, *, at: datetime | None = None) -> lifecycle.NodeSeen:
    """A Node dict as an observation; `at` defaults to its newest condition heartbeat or transition.

    The kubelet stamps heartbeats on every status update, but a cluster that does not (the sim, when GPUs
    become allocatable) would date that change too early; a tracker that needs the moment passes `at`.
    """
    when = at or cluster_nodes.last_seen(node)
    if when is None:
        raise ValueError("node has no timestamps; pass `at`")
    return lifecycle.NodeSeen(**vars(cluster_nodes.read(node)), at=when)
