"""The simulated kube-scheduler: binds pending pods, or says why not in upstream words."""

from __future__ import annotations

import logging
from collections.abc import Callable

from sim.cluster import events, fit, messages
from sim.cluster.config import Timings
from sim.cluster.store import Change, Obj, Store, rfc3339

logger = logging.getLogger(__name__)


def needs_scheduling(pod: Obj) -> bool:
    meta, spec = pod["metadata"], pod.get("spec", {})
    return (
        not spec.get("nodeName")
        and not meta.get("deletionTimestamp")
        and spec.get("schedulerName", messages.SCHEDULER) == messages.SCHEDULER
        and pod.get("status", {}).get("phase", "Pending") == "Pending"
    )


def unschedulable_condition(pod: Obj) -> Obj | None:
    for condition in pod.get("status", {}).get("conditions", []):
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            found: Obj = condition
            return found
    return None


class Scheduler:
    """Runs a scheduling pass whenever a pod or node changes, plus a periodic retry."""

    def __init__(
        self, store: Store, recorder: events.Recorder, timings: Timings, bind: Callable[[Obj, str], Obj]
    ) -> None:
        self.store, self.recorder, self.timings = store, recorder, timings
        self.clock = store.clock
        self._bind = bind
        self._queued = False
        store.subscribe(self._on_change)
        self.clock.call_later(timings.scheduler_retry, self._periodic)

    def _on_change(self, change: Change) -> None:
        if change.resource in ("pods", "nodes") and not self._queued:
            self._queued = True
            self.clock.call_soon(self.run_pass)

    def _periodic(self) -> None:
        self.run_pass()
        self.clock.call_later(self.timings.scheduler_retry, self._periodic)

    def run_pass(self) -> None:
        self._queued = False
        pending = [p for p in self.store.iter_raw("pods") if needs_scheduling(p)]
        if not pending:
            return
        pending.sort(key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))
        nodes = sorted(self.store.iter_raw("nodes"), key=lambda n: str(n["metadata"]["name"]))
        pods = list(self.store.iter_raw("pods"))
        used = {
            n["metadata"]["name"]: fit.used_resources(
                p for p in pods if p["spec"].get("nodeName") == n["metadata"]["name"]
            )
            for n in nodes
        }
        for pod in pending:
            self._schedule_one(pod, nodes, used)

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
            return
        updated = self.store.mutate("pods", ns, name, lambda p: self._mark_unschedulable(p, message))
        if updated is not None:
            self.recorder.record(
                updated,
                "Warning",
                "FailedScheduling",
                message,
                component=messages.SCHEDULER,
                action="Scheduling",
            )

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
