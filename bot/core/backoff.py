"""Exponential retry backoff, the one formula every retry loop in the bot shares."""

MAX_DOUBLINGS = 30
"""Past this many doublings any cap in use has long been reached; without the limit, a loop retrying a dead
server for long enough computes 2**1024, which overflows a float and kills the loop's thread."""


def exponential(initial: float, maximum: float, failures: int) -> float:
    """Seconds to wait after `failures` failures in a row: `initial`, doubling each time, up to `maximum`."""
    doublings = min(max(failures - 1, 0), MAX_DOUBLINGS)
    return min(initial * float(2**doublings), maximum)
