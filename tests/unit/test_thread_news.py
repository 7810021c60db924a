"""What is worth an edit of a thread's status message (each edit is a Slack call): a new stage, a new lease
end; not a step within a stage, which rides along with the next edit, nor the scheduler's word while the
autoscaler's verdict is due."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from bot.core import lifecycle, notices, status, workloads

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


NODE = "gke-demo-gpu-pool-1a2b3c4d-x1y2"
TRIGGERED = lifecycle.EventSeen(
    T0 + timedelta(seconds=8),
    "TriggeredScaleUp",
    "pod triggered scale-up: [{https://www.googleapis.com/compute/v1/projects/p/zones/z/instanceGroups/"
    "gke-demo-gpu-pool-1a2b3c4d-grp 0->1 (max: 5)}]",
)


def advanced(thread: status.Thread, *seen: lifecycle.Observation) -> status.Thread:
    for observation in seen:
        progress, _ = lifecycle.advance(thread.progress, observation)
        thread = replace(thread, progress=progress)
    return thread


def node(at: timedelta, *, ready: bool, gpus: int = 0) -> lifecycle.NodeSeen:
    return lifecycle.NodeSeen(NODE, ready=ready, gpus=gpus, pool="gpu-pool", at=T0 + at)


def test_a_new_stage_is_news() -> None:
    thread = leased_thread()
    before = status.thread_status(thread)
    after = status.thread_status(advanced(thread, SCHEDULED))
    assert before.news() != after.news()
    assert after.headline == "Starting on n1"


def test_steps_within_a_stage_ride_along_with_the_next_edit() -> None:
    coming = advanced(leased_thread(), TRIGGERED, node(timedelta(seconds=40), ready=False))
    ready = advanced(coming, node(timedelta(minutes=2), ready=True, gpus=1))
    assert status.thread_status(coming).headline == f"Waiting for node {NODE} to come up with its GPU"
    assert status.thread_status(coming).news() == status.thread_status(ready).news()
    assert "node Ready +2m00s" not in status.thread_status(coming).timeline
    assert "node Ready +2m00s" in status.thread_status(ready).timeline


def test_the_timeline_says_what_happened_to_this_pod_after_its_request() -> None:
    thread = advanced(leased_thread(), TRIGGERED, node(timedelta(minutes=2), ready=True, gpus=1), SCHEDULED)
    assert status.thread_status(thread).timeline == (
        f"requested {notices.clock_time(T0)}",
        "scale-up 0→1 +8s",
        "node Ready +2m00s",
        "scheduled +3m00s",
    )


def test_a_longer_lease_is_news() -> None:
    thread = leased_thread()
    extended = replace(thread, workload=replace(thread.workload, lease_end=T0 + timedelta(hours=6)))
    assert status.thread_status(thread).news() != status.thread_status(extended).news()


def test_the_schedulers_word_waits_for_the_autoscalers_verdict_a_while() -> None:
    thread = leased_thread()
    assert status.awaiting_verdict(thread, T0 + timedelta(seconds=5))
    assert not status.awaiting_verdict(thread, T0 + status.VERDICT_WAIT)
    assert not status.awaiting_verdict(advanced(thread, TRIGGERED), T0 + timedelta(seconds=9))


def test_a_pod_nobody_has_spoken_of_yet_waits_for_the_verdict_too() -> None:
    """Just created: the root already says what was asked for; "waiting for the scheduler" is no news."""
    fresh = replace(leased_thread(), progress=lifecycle.Progress(created=T0))
    assert status.awaiting_verdict(fresh, T0 + timedelta(seconds=1))
    assert not status.awaiting_verdict(fresh, T0 + status.VERDICT_WAIT)
