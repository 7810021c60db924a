"""The Slack outbox against the real emulator over loopback: order, limits, coalescing, faults, refusals.

Nothing is mocked: the outbox drives a real slack_sdk WebClient, and every assertion reads what the
emulator received or holds. Tests wait on emulator events or `outbox.flush`, never on fixed sleeps.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from slack_sdk import WebClient

from bot.adapters import slack_outbox, slack_render
from bot.core import errors, notices
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import FaultConfig, RateLimitConfig
from sim.slack.runner import BackgroundSlack

CHANNEL, OTHER = "C_GPU", "C_OPS"
FAST = slack_outbox.OutboxSettings(
    channel_messages_per_second=50.0,
    channel_message_burst=50,
    backoff_initial_seconds=0.05,
    backoff_max_seconds=0.2,
)
"""Pacing out of the way, for tests about faults rather than limits."""


pytestmark = pytest.mark.usefixtures("slack_env")


@pytest.fixture
def slack() -> Iterator[BackgroundSlack]:
    with BackgroundSlack(SlackConfig()) as running:
        yield running


def open_outbox(
    slack: BackgroundSlack, settings: slack_outbox.OutboxSettings = FAST
) -> slack_outbox.SlackOutbox:
    client = slack_outbox.make_client(slack.bot_token, base_url=slack.api_url, timeout=5)
    return slack_outbox.SlackOutbox(client, settings)


@pytest.fixture
def outbox(slack: BackgroundSlack) -> Iterator[slack_outbox.SlackOutbox]:
    box = open_outbox(slack)
    yield box
    box.stop(timeout=5)


def texts(messages: list[dict[str, Any]], thread_ts: str = "") -> list[str]:
    return [m["text"] for m in messages if m["thread_ts"] == thread_ts and m["ts"] != thread_ts]


def failed_calls(slack: BackgroundSlack) -> int:
    return sum(1 for call in slack.calls() if call.status != 200)


def test_post_returns_a_ts_that_roots_a_thread(
    slack: BackgroundSlack, outbox: slack_outbox.SlackOutbox
) -> None:
    text, blocks = slack_render.render(notices.Reply("alice-train-1 is starting"))
    root = outbox.post(CHANNEL, text, blocks)
    outbox.reply(CHANNEL, root, "waiting for a GPU node")
    outbox.reply(CHANNEL, root, "scale-up triggered")
    assert outbox.flush(timeout=10)

    messages = slack.messages(CHANNEL)
    assert [(m["ts"], m["blocks"]) for m in messages if not m["thread_ts"]] == [(root, blocks)]
    assert texts(messages, root) == ["waiting for a GPU node", "scale-up triggered"]
    assert outbox.counters() == slack_outbox.OutboxCounters(sent=3)
    assert outbox.depth() == 0


def test_threads_keep_order_and_lose_nothing_under_injected_faults(
    slack: BackgroundSlack, outbox: slack_outbox.SlackOutbox
) -> None:
    slack.set_rate_limits(enabled=False)
    slack.set_faults(FaultConfig(rate=0.2, statuses=(429, 500, 503), seed=7))
    gpu_root = outbox.post(CHANNEL, "train-1")
    ops_root = outbox.post(OTHER, "episode")
    for i in range(15):
        outbox.reply(CHANNEL, gpu_root, f"step {i}")
        outbox.update(CHANNEL, gpu_root, f"train-1 at step {i}")
        if i % 3 == 0:
            outbox.reply(OTHER, ops_root, f"ops {i}")
    assert outbox.flush(timeout=60)

    gpu = slack.messages(CHANNEL)
    assert texts(gpu, gpu_root) == [f"step {i}" for i in range(15)]
    assert next(m for m in gpu if m["ts"] == gpu_root)["text"] == "train-1 at step 14"
    assert texts(slack.messages(OTHER), ops_root) == [f"ops {i}" for i in range(0, 15, 3)]
    counters = outbox.counters()
    assert counters.failed == 0
    assert counters.rate_limited > 0
    # one emulator-side failure per outbox retry: slack_sdk did not retry behind the outbox's back
    assert counters.retried == failed_calls(slack) > counters.rate_limited


def test_a_burst_to_one_channel_is_paced_under_slacks_limit(slack: BackgroundSlack) -> None:
    slack.set_rate_limits(messages_per_second=5.0, message_burst=5)
    paced = slack_outbox.OutboxSettings(channel_messages_per_second=5.0, channel_message_burst=3)
    outbox = open_outbox(slack, paced)
    try:
        root = outbox.post(CHANNEL, "root")
        for i in range(9):
            outbox.reply(CHANNEL, root, f"burst {i}")
        assert outbox.flush(timeout=30)
        assert outbox.counters() == slack_outbox.OutboxCounters(sent=10)
    finally:
        outbox.stop(timeout=5)
    assert [c.status for c in slack.calls("chat.postMessage")] == [200] * 10
    assert texts(slack.messages(CHANNEL), root) == [f"burst {i}" for i in range(9)]


def test_an_eager_outbox_obeys_retry_after_and_still_delivers_everything(slack: BackgroundSlack) -> None:
    slack.set_rate_limits(messages_per_second=5.0, message_burst=5)
    outbox = open_outbox(slack)  # paces far faster than the emulator allows
    try:
        root = outbox.post(CHANNEL, "root")
        for i in range(9):
            outbox.reply(CHANNEL, root, f"burst {i}")
        assert outbox.flush(timeout=30)
        counters = outbox.counters()
    finally:
        outbox.stop(timeout=5)
    statuses = [c.status for c in slack.calls("chat.postMessage")]
    assert statuses.count(200) == 10 and counters.sent == 10 and counters.failed == 0
    assert counters.rate_limited == statuses.count(429) > 0
    assert texts(slack.messages(CHANNEL), root) == [f"burst {i}" for i in range(9)]


def test_quick_successive_edits_collapse_to_the_newest(
    slack: BackgroundSlack, outbox: slack_outbox.SlackOutbox
) -> None:
    ts = outbox.post(CHANNEL, "revision 0")
    for i in range(1, 6):
        outbox.update(CHANNEL, ts, f"revision {i}")
    assert outbox.flush(timeout=10)

    message = next(m for m in slack.messages(CHANNEL) if m["ts"] == ts)
    assert message["text"] == "revision 5"
    sent_updates = len(slack.calls("chat.update"))
    assert outbox.counters().coalesced + sent_updates == 5
    assert len(message["revisions"]) == 1 + sent_updates < 6


def test_edits_held_back_by_a_429_collapse_into_one(
    slack: BackgroundSlack, outbox: slack_outbox.SlackOutbox
) -> None:
    ts = outbox.post(CHANNEL, "revision 0")
    slack.set_faults(FaultConfig(rate=1.0, statuses=(429,), methods=frozenset({"chat.update"})))
    outbox.update(CHANNEL, ts, "revision 1")
    slack.wait_until(lambda: outbox.counters().rate_limited > 0)
    for i in range(2, 6):
        outbox.update(CHANNEL, ts, f"revision {i}")
    slack.set_faults(FaultConfig())
    assert outbox.flush(timeout=10)

    message = next(m for m in slack.messages(CHANNEL) if m["ts"] == ts)
    revisions = [r["text"] for r in message["revisions"]]
    # revision 1 may be on the wire again when the others arrive; everything after it collapses
    assert revisions in (["revision 0", "revision 5"], ["revision 0", "revision 1", "revision 5"])
    assert outbox.counters().coalesced == 6 - len(revisions)


def test_ephemerals_and_dms_land(slack: BackgroundSlack, outbox: slack_outbox.SlackOutbox) -> None:
    text, blocks = slack_render.render(notices.Ephemeral("unknown profile `h100`"))
    outbox.ephemeral(CHANNEL, "U_ALICE", text, blocks)
    outbox.dm("U_BOB", "your lease ends in 15 minutes")
    outbox.dm("U_BOB", "released")
    assert outbox.flush(timeout=10)

    assert [(e["channel"], e["text"], e["blocks"]) for e in slack.ephemerals("U_ALICE")] == [
        (CHANNEL, text, blocks)
    ]
    dm = next(c for c in slack.transcript()["channels"] if c["is_im"] and c["user"] == "U_BOB")
    assert [m["text"] for m in dm["messages"]] == ["your lease ends in 15 minutes", "released"]
    assert len(slack.calls("conversations.open")) == 1


def test_a_file_follows_the_users_queued_dms_in_their_dm_and_survives_faults(
    slack: BackgroundSlack, outbox: slack_outbox.SlackOutbox
) -> None:
    slack.set_rate_limits(enabled=False)
    slack.set_faults(
        FaultConfig(
            rate=0.5,
            seed=3,
            statuses=(429, 503),
            methods=frozenset({"files.getUploadURLExternal", "files.completeUploadExternal"}),
        )
    )
    content = "".join(f"line {n}\n" for n in range(2000))
    outbox.dm("U_BOB", "your run finished")
    file_id = outbox.upload("U_BOB", "train-1.log", content, comment="The output of `train-1`")
    assert slack.file_content(file_id) == content.encode()
    dm = next(c for c in slack.transcript()["channels"] if c["is_im"] and c["user"] == "U_BOB")
    assert [(m["text"], [f["id"] for f in m.get("files", [])]) for m in dm["messages"]] == [
        ("your run finished", []),
        ("The output of `train-1`", [file_id]),
    ]
    assert len(slack.calls("conversations.open")) == 1, "the file reuses the DM the message opened"
    completed = [c.status for c in slack.calls("files.completeUploadExternal")]
    assert completed.count(200) == 1 and outbox.counters().failed == 0
    assert {c.status for c in slack.calls() if c.method.startswith("files.")} == {200, 429, 503}
    assert outbox.counters().retried == failed_calls(slack)


def test_a_file_slack_refuses_for_good_reaches_the_uploader(slack: BackgroundSlack) -> None:
    restricted = SlackConfig(max_file_bytes=100)
    with BackgroundSlack(restricted) as small:
        outbox = open_outbox(small)
        try:
            with pytest.raises(errors.Invalid, match="file_upload_size_restricted"):
                outbox.upload("U_ALICE", "big.log", "x" * 101, comment="too big")
            with pytest.raises(errors.NotFound):
                outbox.upload("U_NOBODY", "a.log", "hi", comment="nobody reads this")
            assert small.file_content(outbox.upload("U_ALICE", "small.log", "fits", comment="ok")) == b"fits"
        finally:
            outbox.stop(timeout=5)
        assert outbox.counters().failed == 2


@pytest.mark.parametrize(
    ("channel", "error"),
    [("C_NOPE", errors.Unreachable), ("C_GPU", errors.Invalid)],
)
def test_refusals_reach_the_poster_and_do_not_block_the_queue(
    slack: BackgroundSlack, outbox: slack_outbox.SlackOutbox, channel: str, error: type[Exception]
) -> None:
    with pytest.raises(error):
        outbox.post(channel, "")  # C_GPU: no_text, which no retry can fix
    assert outbox.post(CHANNEL, "still working")
    assert outbox.counters().failed == 1
    assert [m["text"] for m in slack.messages(CHANNEL)] == ["still working"]


@pytest.mark.parametrize(
    ("change", "why"),
    [({"bot_member": False}, "not-member"), ({"archived": True}, "archived"), ({"deleted": True}, "gone")],
)
def test_a_channel_that_refuses_the_bot_is_unreachable_and_a_waited_dm_still_goes(
    slack: BackgroundSlack, outbox: slack_outbox.SlackOutbox, change: dict[str, bool], why: str
) -> None:
    root = outbox.post(CHANNEL, "root")
    slack.change_channel(CHANNEL, **change)
    with pytest.raises(errors.Unreachable) as refused:
        outbox.post(CHANNEL, "reply", thread_ts=root)
    assert refused.value.why == why
    text = "your thread is out of reach, so here it is"
    ts = outbox.post_dm("U_ALICE", text)
    dm = next(c for c in slack.transcript()["channels"] if c["is_im"] and c["user"] == "U_ALICE")
    assert [(m["ts"], m["text"]) for m in dm["messages"]] == [(ts, text)]
    with pytest.raises(errors.NotFound):
        outbox.post_dm("U_NOBODY", "nobody reads this")
    assert outbox.counters().failed == 2


def test_a_post_that_cannot_go_out_in_time_is_withdrawn_not_sent_late(
    slack: BackgroundSlack, outbox: slack_outbox.SlackOutbox
) -> None:
    slack.set_faults(FaultConfig(rate=1.0, statuses=(429,), methods=frozenset({"chat.postMessage"})))
    with pytest.raises(errors.Unavailable):
        outbox.post(CHANNEL, "too late", timeout=0.3)
    slack.set_faults(FaultConfig())
    assert outbox.flush(timeout=5)
    assert outbox.post(CHANNEL, "on time") and [m["text"] for m in slack.messages(CHANNEL)] == ["on time"]


def test_a_post_on_the_wire_at_its_deadline_that_slack_refuses_is_withdrawn_not_retried_past_it(
    slack: BackgroundSlack, outbox: slack_outbox.SlackOutbox
) -> None:
    """Slack answers each try after 0.4 s with a 503, so the deadline (0.2 s) falls while a try is on the
    wire: the caller hears it was not sent once that try fails, not after every retry of an outage."""
    down = FaultConfig(rate=1.0, statuses=(503,), methods=frozenset({"chat.postMessage"}), delay=0.4)
    slack.set_faults(down)
    with pytest.raises(errors.Unavailable):
        outbox.post(CHANNEL, "too late", timeout=0.2)
    assert len(slack.calls("chat.postMessage")) == 1, "withdrawn after the try on the wire, not retried"
    slack.set_faults(FaultConfig())
    assert outbox.flush(timeout=5) and slack.messages(CHANNEL) == []


def test_an_unreachable_slack_is_retried_then_reported_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again before use: connections are refused
    client = slack_outbox.make_client("xoxb-1", base_url=f"http://127.0.0.1:{port}/api/", timeout=1)
    outbox = slack_outbox.SlackOutbox(client, FAST)
    try:
        with pytest.raises(errors.Unavailable):
            outbox.post(CHANNEL, "hello", timeout=0.5)
        assert outbox.counters().retried >= 2 and outbox.depth() == 0
    finally:
        outbox.stop(timeout=1)


def test_a_client_with_sdk_retries_is_refused(slack: BackgroundSlack) -> None:
    with pytest.raises(ValueError, match="retry_handlers"):
        slack_outbox.SlackOutbox(WebClient(token=slack.bot_token, base_url=slack.api_url))


def test_stop_drains_then_refuses_new_writes(slack: BackgroundSlack) -> None:
    outbox = open_outbox(slack)
    root = outbox.post(CHANNEL, "root")
    for i in range(3):
        outbox.reply(CHANNEL, root, f"last words {i}")
    outbox.stop(timeout=10)
    assert texts(slack.messages(CHANNEL), root) == [f"last words {i}" for i in range(3)]
    with pytest.raises(errors.Unavailable):
        outbox.reply(CHANNEL, root, "after stop")


def test_rate_limit_config_is_realistic_by_default() -> None:
    """The outbox's default pace must not exceed the emulator's (Slack's) documented default."""
    emulated, ours = RateLimitConfig(), slack_outbox.OutboxSettings()
    assert ours.channel_messages_per_second <= emulated.messages_per_second
    assert ours.channel_message_burst <= emulated.message_burst
