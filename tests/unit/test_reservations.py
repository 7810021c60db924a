"""The quota's reservations as pure rules: which runs in flight count against a new one, which runs a
release names, how a reservation is kept and read back; and when a lease is past changing."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from bot.core import models, podspec, quota, workloads
from bot.services import leases
from tests.unit.test_workloads import built_pod

NOW = datetime(2026, 3, 1, 14, 0, tzinfo=UTC)
MINE = quota.Reservation("T-mine", "U_ALICE", 1, NOW, ticket=5)


def ahead(request_id: str, **changes: object) -> quota.Reservation:
    """Another of alice's runs, one GPU, reserved just before hers."""
    return replace(quota.Reservation(request_id, "U_ALICE", 1, NOW, ticket=4), **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("others", "pods", "counted"),
    [
        ([], set(), 0),
        ([ahead("T1")], set(), 1),  # ahead of hers, no pod yet: counted
        ([ahead("T1", gpus=2), ahead("T2", ticket=1)], set(), 3),
        ([ahead("T1", ticket=6)], set(), 0),  # behind hers: it counts hers instead
        ([ahead("T1", owner_id="U_BOB")], set(), 0),  # quota is per user
        ([ahead("T1", pod="train")], {"train"}, 0),  # its pod is listed: counted there, not twice
        ([ahead("T1", pod="train")], {"other"}, 1),
        ([ahead("T1", at=NOW - quota.RESERVATION_TTL - timedelta(seconds=1))], set(), 0),  # a dead replica's
        ([ahead("T1", at=NOW - quota.RESERVATION_TTL)], set(), 1),
        ([replace(MINE, ticket=3)], set(), 0),  # her own reservation, taken again (a resumed run)
    ],
)
def test_runs_ahead_in_flight_count_against_a_new_run(
    others: list[quota.Reservation], pods: set[str], counted: int
) -> None:
    assert quota.in_flight_gpus([*others, MINE], mine=MINE, pods=pods, now=NOW) == counted


def test_of_twenty_at_once_only_the_first_two_fit_a_quota_of_two() -> None:
    """Every run sees the same twenty reservations (the worst case): tickets 1 and 2 go ahead."""
    runs = [quota.Reservation(f"T{n}", "U_ALICE", 1, NOW, ticket=n) for n in range(1, 21)]
    policy = models.QuotaPolicy(max_gpus_per_user=2)
    request = models.RunRequest(image="img", text="run img")
    fits = [
        run.ticket
        for run in runs
        if quota.check_quota(
            request, 0, policy, starting=quota.in_flight_gpus(runs, mine=run, pods=set(), now=NOW)
        )
        is None
    ]
    assert fits == [1, 2]


def test_a_refusal_counts_the_runs_still_starting_apart() -> None:
    refused = quota.check_quota(
        models.RunRequest(image="img", text="run img"), 1, models.QuotaPolicy(max_gpus_per_user=2), starting=1
    )
    assert refused is not None and refused.problem == (
        "Your GPU quota is 2; you already hold 1, and 1 more are being started for you, "
        "so 1 more would exceed it. Release one first."
    )


@pytest.mark.parametrize(
    ("name", "owner", "found"),
    [
        ("train", "U_BOB", ["T1"]),  # by name: anyone's (whether they may is the release's question)
        ("nothing", "U_ALICE", []),
        ("", "U_ALICE", ["T2", "T1"]),  # no name: the asker's own, in the order they reserved
        ("", "U_BOB", ["T3"]),
    ],
)
def test_a_release_names_runs_still_starting(name: str, owner: str, found: list[str]) -> None:
    held = [
        ahead("T1", pod="train", ticket=7),
        ahead("T2", ticket=2),
        ahead("T3", owner_id="U_BOB"),
        ahead("T4", at=NOW - timedelta(hours=1), pod="train"),  # stale: nobody's run any more
    ]
    named = quota.starting_named(held, name=name, owner=owner, now=NOW)
    assert [r.request_id for r in named] == found


def test_a_reservation_reads_back_as_kept() -> None:
    kept = quota.Reservation("T1", "U_ALICE", 2, NOW, pod="train")
    assert quota.read_reservation("T1", 9, kept.to_json()) == replace(kept, ticket=9)


@pytest.mark.parametrize("raw", ["", "{}", "[1]", '{"owner": "U", "gpus": "x", "at": "now", "pod": ""}'])
def test_an_unreadable_reservation_reads_as_none(raw: str) -> None:
    assert quota.read_reservation("T1", 1, raw) is None


def audited(*actions: str) -> str:
    entries = [models.AuditEntry(action, "U_ALICE", NOW) for action in actions]
    audit = ""
    for entry in entries:
        audit = podspec.append_audit(audit, entry)
    return audit


@pytest.mark.parametrize(
    ("audit", "terminating", "said"),
    [
        (audited("run"), False, None),
        (audited("run", "extend"), False, None),
        (audited("run", "reap"), False, "Too late to extend `w`: the reaper is deleting it"),
        (audited("run", "release"), False, "Too late to extend `w`: it is being released"),
        (audited("run", "reap", "extend"), False, None),  # an extension on top: the delete is not on record
        (audited("run"), True, "Too late to extend `w`: it is being released"),
    ],
)
def test_a_lease_is_past_changing_once_its_delete_is_on_record(
    audit: str, terminating: bool, said: str | None
) -> None:
    workload = workloads.from_pod(built_pod())
    assert workload is not None
    refused = leases.too_late(replace(workload, name="w", audit=audit, deletion_requested=terminating))
    if said is None:
        assert refused is None
    else:
        assert refused is not None and refused.message.startswith(said)
