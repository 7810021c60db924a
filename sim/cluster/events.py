"""Events: one store behind core/v1 and events.k8s.io/v1, and the recorder controllers report through.

The store keeps the core/v1 shape; events.k8s.io/v1 is a view converted on the way in and out,
as the real apiserver serves both from one etcd key.
"""

from __future__ import annotations

from typing import Any

from sim.cluster import store as store_mod

Obj = dict[str, Any]

# events.k8s.io/v1 field → core/v1 field (k8s.io/kubernetes pkg/apis/events/v1 conversion)
_V1_TO_CORE = {
    "regarding": "involvedObject",
    "related": "related",
    "note": "message",
    "reportingController": "reportingComponent",
    "reportingInstance": "reportingInstance",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_SAME = ("metadata", "type", "reason", "action", "eventTime", "series")


def to_events_v1(core: Obj, *, fill: bool = True) -> Obj:
    """The events.k8s.io/v1 view; `fill` supplies the eventTime legacy events lack (off for validation)."""
    out: Obj = {"kind": "Event", "apiVersion": "events.k8s.io/v1"}
    for key in _SAME:
        if key in core:
            out[key] = core[key]
    for v1_key, core_key in _V1_TO_CORE.items():
        if core.get(core_key) not in (None, "", {}):
            out[v1_key] = core[core_key]
    if fill and not out.get("eventTime"):
        # The v1 model requires eventTime; legacy events carry only first/last timestamps.
        stamp = core.get("firstTimestamp") or core["metadata"].get("creationTimestamp")
        out["eventTime"] = stamp.replace("Z", ".000000Z") if stamp else None
    return out


def from_events_v1(v1: Obj) -> Obj:
    out: Obj = {"kind": "Event", "apiVersion": "v1"}
    for key in _SAME:
        if key in v1:
            out[key] = v1[key]
    for v1_key, core_key in _V1_TO_CORE.items():
        if v1_key in v1:
            out[core_key] = v1[v1_key]
    out.setdefault("involvedObject", {})
    return out


def reference(obj: Obj) -> Obj:
    meta = obj["metadata"]
    ref = {
        "kind": obj.get("kind", ""),
        "apiVersion": obj.get("apiVersion", "v1"),
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    return ref


class Recorder:
    """Writes events as client-go's recorder does, folding repeats into `count` like its correlator."""

    def __init__(self, store: store_mod.Store) -> None:
        self.store = store
        self._seen: dict[tuple[str, ...], tuple[str, str]] = {}
        self._sequence = 0

    def record(
        self,
        obj: Obj,
        type_: str,
        reason: str,
        message: str,
        *,
        component: str,
        host: str = "",
        action: str = "",
    ) -> None:
        ref = reference(obj)
        namespace = ref.get("namespace") or "default"
        key = (ref["uid"], type_, reason, message, component)
        now, micro = store_mod.rfc3339(self.store.clock), store_mod.micro_time(self.store.clock)
        if key in self._seen:
            ns, name = self._seen[key]

            def bump(event: Obj) -> None:
                event["count"] = int(event.get("count", 1)) + 1
                event["lastTimestamp"] = now
                event["series"] = {"count": event["count"], "lastObservedTime": micro}

            if self.store.mutate("events", ns, name, bump) is not None:
                return
        # client-go names events `<object>.<UnixNano in hex>`; the counter keeps same-instant events in order.
        self._sequence += 1
        stamp = int(self.store.clock.datetime().timestamp() * 1e9) + self._sequence
        name = f"{ref['name']}.{stamp:x}"
        source = {"component": component, **({"host": host} if host else {})}
        event: Obj = {
            "kind": "Event",
            "apiVersion": "v1",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "type": type_,
            "source": source,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "eventTime": micro,
            "reportingComponent": component,
            "reportingInstance": f"{component}-{host}" if host else component,
            "action": action or reason,
        }
        self.store.create("events", event)
        self._seen[key] = (namespace, name)
