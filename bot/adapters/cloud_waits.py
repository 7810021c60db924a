"""Adapter helper: the pause between two looks at a cloud change still running, for GKE and EKS alike.

Clouds offer no watch on a node-pool change, so `gpubot pool` looks again, soon at first, then every
`poll_seconds`; past `timeout_seconds` it stops waiting (the change goes on in the cloud) and says how to
check it.
"""

from __future__ import annotations

import time

from bot.core import errors, operations
from bot.settings import CloudSettings


def pause(
    settings: CloudSettings,
    pending: operations.Pending,
    started: float,
    attempt: int,
    watch: operations.Watch | None,
) -> None:
    """Between two looks: give up past the timeout, else tell the watch and sleep."""
    waited = time.monotonic() - started
    if waited > settings.timeout_seconds:
        raise errors.StillRunning(operations.timeout_text(pending, waited))
    if watch is not None:
        watch(pending)
    time.sleep(operations.next_delay(attempt, settings.poll_seconds))
