"""Pre-warm schedules as admins type them: parsed, refused with what to type, and judged in their zone."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from apscheduler.triggers.cron import CronTrigger

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
    bounds = {"gpu-pool": (0, 5), "other-pool": (0, 5)}
    assert [(c.pool, c.after, c.schedule) for c in warm.plan(both, bounds, wednesday_noon)] == [
        ("gpu-pool", 3, both[1])
    ]
    evening = datetime(2026, 12, 9, 20, 0, tzinfo=UTC)
    assert [(c.pool, c.after) for c in warm.plan(both, {"gpu-pool": (3, 5)}, evening)] == [("gpu-pool", 0)]


def test_a_weeks_warm_capacity_has_a_price() -> None:
    assert warm.warm_cost(schedule(BERLIN), 0.54) == pytest.approx(1 * 5 * 9 * 0.54)


# -- planning, edges and words ----------------------------------------------------------------------------

MONDAY_0900_BERLIN = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)


def test_at_the_start_edge_the_min_goes_up_and_at_the_end_back_to_zero() -> None:
    berlin = schedule(BERLIN)
    before = datetime(2026, 12, 7, 7, 59, tzinfo=UTC)
    assert warm.plan([berlin], {"gpu-pool": (0, 5)}, before) == []
    assert warm.plan([berlin], {"gpu-pool": (0, 5)}, MONDAY_0900_BERLIN) == [
        warm.WarmChange("gpu-pool", 0, 1, berlin)
    ]
    assert warm.plan([berlin], {"gpu-pool": (1, 5)}, MONDAY_0900_BERLIN) == []  # already there: no call
    evening = datetime(2026, 12, 7, 17, 0, tzinfo=UTC)
    assert warm.plan([berlin], {"gpu-pool": (1, 5)}, evening) == [warm.WarmChange("gpu-pool", 1, 0, None)]


def test_the_largest_active_schedule_wins_and_the_max_caps_it() -> None:
    small, big = schedule(BERLIN), schedule("gpu-pool min 4 mon 08:00-10:00 Europe/Berlin")
    assert warm.plan([small, big], {"gpu-pool": (0, 5)}, MONDAY_0900_BERLIN) == [
        warm.WarmChange("gpu-pool", 0, 4, big)
    ]
    assert warm.plan([small, big], {"gpu-pool": (0, 2)}, MONDAY_0900_BERLIN) == [
        warm.WarmChange("gpu-pool", 0, 2, big, capped_from=4)
    ]
    capped_already = warm.plan([big], {"gpu-pool": (2, 2)}, MONDAY_0900_BERLIN)
    assert capped_already == [warm.WarmChange("gpu-pool", 2, 2, big, capped_from=4)]


def test_a_pool_whose_schedule_was_removed_falls_back_to_zero() -> None:
    other = schedule("other min 1 daily 00:00-23:59 UTC")
    changes = warm.plan([other], {"other": (1, 3), "gpu-pool": (2, 5)}, MONDAY_0900_BERLIN)
    assert changes == [warm.WarmChange("gpu-pool", 2, 0, None)]


def test_next_change_is_the_next_edge_in_the_schedules_zone() -> None:
    berlin = schedule(BERLIN)
    friday_evening = datetime(2026, 12, 11, 18, 0, tzinfo=UTC)  # 19:00 Berlin, after the last weekday
    assert warm.next_change(berlin, friday_evening) == datetime(2026, 12, 14, 8, 0, tzinfo=UTC)
    assert warm.next_change(berlin, MONDAY_0900_BERLIN) == datetime(2026, 12, 7, 17, 0, tzinfo=UTC)


def fires(schedule_text: str, after: datetime, count: int) -> list[datetime]:
    """The cron edges APScheduler would fire, from a fake now: no scheduler, no waiting."""
    triggers = [CronTrigger(**fields) for fields in warm.cron_fields(schedule(schedule_text))]
    found = []
    for trigger in triggers:
        moment: datetime | None = after
        for _ in range(count):
            moment = trigger.get_next_fire_time(None, moment + timedelta(seconds=1))
            assert moment is not None
            found.append(moment.astimezone(UTC))
    return sorted(found)


def test_the_cron_edges_fire_at_the_schedules_hours_across_a_dst_change() -> None:
    # Europe/Berlin leaves summer time on Sunday 2026-10-25: 09:00 there is 07:00 UTC before, 08:00 after.
    edges = fires(BERLIN, datetime(2026, 10, 22, 0, 0, tzinfo=UTC), 3)
    assert edges == [
        datetime(2026, 10, 22, 7, 0, tzinfo=UTC),
        datetime(2026, 10, 22, 16, 0, tzinfo=UTC),
        datetime(2026, 10, 23, 7, 0, tzinfo=UTC),
        datetime(2026, 10, 23, 16, 0, tzinfo=UTC),
        datetime(2026, 10, 26, 8, 0, tzinfo=UTC),  # Monday, after the weekend and the change
        datetime(2026, 10, 26, 17, 0, tzinfo=UTC),
    ]


@pytest.mark.parametrize(
    "text",
    [BERLIN, "p min 2 mon-thu 07:30-19:00 UTC", "p min 1 mon,wed,fri 10:00-11:00 Asia/Tokyo", "p min 1 "
     "weekends 00:00-23:59 America/New_York", "p min 1 tue,wed 10:00-11:00 UTC"],
)  # fmt: skip
def test_a_described_or_stored_schedule_reads_back_the_same(text: str) -> None:
    parsed = schedule(text)
    assert warm.parse(warm.describe(parsed)) == parsed
    assert warm.read_stored(warm.stored_text([parsed, parsed])) == ([parsed, parsed], [])


def test_a_hand_edited_line_that_is_no_schedule_is_skipped_and_named() -> None:
    found, bad = warm.read_stored(f"{BERLIN}\n\nmin one node please\n")
    assert found == [schedule(BERLIN)]
    assert bad == ["min one node please"]


def test_what_the_channel_is_told() -> None:
    berlin = schedule(BERLIN)
    on = warm.change_text(warm.WarmChange("gpu-pool", 0, 1, berlin), MONDAY_0900_BERLIN, 0.54)
    assert on == (
        ":fire: Warm capacity on: gpu-pool keeps 1 node up until Mon 18:00 Europe/Berlin "
        "(`gpu-pool min 1 weekdays 09:00-18:00 Europe/Berlin`); ≈ $0.54/h while warm, used or not."
    )
    off = warm.change_text(warm.WarmChange("gpu-pool", 1, 0, None), MONDAY_0900_BERLIN, 0.54)
    assert off == (
        ":snowflake: Warm capacity off: gpu-pool min 1→0, so it drains to zero once its nodes are idle."
    )
    capped = warm.change_text(warm.WarmChange("gpu-pool", 2, 2, berlin, 4), MONDAY_0900_BERLIN, None)
    assert capped.startswith(":warning: `gpu-pool min 1 weekdays 09:00-18:00 Europe/Berlin` asks for 4 nodes")
    assert capped.endswith("Fix: `gpubot pool set gpu-pool --max 4`")


def test_a_schedule_line_says_whether_it_is_on_and_what_it_costs_a_week() -> None:
    berlin = schedule(BERLIN)
    assert warm.schedule_line(1, berlin, MONDAY_0900_BERLIN, 0.54, configured=True) == (
        "1. `gpu-pool min 1 weekdays 09:00-18:00 Europe/Berlin` · on now, until Mon 18:00 Europe/Berlin"
        " · ≈ $24.30/week · from config"
    )  # 1 node x 5 days x 9 h x $0.54
    saturday = datetime(2026, 12, 12, 12, 0, tzinfo=UTC)
    assert warm.schedule_line(2, berlin, saturday, None, configured=False) == (
        "2. `gpu-pool min 1 weekdays 09:00-18:00 Europe/Berlin` · off, next on Mon 09:00 Europe/Berlin"
    )
