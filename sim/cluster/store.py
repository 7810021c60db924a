"""One object store with one resourceVersion counter and one event history.

Every write, from an HTTP client or a simulated controller, goes through `commit`, so watchers see
all of them in resourceVersion order and can resume from any version still in the history.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sim.clock import Clock
from sim.cluster import errors

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
ObjKey = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped objects

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


@dataclass(frozen=True)
class Change:
    rv: int
    type: str
    resource: str
    obj: Obj
    old: Obj | None


def rfc3339(clock: Clock, seconds: float | None = None) -> str:
    moment = clock.datetime() if seconds is None else clock.to_datetime(seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(clock: Clock) -> str:
    return clock.datetime().strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Watcher:
    """A live subscription; the HTTP layer drains `queue` and applies its own filters."""

    def __init__(self, resource: str, namespace: str) -> None:
        self.resource = resource
        self.namespace = namespace
        self.queue: asyncio.Queue[Change | None] = asyncio.Queue()

    def wants(self, change: Change) -> bool:
        if change.resource != self.resource:
            return False
        return not self.namespace or change.obj["metadata"].get("namespace", "") == self.namespace


class Store:
    def __init__(self, clock: Clock, *, history: int = 20_000) -> None:
        self.clock = clock
        self._objects: dict[str, dict[ObjKey, Obj]] = {}
        self._rv = 0
        self._history: deque[Change] = deque(maxlen=history)
        self._watchers: set[Watcher] = set()
        self._listeners: list[Callable[[Change], None]] = []

    # -- reading ---------------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        return self._rv

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        found = self._objects.get(resource, {}).get((namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def items(self, resource: str, namespace: str = "") -> list[Obj]:
        """A deep copy of every object of a resource, optionally in one namespace, in name order."""
        bucket = self._objects.get(resource, {})
        keys = sorted(k for k in bucket if not namespace or k[0] == namespace)
        return [copy.deepcopy(bucket[k]) for k in keys]

    def iter_raw(self, resource: str) -> Iterator[Obj]:
        """Read-only view for controllers' hot loops: callers must not mutate what they get."""
        return iter(list(self._objects.get(resource, {}).values()))

    def limit_history(self, size: int) -> None:
        """Keep only the newest `size` changes, as an etcd compaction would; tests use it to reach a 410."""
        self._history = deque(self._history, maxlen=size)

    def compact(self) -> None:
        """Forget every past change, as an etcd compaction at the current version does: a watch may
        resume from this version on, and from any earlier one answers 410."""
        self._history.clear()

    @property
    def watcher_count(self) -> int:
        return len(self._watchers)

    def oldest_resumable(self) -> int:
        """The smallest resourceVersion a watch may resume from without a 410."""
        return self._history[0].rv - 1 if self._history else self._rv

    def changes_after(self, rv: int) -> list[Change]:
        if rv < self.oldest_resumable():
            raise errors.gone(f"too old resource version: {rv} ({self.oldest_resumable() + 1})")
        return [c for c in self._history if c.rv > rv]

    # -- subscribing -----------------------------------------------------------------------
    def subscribe(self, listener: Callable[[Change], None]) -> None:
        """Controllers hear of every committed change, synchronously; they should only schedule work."""
        self._listeners.append(listener)

    def watch(self, resource: str, namespace: str) -> Watcher:
        watcher = Watcher(resource, namespace)
        self._watchers.add(watcher)
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)

    def close_watches(self) -> None:
        for watcher in self._watchers:
            watcher.queue.put_nowait(None)

    # -- writing ---------------------------------------------------------------------------
    def create(self, resource: str, obj: Obj) -> Obj:
        meta = obj.setdefault("metadata", {})
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        bucket = self._objects.setdefault(resource, {})
        if (ns, name) in bucket:
            raise errors.already_exists(errors.ResourceRef("", resource, "", name))
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self.clock)
        if resource != "events":
            meta.setdefault("generation", 1)
        return self._commit(ADDED, resource, obj, None)

    def replace(self, resource: str, obj: Obj) -> Obj:
        """Store a new version of an existing object; the caller has checked preconditions."""
        meta = obj["metadata"]
        old = self._objects.get(resource, {}).get((meta.get("namespace", ""), meta["name"]))
        if old is None:
            raise errors.not_found(errors.ResourceRef("", resource, "", meta["name"]))
        for fixed in ("uid", "creationTimestamp"):
            meta[fixed] = old["metadata"][fixed]
        if old.get("spec") != obj.get("spec") and "generation" in old["metadata"]:
            meta["generation"] = old["metadata"]["generation"] + 1
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and old["metadata"].get("finalizers"):
            return self.remove(resource, meta.get("namespace", ""), meta["name"], final=obj)
        return self._commit(MODIFIED, resource, obj, old)

    def remove(self, resource: str, namespace: str, name: str, *, final: Obj | None = None) -> Obj:
        bucket = self._objects.get(resource, {})
        old = bucket.get((namespace, name))
        if old is None:
            raise errors.not_found(errors.ResourceRef("", resource, "", name))
        return self._commit(DELETED, resource, final or copy.deepcopy(old), old)

    def mutate(self, resource: str, namespace: str, name: str, change: Callable[[Obj], None]) -> Obj | None:
        """Controllers' read-modify-write: apply `change` to a copy and commit it if anything moved."""
        current = self.get(resource, namespace, name)
        if current is None:
            return None
        before = copy.deepcopy(current)
        change(current)
        if current == before:
            return current
        return self.replace(resource, current)

    def _commit(self, kind: str, resource: str, obj: Obj, old: Obj | None) -> Obj:
        self._rv += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self._rv)
        key = (meta.get("namespace", ""), meta["name"])
        if kind == DELETED:
            del self._objects[resource][key]
        else:
            self._objects.setdefault(resource, {})[key] = obj
        change = Change(self._rv, kind, resource, copy.deepcopy(obj), old)
        self._history.append(change)
        for watcher in self._watchers:
            if watcher.wants(change):
                watcher.queue.put_nowait(change)
        for listener in self._listeners:
            listener(change)
        return copy.deepcopy(obj)

    # -- persistence -----------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        return {
            "resourceVersion": self._rv,
            "objects": {r: list(b.values()) for r, b in self._objects.items()},
        }

    def restore(self, data: dict[str, Any]) -> None:
        """Reload a snapshot; history starts empty, so older versions answer 410 as after a compaction."""
        self._rv = int(data["resourceVersion"])
        for resource, objs in data["objects"].items():
            self._objects[resource] = {
                (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objs
            }
