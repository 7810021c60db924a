"""Core: the line for GPUs while a pool is at its maximum, read from the cluster's own pending pods.

Not a scheduler: the kube-scheduler takes pending pods by priority, then by when they were created (its
default queue sort, kubernetes/kubernetes pkg/scheduler/framework/plugins/queuesort/priority_sort.go,
`PrioritySort.Less`), so the line is that order, and each place is told when enough GPUs are likely back:
a holder the reaper has warned as idle by its idle release at the soonest, every holder by the end of its
lease plus the grace at the latest. Extending a lease, keeping an idle GPU or releasing one moves it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.core import notices, reaping, workloads

ROUNDING = timedelta(minutes=5)
"""ETAs are told to the next 5 minutes: finer would read as a promise, and edit the thread for nothing."""


@dataclass(frozen=True)
class Waiter:
    key: str
    gpus: int
    since: datetime
    priority: int = 0


@dataclass(frozen=True)
class Holder:
    gpus: int
    likely: datetime
    """When its GPUs are likely back: the idle release if the reaper warned it, else `latest`."""
    latest: datetime
    """When they are back at the latest, unless its lease is extended: its lease end plus the grace."""


@dataclass(frozen=True)
class Place:
    position: int
    """1 for the next in line."""
    soonest: datetime | None = None
    latest: datetime | None = None
    """None when the GPUs it waits for are not held by anyone gpubot knows to be leaving."""
    free_now: bool = False
    """Enough is free for it and all ahead of it: its turn comes without anyone leaving."""


def holder(workload: workloads.Workload, policy: reaping.ReaperPolicy, now: datetime) -> Holder | None:
    """A workload holding GPUs in the pool, and when they come back; None without a lease (none ends)."""
    if workload.deletion_requested:
        return Holder(workload.gpus, now, now)  # stopping: back within its grace period
    if workload.lease_end is None:
        return None
    latest = workload.lease_end + policy.grace
    marks = workload.marks
    likely = latest
    if marks.idle_warned_at is not None and (marks.kept_until is None or marks.kept_until < latest):
        released = marks.idle_warned_at + policy.idle_grace
        likely = min(max(released, marks.kept_until or released), latest)
    return Holder(workload.gpus, likely, latest)


def places(waiters: Iterable[Waiter], holders: Iterable[Holder], *, free: int = 0) -> dict[str, Place]:
    """Each waiter's place: the scheduler's order, and when the GPUs of all up to it are back. `free`:
    GPUs available now that nobody ahead takes (a Kueue quota's unused part); a full pool has none."""
    order = sorted(waiters, key=lambda w: (-w.priority, w.since, w.key))
    return ordered_places(order, holders, free=free)


def ordered_places(order: Iterable[Waiter], holders: Iterable[Holder], *, free: int = 0) -> dict[str, Place]:
    """The places of waiters already in their line's order (Kueue tells its own), first is #1."""
    held = list(holders)
    soon = sorted(h.likely for h in held for _ in range(h.gpus))
    late = sorted(h.latest for h in held for _ in range(h.gpus))
    found, needed = {}, -free
    for position, waiter in enumerate(order, start=1):
        needed += waiter.gpus
        if needed <= 0:  # fits in what is free: it waits for its turn, not for a holder
            found[waiter.key] = Place(position, free_now=True)
        elif needed <= len(late):
            found[waiter.key] = Place(position, soon[needed - 1], late[needed - 1])
        else:
            found[waiter.key] = Place(position)
    return found


def idle_to_ask(found: Iterable[workloads.Workload], profile: str, now: datetime) -> list[workloads.Workload]:
    """The holders of this profile's GPUs the reaper has warned as idle and nobody kept: the owners a
    waiter may politely ask. Idleness is the reaper's verdict (a whole idle window under the threshold),
    not a guess from one sample."""
    return [
        w
        for w in found
        if w.profile == profile
        and w.phase == "Running"
        and not w.deletion_requested
        and w.marks.idle_warned_at is not None
        and (w.marks.kept_until is None or w.marks.kept_until <= now)
    ]


def ask_text(asker: str, holder: workloads.Workload) -> str:
    """The DM to an idle GPU's owner: who waits, what is idle, what each button does."""
    since = holder.marks.idle_warned_at
    idle = f", idle by the reaper's count since {notices.clock_time(since)}" if since else ""
    minutes = int(reaping.ASKED_KEEP.total_seconds() // 60)
    return (
        f":wave: {asker} is waiting for a {holder.profile} GPU, and your `{holder.name}` holds one{idle}. "
        f"If you are done with it, Release gives it to them; Keep {minutes} min tells the reaper you need "
        "it a little longer."
    )


def _rounded(span: timedelta) -> str:
    """Rounded up to ROUNDING, at least one step ("about 0 min" helps nobody): "20 min", "4h05m"."""
    minutes = int(max(1, math.ceil(span / ROUNDING)) * ROUNDING.total_seconds() // 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def wait_text(place: Place, now: datetime, *, line: str = "") -> str:
    """ "#2 in line, about 20 to 35 min"; without an ETA when no known lease frees the GPUs. `line` names
    the line when it is not the pool's own ("Kueue queue team-a")."""
    where = f"#{place.position} in line" + (f" ({line})" if line else "")
    if place.free_now:
        return f"{where}, its GPUs are free: next when the queue is served"
    if place.soonest is None or place.latest is None:
        return f"{where}, behind GPUs with no lease end gpubot knows"
    low, high = _rounded(place.soonest - now), _rounded(place.latest - now)
    if low == high:
        return f"{where}, about {low}"
    if low.endswith(" min") and high.endswith(" min"):
        low = low.removesuffix(" min")
    return f"{where}, about {low} to {high}"
