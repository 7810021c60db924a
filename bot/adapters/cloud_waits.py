"""Adapter helper: the pause between two looks at a cloud change still running, for GKE and EKS alike.

Clouds offer no watch on a node-pool change, so `gpubot pool` looks again, soon at first, then every
`poll_seconds`; past `timeout_seconds` it stops waiting (the change goes on in the cloud) and says how to
check it.
"""

from __future__ import annotations

import time

from bot.core import errors, operations
from bot.settings import CloudSettings


class Waiting:
    """One wait for a cloud change: when it began, and how many pauses it has taken so far."""

    def __init__(self, settings: CloudSettings, watch: operations.Watch | None) -> None:
        self.settings, self.watch = settings, watch
        self.started, self.attempt = time.monotonic(), 0

    def pause(self, pending: operations.Pending) -> None:
        """Between two looks: give up past the timeout, else tell the watch and sleep."""
        waited = time.monotonic() - self.started
        if waited > self.settings.timeout_seconds:
            raise errors.StillRunning(operations.timeout_text(pending, waited))
        if self.watch is not None:
            self.watch(pending)
        time.sleep(operations.next_delay(self.attempt, self.settings.poll_seconds))
        self.attempt += 1
