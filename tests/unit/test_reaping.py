"""The reaper's decisions as a table: what is due for a workload at a moment, and lease extensions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core import models, reaping, starts

Act = reaping.Act
END = datetime(2026, 3, 1, 14, 0, tzinfo=UTC)
POLICY = reaping.ReaperPolicy()
MIN = timedelta(minutes=1)


def running(*, idle: bool = False, **marks: datetime) -> reaping.Candidate:
    return reaping.Candidate(
        lease_end=END, finished_at=None, terminating=False, marks=reaping.Marks(**marks), idle=idle
    )


@pytest.mark.parametrize(
    ("candidate", "now", "due"),
    [
        (running(), END - 16 * MIN, None),
        (running(), END - 15 * MIN, Act.REMIND),
        (running(reminded_for=END), END - 10 * MIN, None),
        (running(reminded_for=END), END - 3 * MIN, Act.NUDGE),
        (running(), END - 2 * MIN, Act.REMIND),  # a late first reminder comes before any nudge
        (running(reminded_for=END, nudged_for=END), END + 4 * MIN, None),  # within the grace period
        (running(reminded_for=END, nudged_for=END), END + 5 * MIN, Act.EXPIRE),
        (running(), END + 6 * MIN, Act.EXPIRE),  # a missed reminder never saves a lapsed lease
        # an extension moved the end: old marks are for the old end, so the reminder re-arms
        (running(reminded_for=END - 60 * MIN, nudged_for=END - 60 * MIN), END - 14 * MIN, Act.REMIND),
    ],
)
def test_lease_reminders_then_expiry(candidate: reaping.Candidate, now: datetime, due: Act | None) -> None:
    assert reaping.decide(candidate, now, POLICY) is due


@pytest.mark.parametrize(
    ("candidate", "now", "due"),
    [
        (running(idle=True), END - 3 * 60 * MIN, Act.IDLE_WARN),
        (running(idle=True, idle_warned_at=END - 3 * 60 * MIN), END - 170 * MIN, None),
        (running(idle=True, idle_warned_at=END - 3 * 60 * MIN), END - 165 * MIN, Act.IDLE_RELEASE),
        (running(idle=False, idle_warned_at=END - 3 * 60 * MIN), END - 170 * MIN, Act.IDLE_CLEAR),
        (running(idle=False), END - 3 * 60 * MIN, None),  # busy, or the metric missing: never reaped
        # the owner kept it: quiet until the keep runs out, then a fresh warning, not a release
        (
            running(idle=True, idle_warned_at=END - 4 * 60 * MIN, kept_until=END - 2 * 60 * MIN),
            END - 150 * MIN,
            None,
        ),
        (
            running(idle=True, idle_warned_at=END - 4 * 60 * MIN, kept_until=END - 2 * 60 * MIN),
            END - 100 * MIN,
            Act.IDLE_WARN,
        ),
    ],
)
def test_idleness_warns_early_and_releases_after_the_grace(
    candidate: reaping.Candidate, now: datetime, due: Act | None
) -> None:
    assert reaping.decide(candidate, now, POLICY) is due


def test_finished_pods_are_cleaned_after_retention_and_terminating_ones_are_left() -> None:
    done = reaping.Candidate(lease_end=END, finished_at=END - 90 * MIN, terminating=False)
    assert reaping.decide(done, END - 31 * MIN, POLICY) is None
    assert reaping.decide(done, END - 30 * MIN, POLICY) is Act.CLEAN_FINISHED
    going = reaping.Candidate(lease_end=END, finished_at=None, terminating=True)
    assert reaping.decide(going, END + 60 * MIN, POLICY) is None


def test_an_extension_starts_from_the_later_of_now_and_the_end() -> None:
    start = END - 4 * 60 * MIN
    later = reaping.extend(END, start, 2, END - 10 * MIN, POLICY, default_hours=4)
    assert later == reaping.Extension(END + 120 * MIN, 2)
    lapsed = reaping.extend(END, start, None, END + 3 * MIN, POLICY, default_hours=4)
    assert lapsed == reaping.Extension(END + 3 * MIN + 240 * MIN, 4)


def test_an_extension_over_the_cap_is_refused_with_what_fits() -> None:
    start = END - 20 * 60 * MIN  # 20h used of the 24h cap
    refused = reaping.extend(END, start, 6, END - 10 * MIN, POLICY, default_hours=4)
    assert isinstance(refused, models.UsageError)
    assert "cap on a lease's total length" in refused.problem and "at most 4h more" in refused.problem
    assert refused.suggestion == "/gpu extend NAME 4"
    full = reaping.extend(start + 24 * 60 * MIN, start, 1, END, POLICY, default_hours=4)
    assert isinstance(full, models.UsageError) and "cannot be extended" in full.problem
    bad = reaping.extend(END, start, 0, END, POLICY, default_hours=4)
    assert isinstance(bad, models.UsageError) and "positive" in bad.problem


def stuck(reason: str, since: datetime, **marks: datetime) -> reaping.Candidate:
    start = starts.Start(reason, "", since)
    return reaping.Candidate(
        lease_end=END, finished_at=None, terminating=False, marks=reaping.Marks(**marks), start=start
    )


@pytest.mark.parametrize(
    ("candidate", "now", "due"),
    [
        (stuck("ImagePullBackOff", END - 60 * MIN), END - 51 * MIN, None),
        (stuck("ImagePullBackOff", END - 60 * MIN), END - 50 * MIN, Act.BROKEN_START),
        (stuck("InvalidImageName", END - 60 * MIN), END - 60 * MIN, Act.BROKEN_START),
        (stuck("ContainerCreating", END - 60 * MIN), END - 30 * MIN, None),  # slow, not broken
        # past its lease too: why it never started is the news, not that nobody extended it
        (stuck("ImagePullBackOff", END - 60 * MIN), END + 6 * MIN, Act.BROKEN_START),
        # another round or replica is on it: wait, as for every act
        (stuck("ImagePullBackOff", END - 60 * MIN, telling_since=END - 31 * MIN), END - 30 * MIN, None),
    ],
)
def test_a_start_broken_for_the_limit_is_released(
    candidate: reaping.Candidate, now: datetime, due: Act | None
) -> None:
    assert reaping.decide(candidate, now, POLICY) is due
    assert POLICY.broken_start == timedelta(minutes=10)
