"""The line for GPUs at a full pool: the scheduler's order, and when GPUs are likely back."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from bot.core import notices, queue, reaping, workloads
from bot.services import asks

T0 = datetime(2026, 3, 1, 14, 0, tzinfo=UTC)
POLICY = reaping.ReaperPolicy(grace=timedelta(minutes=5), idle_grace=timedelta(minutes=15))


def minutes(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


def test_the_line_is_the_schedulers_order_priority_then_age() -> None:
    waiters = [
        queue.Waiter("late", 1, minutes(2)),
        queue.Waiter("early", 1, minutes(1)),
        queue.Waiter("urgent", 1, minutes(3), priority=100),
    ]
    found = queue.places(waiters, [])
    assert {key: place.position for key, place in found.items()} == {"urgent": 1, "early": 2, "late": 3}


def test_each_place_waits_for_as_many_gpus_as_all_up_to_it_need() -> None:
    holders = [
        queue.Holder(1, likely=minutes(40), latest=minutes(40)),
        queue.Holder(2, likely=minutes(10), latest=minutes(90)),
    ]
    found = queue.places([queue.Waiter("a", 2, minutes(0)), queue.Waiter("b", 1, minutes(1))], holders)
    assert found["a"] == queue.Place(1, soonest=minutes(10), latest=minutes(90))  # the idle pair
    assert found["b"] == queue.Place(2, soonest=minutes(40), latest=minutes(90))


def test_more_waiting_than_known_holders_have_no_eta() -> None:
    found = queue.places([queue.Waiter("a", 1, T0), queue.Waiter("b", 1, T0)], [queue.Holder(1, T0, T0)])
    assert found["b"] == queue.Place(2) and queue.wait_text(found["b"], T0).startswith("#2 in line, behind")


WORKLOAD = workloads.Workload(
    name="w",
    namespace="default",
    uid="u",
    owner_id="U_ALICE",
    requester_name="alice",
    profile="t4",
    channel="C",
    thread_ts="1.2",
    lease_end=minutes(60),
    requested_at=T0,
    gpus=1,
    phase="Running",
    node="n",
    command="/gpu run img",
    deletion_requested=False,
)


@pytest.mark.parametrize(
    ("marks", "likely"),
    [
        (reaping.Marks(), minutes(65)),  # busy: back when the lease and its grace are over
        (reaping.Marks(idle_warned_at=minutes(10)), minutes(25)),  # idle: released a grace after the warning
        (reaping.Marks(idle_warned_at=minutes(10), kept_until=minutes(50)), minutes(50)),  # kept a while
        (
            reaping.Marks(idle_warned_at=minutes(10), kept_until=minutes(120)),
            minutes(65),
        ),  # kept past its end
    ],
)
def test_a_holder_is_back_by_its_idle_release_or_its_lease_end(
    marks: reaping.Marks, likely: datetime
) -> None:
    found = queue.holder(dataclasses.replace(WORKLOAD, marks=marks), POLICY, T0)
    assert found == queue.Holder(1, likely=likely, latest=minutes(65))


def test_a_holder_without_a_lease_frees_nothing_gpubot_can_tell() -> None:
    assert queue.holder(dataclasses.replace(WORKLOAD, lease_end=None), POLICY, T0) is None


def test_a_holder_being_released_is_back_now() -> None:
    stopping = dataclasses.replace(WORKLOAD, deletion_requested=True)
    assert queue.holder(stopping, POLICY, minutes(7)) == queue.Holder(1, minutes(7), minutes(7))


@pytest.mark.parametrize(
    ("soonest", "latest", "said"),
    [
        (minutes(18), minutes(33), "#2 in line, about 20 to 35 min"),
        (minutes(33), minutes(33), "#2 in line, about 35 min"),
        (minutes(0.5), minutes(1), "#2 in line, about 5 min"),
        (minutes(50), minutes(245), "#2 in line, about 50 min to 4h05m"),
        (minutes(241), minutes(481), "#2 in line, about 4h05m to 8h05m"),
    ],
)
def test_the_wait_is_told_in_five_minute_steps_then_hours(
    soonest: datetime, latest: datetime, said: str
) -> None:
    assert queue.wait_text(queue.Place(2, soonest, latest), T0) == said


def test_only_holders_the_reaper_warned_as_idle_and_nobody_kept_are_asked() -> None:
    warned = reaping.Marks(idle_warned_at=minutes(-10))
    found = [
        dataclasses.replace(WORKLOAD, name="idle", marks=warned),
        dataclasses.replace(WORKLOAD, name="busy"),
        dataclasses.replace(WORKLOAD, name="kept", marks=dataclasses.replace(warned, kept_until=minutes(30))),
        dataclasses.replace(
            WORKLOAD, name="kept-before", marks=dataclasses.replace(warned, kept_until=minutes(-1))
        ),
        dataclasses.replace(WORKLOAD, name="other-type", profile="a100", marks=warned),
        dataclasses.replace(WORKLOAD, name="stopping", marks=warned, deletion_requested=True),
        dataclasses.replace(WORKLOAD, name="pending", phase="Pending", marks=warned),
    ]
    assert [w.name for w in queue.idle_to_ask(found, "t4", T0)] == ["idle", "kept-before"]


def test_the_ask_says_who_waits_what_is_idle_and_what_each_button_does() -> None:
    holder = dataclasses.replace(WORKLOAD, marks=reaping.Marks(idle_warned_at=minutes(-10)))
    text = notices.moments(queue.ask_text("bob", holder))
    assert text == (
        ":wave: bob is waiting for a t4 GPU, and your `w` holds one, idle by the reaper's count since "
        "Sun 13:50 UTC. If you are done with it, Release gives it to them; Keep 30 min tells the reaper you "
        "need it a little longer."
    )


@pytest.mark.parametrize(
    ("asked", "idle", "start"),
    [
        (1, 1, "Asked the owner of idle t4 GPUs to release one."),
        (2, 3, "Asked the 2 owners of idle t4 GPUs to release one."),
        (0, 2, "The owners of the idle t4 GPUs were asked for this run already"),
        (0, 0, "No t4 GPU has been idle long enough to ask its owner"),
    ],
)
def test_the_asker_hears_how_many_were_asked_or_why_none(asked: int, idle: int, start: str) -> None:
    assert asks.said(asked, idle, "t4").startswith(start)
