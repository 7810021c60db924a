"""Pre-warm schedules as admins type them: parsed, refused with what to type, and judged in their zone."""

from __future__ import annotations

from datetime import UTC, datetime, time

import pytest

from bot.core import models, warm

BERLIN = "gpu-pool min 1 weekdays 09:00-18:00 Europe/Berlin"


def schedule(text: str) -> warm.WarmSchedule:
    parsed = warm.parse(text)
    assert isinstance(parsed, warm.WarmSchedule), parsed
    return parsed


def test_a_schedule_reads_as_typed() -> None:
    parsed = schedule(BERLIN)
    assert parsed == warm.WarmSchedule(
        "gpu-pool", 1, ("mon", "tue", "wed", "thu", "fri"), time(9), time(18), "Europe/Berlin"
    )
    assert parsed.text == "gpu-pool min 1 mon,tue,wed,thu,fri 09:00-18:00 Europe/Berlin"
    assert schedule("GPU-Pool MIN 2 mon-wed 8:30-12:00 UTC").days == ("mon", "tue", "wed")
    assert schedule("p min 1 fri,mon 10:00-11:00 UTC").days == ("mon", "fri")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("gpu-pool 1 weekdays", "is not a schedule"),
        ("gpu-pool min 1 someday 09:00-18:00 UTC", "is not a set of days"),
        ("gpu-pool min 1 fri-mon 09:00-18:00 UTC", "is not a set of days"),
        ("gpu-pool min 1 daily 25:00-26:00 UTC", "is not a time range"),
        ("gpu-pool min 1 daily 18:00-09:00 UTC", "must start before they end"),
        ("gpu-pool min 0 daily 09:00-18:00 UTC", "between 1 and 100"),
        ("gpu-pool min 1 daily 09:00-18:00 Mars/Olympus", "is not a time zone"),
    ],
)
def test_bad_schedules_say_what_is_wrong_and_what_to_type(text: str, says: str) -> None:
    refused = warm.parse(text)
    assert isinstance(refused, models.UsageError) and says in refused.problem
    assert refused.suggestion == f"/gpu warm {warm.EXAMPLE}"


def test_a_schedule_is_judged_in_its_own_time_zone() -> None:
    berlin = schedule(BERLIN)
    monday_morning_utc = datetime(2026, 12, 7, 7, 59, tzinfo=UTC)  # 08:59 in Berlin
    assert not warm.active(berlin, monday_morning_utc)
    assert warm.active(berlin, datetime(2026, 12, 7, 8, 0, tzinfo=UTC))
    assert not warm.active(berlin, datetime(2026, 12, 7, 17, 0, tzinfo=UTC))  # 18:00 Berlin: over
    assert not warm.active(berlin, datetime(2026, 12, 5, 10, 0, tzinfo=UTC))  # a Saturday


def test_outside_every_schedule_the_pool_may_drain_to_zero() -> None:
    both = [schedule(BERLIN), schedule("gpu-pool min 3 wed 12:00-13:00 Europe/Berlin")]
    wednesday_noon = datetime(2026, 12, 9, 11, 30, tzinfo=UTC)
    assert warm.wanted_min(both, "gpu-pool", wednesday_noon) == 3
    assert warm.wanted_min(both, "gpu-pool", datetime(2026, 12, 9, 20, 0, tzinfo=UTC)) == 0
    assert warm.wanted_min(both, "other-pool", wednesday_noon) == 0


def test_a_weeks_warm_capacity_has_a_price() -> None:
    assert warm.warm_cost(schedule(BERLIN), 0.54) == pytest.approx(1 * 5 * 9 * 0.54)
