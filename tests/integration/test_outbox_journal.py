"""The outbox's journal: writes queued when a run stops are sent by the next run, once, against the real
emulator and a real Redis.

A run is stopped with Slack refusing its writes, so they are still queued, and with no time to drain
(`stop(timeout=0)`): what it leaves in Redis is what a SIGKILL leaves. The process-level kill is in
tests/restarts/test_outbox_killed.py. Counts come from the emulator's transcript.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from bot.adapters import outbox_journal, slack_outbox, store
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import FaultConfig
from sim.slack.runner import BackgroundSlack

CHANNEL = "C_GPU"
FAST = slack_outbox.OutboxSettings(
    channel_messages_per_second=50.0,
    channel_message_burst=50,
    backoff_initial_seconds=0.05,
    backoff_max_seconds=0.2,
)
SLACK_DOWN = FaultConfig(
    rate=1.0, statuses=(503,), methods=frozenset({"chat.postMessage", "chat.update", "chat.postEphemeral"})
)

pytestmark = pytest.mark.usefixtures("slack_env")


@pytest.fixture
def slack() -> Iterator[BackgroundSlack]:
    with BackgroundSlack(SlackConfig()) as running:
        yield running


@pytest.fixture
def kept(redis_url: str) -> Iterator[store.RedisStore]:
    opened = store.RedisStore(redis.Redis.from_url(redis_url), prefix="test:")
    yield opened
    opened.close()


class Runs:
    """Outboxes, each a run of a replica; every one still running is stopped at the end."""

    def __init__(self, slack: BackgroundSlack, kept: store.RedisStore) -> None:
        self.slack, self.kept = slack, kept
        self.made: list[slack_outbox.SlackOutbox] = []

    def start(self, replica: str) -> slack_outbox.SlackOutbox:
        client = slack_outbox.make_client(self.slack.bot_token, base_url=self.slack.api_url, timeout=5)
        journal = outbox_journal.OutboxJournal(self.kept, replica=replica)
        outbox = slack_outbox.SlackOutbox(client, FAST, journal=journal)
        self.made.append(outbox)
        return outbox


@pytest.fixture
def runs(slack: BackgroundSlack, kept: store.RedisStore) -> Iterator[Runs]:
    made = Runs(slack, kept)
    yield made
    for outbox in made.made:
        outbox.stop(timeout=5)


def killed_with(slack: BackgroundSlack, outbox: slack_outbox.SlackOutbox, queued: int) -> None:
    """Stop `outbox` at once once its `queued` writes have each been refused at least once.

    A SIGKILL also ends the request in flight; here the worker thread lives on until that request returns,
    so wait for it (Slack still refuses it) before the caller lets Slack answer again. Otherwise it could
    land while the next run replays its entry: an ephemeral, which cannot be read back, would show twice."""
    slack.wait_until(lambda: outbox.counters().retried >= 1 and outbox.depth() == queued)
    outbox.stop(timeout=0)
    outbox.stop(timeout=5)


def wait_gone_silent(kept: store.RedisStore, replica: str) -> None:
    """Until the replica's heartbeat lapsed in Redis (a stopped run's lasts one second)."""
    deadline = time.monotonic() + 10
    while kept.recall(f"outbox-alive:{replica}") is not None:
        assert time.monotonic() < deadline, f"{replica} still alive in Redis"
        time.sleep(0.05)


def replies(slack: BackgroundSlack, root: str) -> list[str]:
    return [m["text"] for m in slack.messages(CHANNEL) if m["thread_ts"] == root and m["ts"] != root]


def message(slack: BackgroundSlack, channel: str, ts: str) -> dict[str, Any]:
    return next(m for m in slack.messages(channel) if m["ts"] == ts)


def test_writes_queued_at_a_kill_are_sent_once_by_the_next_run(slack: BackgroundSlack, runs: Runs) -> None:
    first = runs.start("gpubot-0")
    root = first.post(CHANNEL, "train-1 is starting")
    slack.set_faults(SLACK_DOWN)
    for step in ("waiting for a GPU node", "node Ready", "Running"):
        first.reply(CHANNEL, root, step)
    first.update(CHANNEL, root, "train-1: Running")
    first.update(CHANNEL, root, "train-1: Released")  # coalesced into the edit before it
    first.ephemeral(CHANNEL, "U_ALICE", "Released `train-1`")
    first.dm("U_ALICE", "your lease on train-1 ends in 15 minutes")
    killed_with(slack, first, queued=6)
    assert len(runs.kept.entries("outbox:gpubot-0")) == 6
    slack.set_faults(FaultConfig())

    second = runs.start("gpubot-0")  # the same replica, restarted
    assert second.flush(timeout=10)
    assert replies(slack, root) == ["waiting for a GPU node", "node Ready", "Running"]
    assert message(slack, CHANNEL, root)["text"] == "train-1: Released"
    assert [e["text"] for e in slack.ephemerals("U_ALICE")] == ["Released `train-1`"]
    assert [m["text"] for m in slack.messages("D_ALICE")] == ["your lease on train-1 ends in 15 minutes"]
    assert second.counters().replayed == 6
    assert runs.kept.entries("outbox:gpubot-0") == {}


def test_a_reply_slack_took_just_before_the_kill_is_not_posted_again(
    slack: BackgroundSlack, runs: Runs
) -> None:
    """The kill fell between Slack's answer and the entry's drop: the message is in Slack, the entry in
    Redis. The replay finds the message by its key in the thread's metadata, and so for a DM."""
    first = runs.start("gpubot-0")
    root = first.post(CHANNEL, "train-1 is starting")
    client = slack_outbox.make_client(slack.bot_token, base_url=slack.api_url, timeout=5)
    journal = outbox_journal.OutboxJournal(runs.kept, replica="gpubot-0")
    client.conversations_open(users="U_ALICE")
    for key, args in (
        ("k-reply", {"channel": CHANNEL, "thread_ts": root, "text": "Released by its owner"}),
        ("k-dm", {"channel": "D_ALICE", "text": "your lease ends in 15 minutes"}),
    ):
        client.chat_postMessage(**args, metadata=outbox_journal.metadata(key))
    journal.keep("k-reply", "post", ("chat", CHANNEL), {"channel": CHANNEL, "thread_ts": root, "text": "x"})
    journal.keep("k-dm", "dm", ("dm", "U_ALICE"), {"channel": "", "user": "U_ALICE", "text": "y"})
    journal.keep("k-new", "post", ("chat", CHANNEL), {"channel": CHANNEL, "thread_ts": root, "text": "new"})
    first.stop(timeout=0)

    second = runs.start("gpubot-0")
    assert second.flush(timeout=10)
    assert replies(slack, root) == ["Released by its owner", "new"]
    assert [m["text"] for m in slack.messages("D_ALICE")] == ["your lease ends in 15 minutes"]
    counters = second.counters()
    assert (counters.replayed, counters.found_sent) == (3, 2)
    assert len(slack.calls("conversations.replies")) == 1  # one read serves the thread's whole replay
    assert len(slack.calls("conversations.history")) == 1
    assert runs.kept.entries("outbox:gpubot-0") == {}


def test_a_gone_replicas_writes_are_taken_over_once(slack: BackgroundSlack, runs: Runs) -> None:
    gone = runs.start("gpubot-a")
    root = gone.post(CHANNEL, "train-1 is starting")
    slack.set_faults(SLACK_DOWN)
    for n in range(3):
        gone.reply(CHANNEL, root, f"step {n}")
    killed_with(slack, gone, queued=3)
    wait_gone_silent(runs.kept, "gpubot-a")
    slack.set_faults(FaultConfig())

    # Another replica and the gone one's own restart both look at once; each write goes out once.
    other, restarted = runs.start("gpubot-b"), runs.start("gpubot-a")
    assert other.flush(timeout=10) and restarted.flush(timeout=10)
    assert replies(slack, root) == ["step 0", "step 1", "step 2"]
    assert other.counters().replayed + restarted.counters().replayed == 3
    assert runs.kept.entries("outbox:gpubot-a") == runs.kept.entries("outbox:gpubot-b") == {}


def test_a_live_replicas_writes_are_left_to_it(slack: BackgroundSlack, runs: Runs) -> None:
    alive = runs.start("gpubot-a")
    root = alive.post(CHANNEL, "train-1 is starting")
    slack.set_faults(SLACK_DOWN)
    alive.reply(CHANNEL, root, "Running")
    slack.wait_until(lambda: alive.counters().retried >= 1)

    other = runs.start("gpubot-b")
    assert other.replay() == 0 and other.counters().replayed == 0
    slack.set_faults(FaultConfig())
    assert alive.flush(timeout=10)
    assert replies(slack, root) == ["Running"]


def test_a_replayed_edit_older_than_this_runs_own_is_dropped(slack: BackgroundSlack, runs: Runs) -> None:
    gone = runs.start("gpubot-a")
    root = gone.post(CHANNEL, "train-1 is starting")
    slack.set_faults(SLACK_DOWN)
    gone.update(CHANNEL, root, "train-1: Running")
    killed_with(slack, gone, queued=1)
    slack.set_faults(FaultConfig())
    other = runs.start("gpubot-b")  # the gone one's heartbeat has not lapsed yet: nothing taken
    other.update(CHANNEL, root, "train-1: Released")
    assert other.flush(timeout=10)
    wait_gone_silent(runs.kept, "gpubot-a")

    assert other.replay() == 0
    assert other.flush(timeout=10)
    shown = message(slack, CHANNEL, root)
    assert [r["text"] for r in shown["revisions"]] == ["train-1 is starting", "train-1: Released"]
    assert runs.kept.entries("outbox:gpubot-a") == runs.kept.entries("outbox:gpubot-b") == {}


def test_unsent_edits_of_one_message_are_kept_as_one_entry(slack: BackgroundSlack, runs: Runs) -> None:
    outbox = runs.start("gpubot-0")
    root = outbox.post(CHANNEL, "revision 0")
    slack.set_faults(SLACK_DOWN)
    outbox.update(CHANNEL, root, "revision 1")
    slack.wait_until(lambda: outbox.counters().retried >= 1)
    for n in range(2, 6):
        outbox.update(CHANNEL, root, f"revision {n}")
    # revision 1 may be on the wire again as the others come: everything after it is one entry
    kept = [
        outbox_journal.read("gpubot-0", k, raw) for k, raw in runs.kept.entries("outbox:gpubot-0").items()
    ]
    newest = [e.args["text"] for e in kept if e is not None]
    assert newest in (["revision 5"], ["revision 1", "revision 5"], ["revision 5", "revision 1"])
    slack.set_faults(FaultConfig())
    assert outbox.flush(timeout=10)
    assert message(slack, CHANNEL, root)["text"] == "revision 5"
    assert runs.kept.entries("outbox:gpubot-0") == {}


def test_with_redis_down_the_outbox_delivers_from_memory_and_says_so(
    slack: BackgroundSlack, caplog: pytest.LogCaptureFixture
) -> None:
    down = store.RedisStore(redis.Redis.from_url("unix:///nonexistent/redis.sock", socket_timeout=0.5))
    client = slack_outbox.make_client(slack.bot_token, base_url=slack.api_url, timeout=5)
    journal = outbox_journal.OutboxJournal(down, replica="gpubot-0")
    with caplog.at_level(logging.WARNING, logger="bot.adapters.store"):
        outbox = slack_outbox.SlackOutbox(client, FAST, journal=journal)
        try:
            root = outbox.post(CHANNEL, "train-1 is starting")
            outbox.reply(CHANNEL, root, "Running")
            outbox.dm("U_ALICE", "your lease ends in 15 minutes")
            assert outbox.flush(timeout=10)
        finally:
            outbox.stop(timeout=5)
    assert replies(slack, root) == ["Running"]
    assert len(slack.messages("D_ALICE")) == 1
    assert any("outbox:gpubot-0" in r.getMessage() and "not kept" in r.getMessage() for r in caplog.records)


def test_without_the_history_scopes_a_replayed_reply_is_sent_again_not_lost(kept: store.RedisStore) -> None:
    """An app installed before the manifest asked for channels:history: the read answers missing_scope, and
    a reply Slack took just before the kill shows twice rather than risk none."""
    scopes = frozenset({"chat:write", "commands", "files:write", "im:write"})
    with BackgroundSlack(SlackConfig(bot_scopes=scopes)) as slack:
        made = Runs(slack, kept)
        client = slack_outbox.make_client(slack.bot_token, base_url=slack.api_url, timeout=5)
        root = client.chat_postMessage(channel=CHANNEL, text="train-1 is starting")["ts"]
        args = {"channel": CHANNEL, "thread_ts": root, "text": "Released by its owner"}
        client.chat_postMessage(**args, metadata=outbox_journal.metadata("k-reply"))
        outbox_journal.OutboxJournal(kept, replica="gpubot-0").keep(
            "k-reply", "post", ("chat", CHANNEL), args
        )
        outbox = made.start("gpubot-0")
        try:
            assert outbox.flush(timeout=10)
            assert outbox.counters().failed == 0
        finally:
            outbox.stop(timeout=5)
        assert replies(slack, root) == ["Released by its owner"] * 2
        assert [c.error for c in slack.calls("conversations.replies")] == ["missing_scope"]


def test_two_replayed_edits_of_one_message_end_at_the_newer(slack: BackgroundSlack, runs: Runs) -> None:
    """Two edits of one message kept apart (the first was on the wire when the second came): the replay
    sends only the newer."""
    client = slack_outbox.make_client(slack.bot_token, base_url=slack.api_url, timeout=5)
    root = client.chat_postMessage(channel=CHANNEL, text="train-1 is starting")["ts"]
    lane = ("update", CHANNEL, root)
    for at, text in ((1.0, "train-1: Running"), (2.0, "train-1: Released")):
        journal = outbox_journal.OutboxJournal(runs.kept, replica="gpubot-0", clock=lambda at=at: at)
        journal.keep(f"k-{at}", "update", lane, {"channel": CHANNEL, "ts": root, "text": text})

    outbox = runs.start("gpubot-0")
    assert outbox.flush(timeout=10)
    shown = message(slack, CHANNEL, root)
    assert [r["text"] for r in shown["revisions"]] == ["train-1 is starting", "train-1: Released"]
    assert runs.kept.entries("outbox:gpubot-0") == {}
