"""The status message's clocks (the current step's timer, the lease's countdown) are no reason to edit it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from bot.core import lifecycle, notices, workloads
from bot.services import status

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
PENDING = lifecycle.PodSeen(T0, "Pending")
UNSCHEDULABLE = lifecycle.EventSeen(
    T0, "FailedScheduling", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
)
SCHEDULED = lifecycle.EventSeen(
    T0 + timedelta(minutes=3), "Scheduled", "Successfully assigned default/gpu-alice-1 to n1"
)


def leased_thread() -> status.Thread:
    workload = workloads.Workload(
        name="gpu-alice-1",
        namespace="default",
        uid="u-1",
        owner_id="U_ALICE",
        requester_name="alice",
        profile="t4",
        channel="C_GPU",
        thread_ts="1.2",
        lease_end=T0 + timedelta(hours=4),
        requested_at=T0,
        gpus=1,
        phase="Pending",
        node="",
        command="/gpu run ubuntu",
        deletion_requested=False,
    )
    thread = status.Thread(workload=workload, progress=lifecycle.Progress(created=T0))
    for seen in (PENDING, UNSCHEDULABLE):
        progress, _ = lifecycle.advance(thread.progress, seen)
        thread = replace(thread, progress=progress)
    return thread


def shown(thread: status.Thread, at: datetime) -> notices.ThreadStatus:
    return status.thread_status(thread, now=at)


def test_a_minute_later_only_the_clocks_differ() -> None:
    thread = leased_thread()
    early, later = shown(thread, T0 + timedelta(seconds=5)), shown(thread, T0 + timedelta(seconds=65))
    assert early != later
    current = [s for s in later.steps if s.state is notices.StepState.CURRENT]
    assert current and current[0].elapsed == "1m05s"
    assert later.lease_end == datetime(2026, 3, 2, 13, 0, tzinfo=UTC) == early.lease_end
    assert early.without_clocks() == later.without_clocks()


def test_a_new_step_is_news_however_the_clocks_stand() -> None:
    thread = leased_thread()
    before = shown(thread, T0 + timedelta(seconds=5))
    progress, _ = lifecycle.advance(thread.progress, SCHEDULED)
    after = shown(replace(thread, progress=progress), T0 + timedelta(seconds=5))
    assert before.without_clocks() != after.without_clocks()


def test_a_longer_lease_is_news() -> None:
    thread = leased_thread()
    extended = replace(thread, workload=replace(thread.workload, lease_end=T0 + timedelta(hours=6)))
    at = T0 + timedelta(seconds=5)
    assert shown(thread, at).without_clocks() != shown(extended, at).without_clocks()
