"""The simulator's one clock: a discrete-event timer queue over simulated time.

Every controller schedules work here instead of sleeping, so a test can run an hour of
autoscaler behaviour in milliseconds by advancing the clock, and `--speed` only changes how
fast simulated time follows the wall clock, never what happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import heapq
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

EPOCH = dt.datetime.now(dt.UTC).replace(microsecond=0)
"""Simulated time starts at the wall clock's now, so ages kubectl computes itself read right at speed 1."""


@dataclass(order=True)
class Timer:
    due: float
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class Clock:
    """Simulated seconds since EPOCH, with timers that fire in due order.

    `speed=None` is the manual clock used by tests: time moves only through `advance`.
    A speed factor makes a driver task follow the wall clock, `speed` simulated seconds per real one.
    """

    def __init__(self, *, speed: float | None = None, start: float = 0.0, epoch: dt.datetime = EPOCH) -> None:
        self.speed = speed
        self.epoch = epoch
        self._now = start
        self._timers: list[Timer] = []
        self._seq = itertools.count()
        self._wake: asyncio.Event | None = None
        self._real_anchor = time.monotonic()
        self._sim_anchor = start

    # -- reading -------------------------------------------------------------------------
    def now(self) -> float:
        return self._now

    def datetime(self) -> dt.datetime:
        return self.epoch + dt.timedelta(seconds=self._now)

    def to_datetime(self, seconds: float) -> dt.datetime:
        return self.epoch + dt.timedelta(seconds=seconds)

    def from_stamp(self, stamp: str) -> float:
        """Simulated seconds for an RFC 3339 timestamp as the API server stores it (`...Z`)."""
        return self.from_datetime(dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")))

    def from_datetime(self, moment: dt.datetime) -> float:
        return (moment - self.epoch).total_seconds()

    # -- scheduling ----------------------------------------------------------------------
    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(self._now + max(delay, 0.0), next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        if self._wake is not None:
            self._wake.set()
        return timer

    def call_soon(self, callback: Callable[[], None]) -> Timer:
        return self.call_later(0.0, callback)

    def next_due(self) -> float | None:
        while self._timers and self._timers[0].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0].due if self._timers else None

    def run_due(self, until: float) -> int:
        """Fire every timer due at or before `until`, in order, moving time to each one."""
        fired = 0
        while True:
            due = self.next_due()
            if due is None or due > until:
                break
            timer = heapq.heappop(self._timers)
            self._now = max(self._now, timer.due)
            fired += 1
            try:
                timer.callback()
            except Exception:
                logger.exception("simulated controller step failed")
        self._now = max(self._now, until)
        return fired

    def advance(self, seconds: float) -> int:
        """Manual clock: move time forward, firing everything that falls due on the way."""
        return self.run_due(self._now + seconds)

    # -- following the wall clock ---------------------------------------------------------
    async def drive(self) -> None:
        """Run timers as they fall due: immediately on a manual clock, on wall time otherwise."""
        self._wake = asyncio.Event()
        self._real_anchor, self._sim_anchor = time.monotonic(), self._now
        while True:
            target = self._now if self.speed is None else self._wall_now()
            self.run_due(target)
            due = self.next_due()
            self._wake.clear()
            timeout = None
            if due is not None and self.speed is not None:
                timeout = max((due - self._wall_now()) / self.speed, 0.0)
            if due is not None and self.speed is None and due <= self._now:
                timeout = 0.0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    def _wall_now(self) -> float:
        assert self.speed is not None
        return self._sim_anchor + (time.monotonic() - self._real_anchor) * self.speed
