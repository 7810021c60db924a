"""Services: read a running workload's output for what its owner should open (a notebook's URL and token).

One follower per workload on a small pool of threads, each streaming the pod's log (`follow`) until a URL
with a token on one of its ports appears or the wait ends; what it finds goes to the tracker, whose next
edit of the thread shows it. A failure to read is only logged: the Connect section stands without a URL.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from bot.core import connect, errors, workloads

logger = logging.getLogger(__name__)

WAIT_SECONDS = 600.0
"""How long a running workload's output is followed for its URL: a notebook image prints it seconds after
start, but an entrypoint may install packages first."""
FOLLOWERS = 4
"""Logs followed at once; more notebooks starting together wait their turn."""


class FollowLog(Protocol):
    def __call__(
        self, namespace: str, name: str, *, until: Callable[[str], bool], seconds: float
    ) -> str | None: ...


class UrlFinder:
    def __init__(
        self,
        follow_log: FollowLog,
        found: Callable[[str, str], None],
        *,
        seconds: float = WAIT_SECONDS,
        followers: int = FOLLOWERS,
    ) -> None:
        self._follow_log = follow_log
        self._found = found
        self._seconds = seconds
        self._looking: set[str] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=followers, thread_name_prefix="gpubot-connect")

    def look(self, workload: workloads.Workload) -> None:
        """Start following this workload's output, unless it is followed already or has no ports."""
        with self._lock:
            if not workload.ports or workload.key in self._looking:
                return
            self._looking.add(workload.key)
        self._pool.submit(self._look, workload)

    def _look(self, workload: workloads.Workload) -> None:
        def has_url(line: str) -> bool:
            return bool(connect.find_url([line], workload.ports))

        try:
            line = self._follow_log(workload.namespace, workload.name, until=has_url, seconds=self._seconds)
        except errors.GpubotError as err:
            logger.info("no URL for %s: its output could not be read: %s", workload.key, err)
            line = None
        if line is not None:
            self._found(workload.key, connect.find_url([line], workload.ports))
        # Kept in `_looking`: a workload's output is followed once per bot; a restart looks again.

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
