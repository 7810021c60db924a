"""The simulated kube-scheduler: binds pending pods, or says why not in upstream words."""

from __future__ import annotations

import logging
from collections.abc import Callable

from sim.cluster import events, fit, gates, messages
from sim.cluster.config import Timings
from sim.cluster.store import DELETED, Change, Obj, Store, rfc3339

logger = logging.getLogger(__name__)


def needs_scheduling(pod: Obj) -> bool:
    meta, spec = pod["metadata"], pod.get("spec", {})
    return (
        not spec.get("nodeName")
        and not meta.get("deletionTimestamp")
        and spec.get("schedulerName", messages.SCHEDULER) == messages.SCHEDULER
        and pod.get("status", {}).get("phase", "Pending") == "Pending"
        and not gates.is_gated(pod)  # the SchedulingGates PreEnqueue plugin keeps it out of the queue
    )


def unschedulable_condition(pod: Obj) -> Obj | None:
    for condition in pod.get("status", {}).get("conditions", []):
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            found: Obj = condition
            return found
    return None


def is_bound(pod: Obj | None) -> bool:
    return bool(pod and pod.get("spec", {}).get("nodeName"))


class Scheduler:
    """Runs a scheduling pass whenever a pod or node changes, plus a periodic retry.

    Where a pending pod fits depends only on the pod, the nodes and the pods bound to them, so a pod found
    unschedulable is not tried again until one of those changed or its retry is due: a burst of new
    pending pods costs one try each, not a try of every pending pod per new one (upstream's scheduling
    queue parks unschedulable pods the same way)."""

    def __init__(
        self, store: Store, recorder: events.Recorder, timings: Timings, bind: Callable[[Obj, str], Obj]
    ) -> None:
        self.store, self.recorder, self.timings = store, recorder, timings
        self.clock = store.clock
        self._bind = bind
        self._queued = False
        self._placement_version = 0
        """Bumped by every change to a node or to a bound pod: what can make a pending pod fit elsewhere."""
        self._unfit: dict[str, tuple[str, int]] = {}
        """Pod uid → (its resourceVersion, the placement version) when it was last found unschedulable."""
        store.subscribe(self._on_change)
        self.clock.call_later(timings.scheduler_retry, self._periodic)

    def _on_change(self, change: Change) -> None:
        if change.resource == "nodes" or (
            change.resource == "pods" and (is_bound(change.obj) or is_bound(change.old))
        ):
            self._placement_version += 1
        if change.resource == "pods" and change.type == DELETED:
            self._unfit.pop(change.obj["metadata"].get("uid", ""), None)
        if change.resource in ("pods", "nodes") and not self._queued:
            self._queued = True
            self.clock.call_soon(self.run_pass)

    def _periodic(self) -> None:
        self.run_pass()
        self.clock.call_later(self.timings.scheduler_retry, self._periodic)

    def run_pass(self) -> None:
        self._queued = False
        pending = [p for p in self.store.iter_raw("pods") if needs_scheduling(p) and not self._parked(p)]
        if not pending:
            return
        pending.sort(key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))
        nodes = sorted(self.store.iter_raw("nodes"), key=lambda n: str(n["metadata"]["name"]))
        bound: dict[str, list[Obj]] = {}
        for pod in self.store.iter_raw("pods"):
            if is_bound(pod):
                bound.setdefault(pod["spec"]["nodeName"], []).append(pod)
        names = [str(n["metadata"]["name"]) for n in nodes]
        used = {name: fit.used_resources(bound.get(name, [])) for name in names}
        for pod in pending:
            self._schedule_one(pod, nodes, used)

    def _parked(self, pod: Obj) -> bool:
        """Found unschedulable with nothing changed since, and not yet due for its retry."""
        meta = pod["metadata"]
        if self._unfit.get(meta.get("uid", "")) != (meta.get("resourceVersion"), self._placement_version):
            return False
        current = unschedulable_condition(pod)
        return current is not None and self._recent(current)

    def _schedule_one(self, pod: Obj, nodes: list[Obj], used: dict[str, fit.Resources]) -> None:
        chosen = fit.pick_node(pod, nodes, used)
        name, ns = pod["metadata"]["name"], pod["metadata"]["namespace"]
        if chosen is not None:
            bound = self._bind(pod, chosen)
            fit.add_resources(used.setdefault(chosen, {}), fit.pod_requests(pod))
            self.recorder.record(
                bound,
                "Normal",
                "Scheduled",
                messages.successfully_assigned(ns, name, chosen),
                component=messages.SCHEDULER,
                action="Binding",
            )
            return
        fits = {
            n["metadata"]["name"]: fit.filter_node(pod, n, used=used.get(n["metadata"]["name"], {}))
            for n in nodes
        }
        message = fit.failed_scheduling_message(fits)
        current = unschedulable_condition(pod)
        if current is not None and current.get("message") == message and self._recent(current):
            self._park(pod)
            return
        updated = self.store.mutate("pods", ns, name, lambda p: self._mark_unschedulable(p, message))
        if updated is not None:
            self._park(updated)
            self.recorder.record(
                updated,
                "Warning",
                "FailedScheduling",
                message,
                component=messages.SCHEDULER,
                action="Scheduling",
            )

    def _park(self, pod: Obj) -> None:
        meta = pod["metadata"]
        self._unfit[meta.get("uid", "")] = (meta.get("resourceVersion", ""), self._placement_version)

    def _recent(self, condition: Obj) -> bool:
        probed = condition.get("lastProbeTime") or condition.get("lastTransitionTime")
        if not probed:
            return False
        seconds = self.clock.from_stamp(probed)
        return self.clock.now() - seconds < self.timings.scheduler_retry

    def _mark_unschedulable(self, pod: Obj, message: str) -> None:
        now = rfc3339(self.clock)
        conditions = [c for c in pod["status"].get("conditions", []) if c.get("type") != "PodScheduled"]
        previous = unschedulable_condition(pod)
        transition = previous.get("lastTransitionTime", now) if previous else now
        conditions.insert(
            0,
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastProbeTime": now,
                "lastTransitionTime": transition,
            },
        )
        pod["status"]["conditions"] = conditions
