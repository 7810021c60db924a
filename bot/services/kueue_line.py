"""Services: Kueue's view of gpubot's queued pods, kept from the Workload, LocalQueue and ClusterQueue
watches, and handed to the tracker as observations (admitted, or why not) and places in line.

The tracker stays the one owner of threads: this service knows Kueue's objects, the tracker asks it for
the places of the pods in line (`place_texts`) and is told when one pod's Workload changed (`listen`).
The visibility API is read when a Workload changes in what gpubot reads of it (never on a timer); when it
does not answer, the Workloads' own order stands in (`kueue.places`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from bot.core import kueue, labels, lifecycle, models, ports, queue, reaping, status

logger = logging.getLogger(__name__)

ReadPending = Callable[[str], Mapping[str, Any] | None]
"""A LocalQueue's PendingWorkloadsSummary, or None when the visibility API does not answer."""
OnKueue = Callable[[str, lifecycle.KueueSeen | None], None]
"""Told `namespace/pod` and what its Workload says; ("", None) when only others' places may have moved."""


class KueueLine:
    def __init__(
        self,
        profiles: Iterable[models.GpuProfile],
        *,
        read_pending: ReadPending | None,
        clock: Callable[[], datetime],
    ) -> None:
        self._resources = {p.queue: p.resource_name for p in profiles if p.queue}
        """LocalQueue → the resource its profile's runs ask for: what a Workload's GPUs are counted in."""
        self._read_pending = read_pending
        self._clock = clock
        self._lock = threading.RLock()
        self._workloads: dict[str, kueue.Workload] = {}
        self._targets: dict[str, str] = {}
        """LocalQueue name (the workload namespace's) → the ClusterQueue it points at."""
        self._cluster_queues: dict[str, kueue.ClusterQueue] = {}
        self._summaries: dict[str, dict[str, int] | None] = {}
        self._listeners: list[OnKueue] = []

    def listen(self, callback: OnKueue) -> None:
        self._listeners.append(callback)

    def seen_for(self, pod_key: str) -> lifecycle.KueueSeen | None:
        """What the Workload of this pod says, for a thread adopted after its Workload was seen."""
        with self._lock:
            found = next((w for w in self._workloads.values() if _pod_key(w) == pod_key), None)
        return kueue.observe(found, at=self._clock()) if found is not None else None

    # -- watch callbacks -------------------------------------------------------------------------------
    def on_workload(self, change: str, obj: Mapping[str, Any]) -> None:
        queue_name = str((obj.get("spec") or {}).get("queueName", ""))
        found = kueue.read_workload(obj, resource=self._resources.get(queue_name, labels.GPU_RESOURCE))
        with self._lock:
            if change == ports.DELETED:
                self._workloads.pop(found.key, None)
            elif self._workloads.get(found.key) == found:
                return  # only fields gpubot does not read changed: no thread moves, no visibility read
            else:
                self._workloads[found.key] = found
        seen = None if change == ports.DELETED else kueue.observe(found, at=self._clock())
        self._tell(_pod_key(found) if found.pod_name else "", seen)  # its own thread first, then the line
        if found.queue in self._resources and self._read_pending is not None:
            summary = self._read_pending(found.queue)
            with self._lock:
                self._summaries[found.queue] = None if summary is None else kueue.read_summary(summary)
            self._tell("", None)

    def on_local_queue(self, change: str, obj: Mapping[str, Any]) -> None:
        key, target = kueue.local_queue_target(obj)
        name = key.split("/", 1)[1]
        with self._lock:
            if change == ports.DELETED:
                self._targets.pop(name, None)
            else:
                self._targets[name] = target
        self._tell("", None)

    def on_cluster_queue(self, change: str, obj: Mapping[str, Any]) -> None:
        found = kueue.read_cluster_queue(obj)
        with self._lock:
            if change == ports.DELETED:
                self._cluster_queues.pop(found.name, None)
            else:
                self._cluster_queues[found.name] = found
        self._tell("", None)

    def _tell(self, pod_key: str, seen: lifecycle.KueueSeen | None) -> None:
        for listener in self._listeners:
            listener(pod_key, seen)

    # -- the line --------------------------------------------------------------------------------------
    def place_texts(
        self, threads: Iterable[status.Thread], *, now: datetime, policy: reaping.ReaperPolicy
    ) -> dict[str, str]:
        """`namespace/pod` → "#2 in line (Kueue queue team-a), about 20 to 35 min", for each queued pod
        Kueue holds, per ClusterQueue: its pending Workloads, and gpubot's admitted runs as holders."""
        threads = [t for t in threads if t.workload.queue]
        with self._lock:
            by_cluster_queue: dict[str, list[kueue.Workload]] = {}
            for workload in self._workloads.values():
                target = self._targets.get(workload.queue)
                if target:
                    by_cluster_queue.setdefault(target, []).append(workload)
            found: dict[str, str] = {}
            for cluster_queue, pending in by_cluster_queue.items():
                found |= self._texts(cluster_queue, pending, threads, now=now, policy=policy)
        return found

    def _texts(
        self,
        cluster_queue: str,
        pending: list[kueue.Workload],
        threads: list[status.Thread],
        *,
        now: datetime,
        policy: reaping.ReaperPolicy,
    ) -> dict[str, str]:
        local_queues = {w.queue for w in pending}
        resource = next(
            (self._resources[q] for q in local_queues if q in self._resources), labels.GPU_RESOURCE
        )
        holders = [
            held
            for t in threads
            if self._targets.get(t.workload.queue) == cluster_queue
            and t.progress.at(lifecycle.Step.ADMITTED) is not None
            and t.progress.outcome is None
            and (held := queue.holder(t.workload, policy, now)) is not None
        ]
        known = self._cluster_queues.get(cluster_queue)
        reserving = [w for w in self._workloads.values() if w.reserved_in == cluster_queue and not w.finished]
        places = kueue.places(
            pending,
            holders,
            free=known.free(resource, reserved_seen=sum(w.gpus for w in reserving)) if known else 0,
            summary=self._summary(q for q in local_queues if q in self._resources),
        )
        by_key = {w.key: w for w in pending}
        return {
            _pod_key(by_key[key]): queue.wait_text(place, now, line=f"Kueue queue {by_key[key].queue}")
            for key, place in places.items()
            if by_key[key].pod_name
        }

    def _summary(self, local_queues: Iterable[str]) -> dict[str, int] | None:
        """Kueue's positions over every LocalQueue of the ClusterQueue gpubot read; None if one did not
        answer (a partial order would misplace the others)."""
        merged: dict[str, int] = {}
        for name in local_queues:
            summary = self._summaries.get(name)
            if summary is None:
                return None
            merged |= summary
        return merged


def _pod_key(workload: kueue.Workload) -> str:
    return f"{workload.namespace}/{workload.pod_name}"
