"""The reaper's decisions: when to remind, nudge, warn about idleness, and delete, as pure functions.

The reaper's memory lives on the pod (annotations), so a restart or a new leader decides the same:
a reminder is marked with the lease end it was for, so an extension (a new lease end) re-arms it.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.core import models, starts


class Act(enum.Enum):
    REMIND = "remind"
    """The lease ends soon: thread reply and DM, with Extend and Release."""
    NUDGE = "nudge"
    """One more, near the end."""
    EXPIRE = "expire"
    """Lease over and the grace period too: delete."""
    IDLE_WARN = "idle-warn"
    """The GPU has been idle for the whole window: an early reminder."""
    IDLE_RELEASE = "idle-release"
    """Still idle a grace period after the warning, and nobody kept it: delete."""
    IDLE_CLEAR = "idle-clear"
    """Busy again after a warning: forget the warning, quietly."""
    CLEAN_FINISHED = "clean-finished"
    """Succeeded or Failed long enough ago: delete the pod, keep the thread."""
    BROKEN_START = "broken-start"
    """Unable to start for the broken-start limit (its image cannot be pulled, it keeps crashing), or it
    never can: delete, saying why, so its GPU node can drain."""
    FINISH_DELETE = "finish-delete"
    """A release or reap is on the pod's record but its delete never came (a crash between): delete,
    quietly, since whoever recorded it has said so already."""


REAPING = frozenset({Act.EXPIRE, Act.IDLE_RELEASE, Act.CLEAN_FINISHED, Act.BROKEN_START})
"""The acts that delete a pod after saying why."""
SPEAKING = frozenset({Act.REMIND, Act.NUDGE, Act.IDLE_WARN})
"""The acts that only speak: a message to deliver, then a mark on the pod."""
ASKED_KEEP = timedelta(minutes=30)
"""How long "Keep 30 min" in a DM asking for an idle GPU keeps it: someone waits, so not a whole idle
window; the reaper may warn again after it."""


@dataclass(frozen=True)
class ReaperPolicy:
    remind_before: timedelta = timedelta(minutes=15)
    nudge_before: timedelta = timedelta(minutes=3)
    grace: timedelta = timedelta(minutes=5)
    """After the lease end, before the delete: time to press Extend on a reminder read late."""
    idle_threshold_percent: float = 5.0
    idle_window: timedelta = timedelta(minutes=45)
    idle_grace: timedelta = timedelta(minutes=15)
    """After the idle warning, before the release, unless the owner keeps it."""
    finished_retention: timedelta = timedelta(hours=1)
    """Finished pods stay this long so logs can be read, then go."""
    broken_start: timedelta = timedelta(minutes=10)
    """A pod unable to start this long (ImagePullBackOff, CrashLoopBackOff, …) is released: long enough
    for a pull that fails once or a secret created late, short of an idle GPU node's cost mattering."""
    max_total_hours: float = 24.0
    """Cap on a lease's whole length (first request to end), extensions included."""
    telling_timeout: timedelta = timedelta(minutes=5)
    """A claim on an act whose message is not posted within this is void: its replica died mid-act.
    Longer than the outbox's wait for one post (a minute), so a slow Slack is not taken for a crash."""
    dry_run: bool = False


@dataclass(frozen=True)
class Marks:
    """What the reaper already did to one workload, read back from its annotations."""

    reminded_for: datetime | None = None
    """The lease end the reminder was sent for."""
    nudged_for: datetime | None = None
    idle_warned_at: datetime | None = None
    idle_evidence: str = ""
    """What the idle warning was judged on, as `notebooks.mark` keeps it."""
    kept_until: datetime | None = None
    """The owner pressed Keep on an idle warning: no idle release before this."""
    telling_since: datetime | None = None
    """A replica claimed an act at this time and has not confirmed its message yet."""


@dataclass(frozen=True)
class Candidate:
    """One workload as the reaper sees it: its lease, its state, and what was done already."""

    lease_end: datetime | None
    finished_at: datetime | None
    """When the pod Succeeded or Failed; None while it runs or waits."""
    terminating: bool
    marks: Marks = Marks()
    idle: bool = False
    """Idle by the metric for the whole window (and, for a notebook, by its Jupyter: `notebooks.judge`);
    False when the metric is missing or stale."""
    delete_recorded: bool = False
    """The pod's newest audit record is a release or a reap."""
    start: starts.Start = field(default_factory=starts.Start)
    """How its container waits to start; a broken start is released after the policy's limit."""


def decide(candidate: Candidate, now: datetime, policy: ReaperPolicy) -> Act | None:
    """The one thing to do now, most urgent first; None when nothing is due.

    An act is claimed on the pod before its message goes out and marked done after, so a claim younger
    than the timeout means another round (or replica) is acting: nothing to do until it is over or void.
    """
    if candidate.terminating:
        return None
    if candidate.delete_recorded:
        return Act.FINISH_DELETE
    claimed = candidate.marks.telling_since
    if claimed is not None and now - claimed < policy.telling_timeout:
        return None
    if candidate.finished_at is not None:
        return Act.CLEAN_FINISHED if now - candidate.finished_at >= policy.finished_retention else None
    if starts.is_due(candidate.start, now, policy.broken_start):
        return Act.BROKEN_START  # before the lease: why it never started is the news for its owner
    end, marks = candidate.lease_end, candidate.marks
    if end is not None and now >= end + policy.grace:
        return Act.EXPIRE
    idle = _idle_act(candidate, now, policy)
    if idle in (Act.IDLE_RELEASE, Act.IDLE_CLEAR):
        return idle
    if end is not None and now >= end - policy.nudge_before and marks.nudged_for != end:
        return Act.NUDGE if marks.reminded_for == end else Act.REMIND
    if end is not None and now >= end - policy.remind_before and marks.reminded_for != end:
        return Act.REMIND
    return idle


def _idle_act(candidate: Candidate, now: datetime, policy: ReaperPolicy) -> Act | None:
    marks = candidate.marks
    if not candidate.idle:
        return Act.IDLE_CLEAR if marks.idle_warned_at is not None else None
    if marks.kept_until is not None and now < marks.kept_until:
        return None
    if marks.idle_warned_at is None or (marks.kept_until and marks.idle_warned_at < marks.kept_until):
        return Act.IDLE_WARN
    return Act.IDLE_RELEASE if now - marks.idle_warned_at >= policy.idle_grace else None


@dataclass(frozen=True)
class Extension:
    lease_end: datetime
    hours: float


def extend(
    lease_end: datetime | None,
    requested_at: datetime | None,
    hours: float | None,
    now: datetime,
    policy: ReaperPolicy,
    default_hours: float,
) -> Extension | models.UsageError:
    """A new lease end `hours` past the later of now and the current end, within the total cap."""
    asked = default_hours if hours is None else hours
    if asked <= 0:
        return models.UsageError("An extension must be a positive number of hours.", "/gpu extend NAME 2")
    start = requested_at or now
    base = max(now, lease_end or now)
    new_end = base + timedelta(hours=asked)
    cap_end = start + timedelta(hours=policy.max_total_hours)
    if new_end > cap_end:
        room = math.floor((cap_end - base).total_seconds() / 900) / 4  # whole quarter hours left
        cap = f"{policy.max_total_hours:g}h"
        if room <= 0:
            return models.UsageError(
                f"This workload has reached the {cap} cap on a lease's total length, so it cannot be "
                "extended. Save your work; a new `/gpu run` starts a fresh lease.",
                "/gpu status",
            )
        return models.UsageError(
            f"{asked:g}h more would pass the {cap} cap on a lease's total length; "
            f"at most {room:g}h more fits.",
            f"/gpu extend NAME {room:g}",
        )
    return Extension(new_end, asked)
