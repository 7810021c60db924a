"""Telling an owner what the reaper did: the thread first, else a DM saying why, else recorded; a Slack that
is down leaves it for later. The chat is an in-memory fake of the `Chat` port that refuses as told."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from bot.core import errors, notices, reminders
from bot.services import tellings

TARGET = tellings.Target("expire", "default/train-1", "U_ALICE", "C_GPU", "1.5")
NOTICE = notices.Reminder(":wastebasket: Deleted `train-1`", "default/train-1")
NOT_MEMBER = errors.Unreachable("Slack: not_in_channel", why="not-member")


@dataclass
class FakeChat:
    """Posts succeed unless `thread` or `dm` holds the error to raise."""

    thread: errors.GpubotError | None = None
    dm_error: errors.GpubotError | None = None
    posted: list[tuple[str, str | None, notices.Notice]] = field(default_factory=list)
    dms: list[tuple[str, notices.Notice]] = field(default_factory=list)

    def post(
        self,
        channel: str,
        notice: notices.Notice,
        *,
        thread_ts: str | None = None,
        timeout: float | None = None,
    ) -> str:
        if self.thread is not None:
            raise self.thread
        self.posted.append((channel, thread_ts, notice))
        return "2.5"

    def reply(self, channel: str, thread_ts: str, notice: notices.Notice) -> None:
        raise AssertionError("a telling is waited for, never queued")

    def update(self, channel: str, ts: str, notice: notices.Notice) -> None:
        raise AssertionError("a telling never edits")

    def ephemeral(self, channel: str, user: str, notice: notices.Notice) -> None:
        raise AssertionError("a telling is not an ephemeral")

    def dm(self, user: str, notice: notices.Notice) -> None:
        raise AssertionError("a telling's DM is waited for, never queued")

    def post_dm(self, user: str, notice: notices.Notice, *, timeout: float | None = None) -> str:
        if self.dm_error is not None:
            raise self.dm_error
        self.dms.append((user, notice))
        return "3.5"

    def upload(
        self, user: str, filename: str, content: str, *, comment: str, timeout: float | None = None
    ) -> str:
        raise AssertionError("a telling sends no file")


@dataclass
class Counted:
    undelivered: list[tuple[str, str, str]] = field(default_factory=list)

    def count_command(self, command: str, outcome: str) -> None: ...
    def observe_time_to_running(self, seconds: float) -> None: ...
    def count_scale_up(self, pool: str) -> None: ...
    def count_reaper_act(self, act: str, *, dry_run: bool) -> None: ...

    def count_undelivered(self, act: str, *, where: str, why: str) -> None:
        self.undelivered.append((act, where, why))


def deliver(
    chat: FakeChat, target: tellings.Target = TARGET, *, refused: str = ""
) -> tuple[tellings.Delivery, Counted]:
    counted = Counted()
    teller = tellings.Teller(chat, wait_seconds=1.0, telemetry=counted)
    return teller.deliver(NOTICE, target, thread_refused=refused), counted


def test_a_thread_that_takes_it_is_all_there_is() -> None:
    chat = FakeChat()
    delivery, counted = deliver(chat)
    assert delivery == tellings.Delivery(tellings.Outcome.THREAD)
    assert chat.posted == [("C_GPU", "1.5", NOTICE)] and chat.dms == [] and counted.undelivered == []


@pytest.mark.parametrize("why", ["not-member", "archived", "gone"])
def test_a_thread_out_of_reach_is_recorded_and_the_owner_told_by_dm_why(why: errors.Why) -> None:
    chat = FakeChat(thread=errors.Unreachable("Slack: …", why=why))
    delivery, counted = deliver(chat)
    assert delivery == tellings.Delivery(tellings.Outcome.DM, why)
    ((user, dm),) = chat.dms
    assert user == "U_ALICE" and isinstance(dm, notices.Reminder)
    assert (dm.text, dm.thread_channel, dm.thread_note) == (
        NOTICE.text,
        "C_GPU",
        reminders.thread_refused_note(why),
    )
    assert counted.undelivered == [("expire", "thread", why)]


def test_not_a_member_says_how_to_invite_the_bot() -> None:
    assert "`/invite @gpubot`" in reminders.thread_refused_note("not-member")


def test_a_thread_refused_before_goes_straight_to_the_dm() -> None:
    chat = FakeChat(thread=errors.Unavailable("would have waited"))
    delivery, counted = deliver(chat, refused="archived")
    assert delivery.outcome is tellings.Outcome.DM and len(chat.dms) == 1 and counted.undelivered == []


def test_neither_thread_nor_dm_is_recorded_twice_and_never_retried() -> None:
    chat = FakeChat(thread=NOT_MEMBER, dm_error=errors.NotFound("Slack: user_not_found"))
    delivery, counted = deliver(chat)
    assert delivery == tellings.Delivery(tellings.Outcome.LOST, "not-member")
    assert counted.undelivered == [("expire", "thread", "not-member"), ("expire", "dm", "refused")]


@pytest.mark.parametrize("down", [errors.Unavailable("503"), errors.RateLimited(retry_after=30)])
def test_a_slack_that_is_down_leaves_it_for_later_unrecorded(down: errors.GpubotError) -> None:
    chat = FakeChat(thread=down)
    assert deliver(chat)[0] == tellings.Delivery(tellings.Outcome.LATER)
    chat = FakeChat(thread=NOT_MEMBER, dm_error=down)
    delivery, counted = deliver(chat)
    assert delivery == tellings.Delivery(
        tellings.Outcome.LATER, "not-member"
    )  # the thread is not tried again
    assert counted.undelivered == [("expire", "thread", "not-member")]


def test_no_thread_goes_to_the_owner_without_a_note_and_no_owner_is_recorded() -> None:
    chat = FakeChat()
    delivery, counted = deliver(chat, tellings.Target("expire", "default/old", "U_ALICE", "", ""))
    assert delivery.outcome is tellings.Outcome.DM and chat.dms[0][1] == NOTICE and counted.undelivered == []
    chat = FakeChat(thread=NOT_MEMBER)
    delivery, counted = deliver(chat, tellings.Target("expire", "default/old", "", "C_GPU", "1.5"))
    assert delivery.outcome is tellings.Outcome.LOST
    assert counted.undelivered == [("expire", "thread", "not-member"), ("expire", "dm", "no-owner")]
