"""Core: who may hold the leader Lease, decided from the lease as read, this replica's identity and a time.

The rules are client-go's leaderelection (`tryAcquireOrRenew`, `ReleaseOnCancel`): create the lease if
there is none, renew our own, take over one that is free or expired, otherwise wait. One difference: a
lease expires at its own `renewTime + leaseDurationSeconds`, not a lease duration after this replica last
saw it change, so a replica that has just started can take over a dead leader's lease at once instead of
watching it for a full duration first. That trusts the replicas' clocks to agree to well under the
renew deadline, which NTP-synced nodes do.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

JITTER_FACTOR = 1.2
"""client-go's JitterFactor: a candidate waits between 1 and 2.2 retry periods, so candidates spread out."""


@dataclass(frozen=True)
class LeaseRecord:
    """The election's part of a coordination.k8s.io/v1 Lease spec."""

    holder: str = ""
    """`holderIdentity`; empty when the lease is free (released by its last holder)."""
    duration_seconds: int = 0
    """`leaseDurationSeconds`: how long after `renewed_at` other candidates must wait."""
    acquired_at: datetime | None = None
    renewed_at: datetime | None = None
    transitions: int = 0
    """`leaseTransitions`: how many times the lease changed hands."""


class Claim(enum.Enum):
    """What a candidate does about the lease it just read."""

    CREATE = "create"
    """There is no lease yet: create it, held by us."""
    RENEW = "renew"
    """We hold it: extend it."""
    TAKE = "take"
    """It is free or expired: take it over."""
    WAIT = "wait"
    """Someone else holds it and it is still valid."""


def expires_at(record: LeaseRecord) -> datetime | None:
    """When other candidates may take the lease; None when it was never renewed (free at once)."""
    if record.renewed_at is None:
        return None
    return record.renewed_at + timedelta(seconds=record.duration_seconds)


def is_expired(record: LeaseRecord, now: datetime) -> bool:
    end = expires_at(record)
    return end is None or end <= now


def decide_claim(record: LeaseRecord | None, *, identity: str, now: datetime) -> Claim:
    """The one time-based decision of leader election, for the lease as read at `now`."""
    if record is None:
        return Claim.CREATE
    if record.holder == identity:
        return Claim.RENEW
    if not record.holder or is_expired(record, now):
        return Claim.TAKE
    return Claim.WAIT


def claim(record: LeaseRecord | None, *, identity: str, now: datetime, duration_seconds: int) -> LeaseRecord:
    """The record to write for CREATE, RENEW or TAKE: a renewal keeps `acquired_at` and the transition
    count; anything else is a new term, so it counts one more transition (none for a new lease)."""
    if record is None:
        return LeaseRecord(identity, duration_seconds, acquired_at=now, renewed_at=now, transitions=0)
    if record.holder == identity:
        return LeaseRecord(
            identity,
            duration_seconds,
            acquired_at=record.acquired_at or now,
            renewed_at=now,
            transitions=record.transitions,
        )
    return LeaseRecord(
        identity, duration_seconds, acquired_at=now, renewed_at=now, transitions=record.transitions + 1
    )


def release(record: LeaseRecord, *, now: datetime) -> LeaseRecord:
    """What a leader that stops cleanly writes: no holder and a 1 s duration (client-go's
    `ReleaseOnCancel`), so a successor takes over on its next try instead of waiting out the lease."""
    return LeaseRecord("", 1, acquired_at=now, renewed_at=now, transitions=record.transitions)


def may_keep_leading(*, last_renewed: datetime, now: datetime, renew_deadline: timedelta) -> bool:
    """A leader whose renewals keep failing steps down once the renew deadline has passed since the last
    one that succeeded; the deadline is shorter than the lease, so it stops before anyone may take over."""
    return now - last_renewed < renew_deadline


def timing_problems(*, lease_duration: float, renew_deadline: float, retry_period: float) -> list[str]:
    """client-go's `NewLeaderElector` checks, in words: empty when the three durations work together."""
    problems = []
    if retry_period <= 0:
        problems.append(f"retry period must be more than 0 s, not {retry_period:g}")
    if renew_deadline <= JITTER_FACTOR * retry_period:
        problems.append(
            f"renew deadline ({renew_deadline:g} s) must be more than {JITTER_FACTOR:g} x the retry period "
            f"({retry_period:g} s), so a leader gets more than one try before it gives up"
        )
    if lease_duration <= renew_deadline:
        problems.append(
            f"lease duration ({lease_duration:g} s) must be more than the renew deadline "
            f"({renew_deadline:g} s), so a failing leader steps down before another may take over"
        )
    return problems
