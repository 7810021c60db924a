"""How long a GPU node usually takes, from past scale-ups: the thread's ETA and its "far longer than usual".

Samples are seconds from TriggeredScaleUp to the node's GPU being allocatable, newest first, as the
store keeps them per pool. Pure: the tracker reads the store and the clock and passes both in.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.core import explain, lifecycle, notices

HISTORY_KEEP = 20
"""Scale-ups remembered per pool: enough for a stable median, recent enough to follow a cloud's mood."""
NO_HISTORY_OVERDUE = timedelta(minutes=15)
"""With no history, the Cluster Autoscaler's own --max-node-provision-time is the yardstick."""
SLOW_FACTOR = 2.0
SLOW_MARGIN = timedelta(minutes=5)
"""Overdue past both twice the median and the median plus this, so a 40 s norm does not cry wolf at 81 s."""
Step = lifecycle.Step
WAITING_FOR_NODE = frozenset({Step.SCALE_UP, Step.PROVISIONING, Step.NODE_READY})


def series(pool: str) -> str:
    return f"scale-up-seconds:{pool}"


@dataclass(frozen=True)
class Usual:
    median: timedelta
    count: int


def usual(samples: Sequence[float]) -> Usual | None:
    if not samples:
        return None
    return Usual(timedelta(seconds=statistics.median(samples)), len(samples))


def overdue_after(history: Usual | None) -> timedelta:
    if history is None:
        return NO_HISTORY_OVERDUE
    return max(history.median * SLOW_FACTOR, history.median + SLOW_MARGIN)


def measured(progress: lifecycle.Progress) -> timedelta | None:
    """This workload's scale-up duration, once its node's GPU is allocatable; None if it had none.

    The watches race: the pod may be seen scheduled before its node's GPU update, which then implies
    the GPU step; its scheduling time stands in for it."""
    started = progress.at(lifecycle.Step.SCALE_UP)
    ready = progress.at(lifecycle.Step.GPU_READY) or progress.at(lifecycle.Step.SCHEDULED)
    if started is None or ready is None or ready < started:
        return None
    return ready - started


def waiting_for_node(progress: lifecycle.Progress) -> bool:
    return progress.outcome is None and progress.step in WAITING_FOR_NODE


def eta_note(progress: lifecycle.Progress, history: Usual | None) -> str:
    """While the node comes: when it is likely ready, from this pool's past scale-ups.

    An absolute time rather than a countdown, so the message is not edited on every tick.
    """
    started = progress.at(lifecycle.Step.SCALE_UP)
    if history is None or started is None or not waiting_for_node(progress):
        return ""
    typical = notices.format_elapsed(history.median)
    basis = "the last scale-up" if history.count == 1 else f"the median of the last {history.count}"
    expected = notices.clock_time(started + history.median)
    return f"Node likely ready {expected}: usually {typical} after a scale-up here ({basis})."


def slow(progress: lifecycle.Progress, history: Usual | None, now: datetime) -> explain.Problem | None:
    """Provisioning far longer than usual: the node has not become Ready well past the norm."""
    started = progress.at(lifecycle.Step.SCALE_UP)
    if started is None or not waiting_for_node(progress) or progress.at(lifecycle.Step.NODE_READY):
        return None
    limit = overdue_after(history)
    if now - started < limit:
        return None
    took = notices.format_elapsed(now - started)
    norm = (
        f"usually {notices.format_elapsed(history.median)}"
        if history
        else f"the autoscaler gives up at {notices.format_elapsed(NO_HISTORY_OVERDUE)}"
    )
    return explain.Problem(
        "provisioning-slow",
        f"provisioning is taking far longer than usual: no Ready node {took} after the scale-up ({norm})",
        "the cloud may be short of this GPU type or the node failed to boot; the autoscaler retries on "
        "its own. Keep waiting, or `/gpu release` and try another `--type` later",
    )
