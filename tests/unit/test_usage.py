"""Spend by period: ISO weeks and months in UTC, runs split by their hours on each day, totals by user and
by channel, and the store's compact per-day form read back."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime, timedelta

import pytest

from bot.core import usage

WEEK, MONTH = usage.Period.WEEK, usage.Period.MONTH


@pytest.mark.parametrize(
    ("now", "period", "start"),
    [
        (datetime(2026, 12, 6, 4, 0, tzinfo=UTC), WEEK, datetime(2026, 11, 30, tzinfo=UTC)),  # a Sunday
        (datetime(2026, 11, 30, 0, 0, tzinfo=UTC), WEEK, datetime(2026, 11, 30, tzinfo=UTC)),  # Monday 00:00
        (datetime(2026, 11, 29, 23, 59, tzinfo=UTC), WEEK, datetime(2026, 11, 23, tzinfo=UTC)),
        (datetime(2026, 12, 6, 4, 0, tzinfo=UTC), MONTH, datetime(2026, 12, 1, tzinfo=UTC)),
        (datetime(2027, 1, 1, 0, 0, tzinfo=UTC), WEEK, datetime(2026, 12, 28, tzinfo=UTC)),  # ISO week 53
        # Another zone's Monday 01:00 is still Sunday in UTC: periods are UTC's.
        (datetime.fromisoformat("2026-11-30T01:00:00+02:00"), WEEK, datetime(2026, 11, 23, tzinfo=UTC)),
    ],
)
def test_a_period_starts_on_monday_or_the_first_at_midnight_utc(
    now: datetime, period: usage.Period, start: datetime
) -> None:
    assert usage.period_start(period, now) == start


def test_a_run_over_midnight_is_split_by_its_hours_on_each_day() -> None:
    start = datetime(2026, 11, 29, 22, 0, tzinfo=UTC)  # Sunday 22:00, two hours before the week turns
    end = start + timedelta(hours=5)
    assert usage.day_shares(start, end) == [(date(2026, 11, 29), 7200.0), (date(2026, 11, 30), 10800.0)]
    kept = usage.finished_amounts("U_A", "C_GPU", start=start, end=end, gpu_hours=10.0, dollars=5.0)
    assert kept == {
        "spend:2026-11-29": {"U_A C_GPU gpu_hours": 4.0, "U_A C_GPU usd": 2.0},
        "spend:2026-11-30": {"U_A C_GPU gpu_hours": 6.0, "U_A C_GPU usd": 3.0},
    }
    assert usage.day_shares(end, start) == [] and usage.day_shares(start, start) == []


def test_a_run_across_a_months_start_counts_in_each_by_its_own_hours() -> None:
    start = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)
    end = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    kept = usage.finished_amounts("U_A", "C_GPU", start=start, end=end, gpu_hours=6.0, dollars=None)
    december = usage.period_start(MONTH, end)
    in_december = [
        spend
        for table, fields in kept.items()
        if table >= usage.day_table(december.date())
        for spend in usage.read_day(fields)
    ]
    assert in_december == [usage.Spend("U_A", "C_GPU", 2.0, 0.0, unpriced_hours=2.0)]


def test_a_running_run_counts_from_the_later_of_its_start_and_the_periods() -> None:
    monday = datetime(2026, 11, 30, tzinfo=UTC)
    held = usage.Held(
        "U_A", "C_GPU", gpus=2, node_gpus=4, since=monday - timedelta(hours=3), price_per_node_hour=4.0
    )
    now = monday + timedelta(hours=1)
    this_week = usage.running(held, since=monday, now=now)
    assert (this_week.gpu_hours, this_week.dollars) == (2.0, 2.0)  # half the node for one hour
    this_month = usage.running(held, since=datetime(2026, 11, 1, tzinfo=UTC), now=now)
    assert (this_month.gpu_hours, this_month.dollars) == (8.0, 8.0)
    unpriced = usage.running(dataclasses.replace(held, price_per_node_hour=None), since=monday, now=now)
    assert (unpriced.dollars, unpriced.unpriced_hours) == (0.0, 2.0)


def test_totals_by_user_and_by_channel_biggest_first() -> None:
    since = datetime(2026, 11, 30, tzinfo=UTC)
    summary = usage.summarize(
        WEEK,
        since,
        [
            usage.Spend("U_A", "C_GPU", 1.0, 0.5),
            usage.Spend("U_B", "C_ML", 4.0, 2.0),
            usage.Spend("U_A", "C_ML", 2.0, 1.0),
            usage.Spend("U_C", "C_GPU", 0.0, 0.0),
        ],
    )
    assert summary.by_user == (usage.Total("U_B", 4.0, 2.0), usage.Total("U_A", 3.0, 1.5))
    assert summary.by_channel == (usage.Total("C_ML", 6.0, 3.0), usage.Total("C_GPU", 1.0, 0.5))
    assert summary.of("U_C") == usage.Total("U_C", 0.0, 0.0)


def test_the_days_table_reads_back_and_ignores_fields_not_ours() -> None:
    fields = {
        "U_A C_GPU gpu_hours": 3.0,
        "U_A C_GPU usd": 1.5,
        "U_A C_GPU unpriced_hours": 1.0,
        "U_B - gpu_hours": 2.0,
        "U_B - unpriced_hours": 2.0,
        "something else": 9.0,
    }
    assert sorted(usage.read_day(fields), key=lambda s: s.user) == [
        usage.Spend("U_A", "C_GPU", 3.0, 1.5, 1.0),
        usage.Spend("U_B", "", 2.0, 0.0, 2.0),
    ]
    assert usage.field("U_B", "", usage.GPU_HOURS) == "U_B - gpu_hours"


@pytest.mark.parametrize(
    ("total", "text"),
    [
        (usage.Total("U_A", 0.0, 0.0), "nothing yet"),
        (usage.Total("U_A", 5.0, 12.4), "$12.40 · 5.0 GPU-hours"),
        (usage.Total("U_A", 5.0, 10.0, unpriced_hours=1.0), "$10.00 · 5.0 GPU-hours, 1.0 of them unpriced"),
        (usage.Total("U_A", 2.0, 0.0, unpriced_hours=2.0), "2.0 GPU-hours (no price set for their GPU type)"),
    ],
)
def test_an_amount_reads_as_money_and_gpu_hours(total: usage.Total, text: str) -> None:
    assert usage.amount_text(total) == text


def test_the_period_is_named_with_its_first_day() -> None:
    summary = usage.summarize(WEEK, datetime(2026, 11, 30, tzinfo=UTC), [])
    assert usage.since_text(summary) == "since Monday 30 Nov (UTC)"
    month = usage.summarize(MONTH, datetime(2026, 12, 1, tzinfo=UTC), [])
    assert usage.since_text(month) == "since 1 Dec (UTC)"
    assert usage.days(datetime(2026, 11, 30, tzinfo=UTC), datetime(2026, 12, 1, 5, tzinfo=UTC)) == [
        date(2026, 11, 30),
        date(2026, 12, 1),
    ]
