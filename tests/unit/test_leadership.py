"""Who may take the leader Lease: client-go's rules as a table, with time passed in as a value."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core import leadership
from bot.core.leadership import Claim, LeaseRecord

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def held_by(holder: str, *, renewed: float = 0, duration: int = 15, transitions: int = 0) -> LeaseRecord:
    return LeaseRecord(
        holder, duration, acquired_at=at(-100), renewed_at=at(renewed), transitions=transitions
    )


@pytest.mark.parametrize(
    ("record", "now", "expected"),
    [
        (None, 0, Claim.CREATE),
        (held_by("me"), 5, Claim.RENEW),
        (held_by("me"), 60, Claim.RENEW),  # our own lease, even expired, is ours to renew
        (held_by("other"), 0, Claim.WAIT),
        (held_by("other"), 14.999, Claim.WAIT),
        (held_by("other"), 15, Claim.TAKE),  # renewTime + leaseDurationSeconds reached
        (held_by("other"), 3600, Claim.TAKE),
        (held_by("other", duration=1), 0.5, Claim.WAIT),
        (held_by(""), 0, Claim.TAKE),  # released: no need to wait out the lease
        (LeaseRecord("other", 15), 0, Claim.TAKE),  # never renewed
        (held_by("other", renewed=30), 20, Claim.WAIT),  # renewed "in the future" by a clock ahead of ours
    ],
)
def test_decide_claim(record: LeaseRecord | None, now: float, expected: Claim) -> None:
    assert leadership.decide_claim(record, identity="me", now=at(now)) is expected


def test_a_new_lease_starts_the_first_term() -> None:
    assert leadership.claim(None, identity="me", now=at(0), duration_seconds=15) == LeaseRecord(
        "me", 15, acquired_at=at(0), renewed_at=at(0), transitions=0
    )


def test_renewal_keeps_the_term_and_moves_renew_time() -> None:
    renewed = leadership.claim(held_by("me", transitions=3), identity="me", now=at(2), duration_seconds=15)
    assert renewed == LeaseRecord("me", 15, acquired_at=at(-100), renewed_at=at(2), transitions=3)


@pytest.mark.parametrize("previous", ["other", ""])
def test_a_takeover_counts_one_more_transition(previous: str) -> None:
    taken = leadership.claim(held_by(previous, transitions=3), identity="me", now=at(20), duration_seconds=15)
    assert taken == LeaseRecord("me", 15, acquired_at=at(20), renewed_at=at(20), transitions=4)


def test_release_frees_the_lease_at_once_and_keeps_the_count() -> None:
    freed = leadership.release(held_by("me", transitions=2), now=at(7))
    assert freed == LeaseRecord("", 1, acquired_at=at(7), renewed_at=at(7), transitions=2)
    assert leadership.decide_claim(freed, identity="other", now=at(7)) is Claim.TAKE


@pytest.mark.parametrize(("since_renewal", "keeps"), [(0, True), (9.9, True), (10, False), (30, False)])
def test_a_leader_gives_up_at_the_renew_deadline(since_renewal: float, keeps: bool) -> None:
    assert (
        leadership.may_keep_leading(
            last_renewed=at(0), now=at(since_renewal), renew_deadline=timedelta(seconds=10)
        )
        is keeps
    )


def test_expiry_time() -> None:
    assert leadership.expires_at(held_by("x", renewed=5, duration=15)) == at(20)
    assert leadership.expires_at(LeaseRecord("x", 15)) is None


@pytest.mark.parametrize(
    ("durations", "complaint"),
    [
        ((15, 10, 2), ""),
        ((15, 10, 0), "retry period must be more than 0 s"),
        ((15, 2, 2), "renew deadline (2 s) must be more than 1.2 x the retry period (2 s)"),
        ((10, 10, 2), "lease duration (10 s) must be more than the renew deadline (10 s)"),
    ],
)
def test_timing_problems(durations: tuple[float, float, float], complaint: str) -> None:
    lease, deadline, retry = durations
    problems = leadership.timing_problems(lease_duration=lease, renew_deadline=deadline, retry_period=retry)
    assert (complaint in " ".join(problems)) if complaint else problems == []
    assert bool(problems) is bool(complaint)
