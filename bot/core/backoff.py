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


def retry_after(headers: Mapping[str, Any] | None) -> float:
    """Seconds a 429's Retry-After header asks for; 1 when it is missing or no number."""
    try:
        return max(float((headers or {}).get("Retry-After", 1)), 0.0)
    except (TypeError, ValueError):
        return 1.0
