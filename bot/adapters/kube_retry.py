"""Adapter helper: one Kubernetes API call, with a timeout, retried on what retrying can fix.

This is the bot's one retry layer for API calls: its budget (`RequestSettings`: 4 tries, none begun that
could end past 25 s) is the whole of it, and callers above the adapter do not retry the same call again.

5xx answers, 429s and timeouts (`Unavailable`, `RateLimited`) are retried with capped exponential back-off;
everything else is the caller's to handle. Only calls that are safe to repeat come here: reads, deletes,
patches that carry a precondition or set fixed values, and creates under a deterministic name. A failed
attempt may still have done its work (a timeout loses the answer, not necessarily the write), so each
attempt is told whether an earlier one might have: a write then recognises its own earlier success in
the Conflict or AlreadyExists it meets, instead of reporting a failure or writing twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from kubernetes import client

from bot.core import backoff, errors

logger = logging.getLogger(__name__)

T = TypeVar("T")
RETRIED = (errors.Unavailable, errors.RateLimited)


@dataclass(frozen=True)
class RequestSettings:
    connect_timeout_seconds: float = 5.0
    read_timeout_seconds: float = 15.0
    """A silent answer counts as lost after this; below the apiserver's own 60 s request timeout, so the
    bot gives up and retries first, and a user never waits minutes behind one dead connection. With the
    connect timeout it leaves 5 s of the deadline for retries of quick failures (at 20 s it left none, and
    no call was ever retried)."""
    attempts: int = 4
    """Tries per call; at a 10% failure rate, four fail together once in ten thousand calls."""
    backoff_initial_seconds: float = 0.25
    """Pause after the first failure; doubles per failure. Short: a user is waiting on most calls."""
    backoff_max_seconds: float = 4.0
    deadline_seconds: float = 25.0
    """No new try once it could end past this many seconds after the first began: a person waits on most
    calls, and a hung API server would otherwise hold them for every try's read timeout (82 s before)."""

    @property
    def timeout(self) -> tuple[float, float]:
        """The client's `_request_timeout`: (connect, read) seconds."""
        return (self.connect_timeout_seconds, self.read_timeout_seconds)


def delay(initial: float, maximum: float, failures: int, err: Exception) -> float:
    """Seconds to wait after `failures` failures in a row (`backoff.exponential`); a 429's Retry-After is
    honoured. The informers' pauses between watches use it too."""
    wait = backoff.exponential(initial, maximum, failures)
    if isinstance(err, errors.RateLimited):
        return max(wait, err.retry_after or 0.0)  # without one (the API server always sends it), the back-off
    return wait


def call(
    settings: RequestSettings,
    what: str,
    attempt: Callable[[bool], T],
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Run `attempt(retried)` until it succeeds or fails for good; `retried` is True once an earlier
    attempt failed in a way that may have done its work. Raises the last failure after the last try, or
    once another could not end within the deadline."""
    retried, started = False, clock()
    for failures in range(1, settings.attempts + 1):
        try:
            return attempt(retried)
        except RETRIED as err:
            pause = delay(settings.backoff_initial_seconds, settings.backoff_max_seconds, failures, err)
            worst = clock() - started + pause + sum(settings.timeout)
            if failures == settings.attempts or worst > settings.deadline_seconds:
                raise
            logger.warning("%s failed (%s, try %s); retrying in %.2fs", what, err, failures, pause)
            retried = retried or isinstance(err, errors.Unavailable)  # a 429 did nothing
            sleep(pause)
    raise AssertionError("unreachable: the last attempt returns or raises")


def carries(obj: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
    """The object holds every label and annotation of `metadata`: a write of ours that reached it."""
    found = obj.get("metadata") or {}
    return all(
        (found.get(field) or {}).get(key) == value
        for field in ("labels", "annotations")
        for key, value in (metadata.get(field) or {}).items()
    )


def without_transport_retries() -> client.Configuration:
    """A client configuration whose urllib3 pool does not retry by itself. Its default (3 silent retries
    of every timed-out read) would multiply `kube_retry`'s attempts, and make one dead connection cost
    four read timeouts before anyone hears of it."""
    configuration = client.Configuration()
    configuration.retries = False
    return configuration
