"""Exponential retry backoff, the one formula every retry loop in the bot shares."""

from collections.abc import Mapping
from typing import Any

MAX_DOUBLINGS = 30
"""Past this many doublings any cap in use has long been reached; without the limit, a loop retrying a dead
server for long enough computes 2**1024, which overflows a float and kills the loop's thread."""


def exponential(initial: float, maximum: float, failures: int) -> float:
    """Seconds to wait after `failures` failures in a row: `initial`, doubling each time, up to `maximum`."""
    doublings = min(max(failures - 1, 0), MAX_DOUBLINGS)
    return min(initial * float(2**doublings), maximum)


def retry_after(headers: Mapping[str, Any] | None) -> float | None:
    """Seconds a 429's Retry-After header asks for (RFC 9110 10.2.3, the delay-seconds form Slack and the
    API server send); None when it is missing or no number, so the caller's own default applies. Header
    names are matched in any case, and a list value (as some clients give) by its first item."""
    raw = next((v for k, v in (headers or {}).items() if str(k).lower() == "retry-after"), None)
    if isinstance(raw, list):
        raw = raw[0] if raw else None
    try:
        return max(float(raw), 0.0) if raw is not None else None
    except (TypeError, ValueError):
        return None
