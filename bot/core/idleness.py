"""Whether a workload's GPU is idle, decided from what the metrics showed; never idle on missing data.

Deleting someone's work on a gap in monitoring would be the worst failure of the reaper, so every
doubt (no series, too few samples to cover the window, samples that stopped coming) reads as busy.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

COVERAGE = 0.8
"""Share of the window's scrapes that must be there: a few lost scrapes are normal, a gap is not."""
FRESH_INTERVALS = 2
"""The newest sample may be this many scrape intervals old: one late scrape, not a stopped exporter."""


@dataclass(frozen=True)
class Utilisation:
    """A pod's GPU utilisation over a window, as the metrics store reported it."""

    max_percent: float
    """The highest sample in the window, 0-100 whatever the metric's own unit."""
    samples: int
    """Samples in the window; for several GPUs, those of the least-covered one."""
    newest: datetime
    """Time of the newest sample; for several GPUs, the stalest one's."""


def is_idle(
    utilisation: Utilisation | None,
    *,
    threshold_percent: float,
    window: timedelta,
    scrape_interval: timedelta,
    now: datetime,
) -> bool:
    """Idle only when enough fresh samples cover the window and all stay below the threshold."""
    if window <= timedelta(0) or scrape_interval <= timedelta(0):
        raise ValueError("window and scrape_interval must be positive")
    if utilisation is None:
        return False
    if utilisation.samples < COVERAGE * (window / scrape_interval):
        return False
    if now - utilisation.newest > FRESH_INTERVALS * scrape_interval:
        return False
    return utilisation.max_percent < threshold_percent
