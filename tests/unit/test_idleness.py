"""Idleness as a table: idle only on enough fresh samples all below the threshold, busy on any doubt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core import idleness
from bot.core.idleness import Utilisation

NOW = datetime(2026, 3, 1, 14, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=30)
SCRAPE = timedelta(seconds=15)
FULL = 120
"""Scrapes in a full window: 30 min / 15 s."""
SEC = timedelta(seconds=1)


def seen(max_percent: float = 0.0, samples: int = FULL, age: timedelta = 5 * SEC) -> Utilisation:
    return Utilisation(max_percent=max_percent, samples=samples, newest=NOW - age)


@pytest.mark.parametrize(
    ("utilisation", "idle"),
    [
        pytest.param(seen(), True, id="flat-zero-full-window"),
        pytest.param(seen(max_percent=4.9), True, id="just-below-threshold"),
        pytest.param(seen(max_percent=5.0), False, id="at-threshold-is-busy"),
        pytest.param(seen(max_percent=97.0), False, id="busy"),
        pytest.param(None, False, id="no-series-is-busy"),
        pytest.param(seen(samples=96), True, id="80-percent-coverage-is-enough"),
        pytest.param(seen(samples=95), False, id="below-80-percent-coverage"),
        pytest.param(seen(samples=0), False, id="no-samples"),
        pytest.param(seen(samples=10), False, id="pod-younger-than-the-window"),
        pytest.param(seen(age=30 * SEC), True, id="two-intervals-old-is-fresh"),
        pytest.param(seen(age=31 * SEC), False, id="older-than-two-intervals-is-stale"),
        pytest.param(seen(age=20 * 60 * SEC), False, id="exporter-stopped"),
        pytest.param(seen(age=-5 * SEC), True, id="clock-skew-ahead-is-fresh"),
    ],
)
def test_is_idle(utilisation: Utilisation | None, idle: bool) -> None:
    decided = idleness.is_idle(
        utilisation, threshold_percent=5.0, window=WINDOW, scrape_interval=SCRAPE, now=NOW
    )

    assert decided is idle


def test_coverage_scales_with_window_and_interval() -> None:
    hour, minute = timedelta(hours=1), timedelta(minutes=1)
    almost = seen(samples=48)  # 80 % of an hour at one scrape a minute

    assert idleness.is_idle(almost, threshold_percent=5, window=hour, scrape_interval=minute, now=NOW)
    assert not idleness.is_idle(almost, threshold_percent=5, window=hour, scrape_interval=SCRAPE, now=NOW)


@pytest.mark.parametrize(("window", "interval"), [(timedelta(0), SCRAPE), (WINDOW, timedelta(0))])
def test_a_zero_window_or_interval_is_refused(window: timedelta, interval: timedelta) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        idleness.is_idle(seen(), threshold_percent=5, window=window, scrape_interval=interval, now=NOW)
