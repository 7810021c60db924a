"""Channels the bot cannot post in (removed from it, archived, deleted) and a Slack that fails.

The reaper deletes on time whatever Slack says; the owner hears by DM when the thread is out of reach, and
what could not be delivered is recorded. Rounds are counted on the sim clock. A run asked in a channel
without the bot is refused at once, saying how to invite it, and makes no pod.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from bot import runtime
from bot.adapters import slack_outbox
from bot.core import labels, podspec
from sim.cluster import world
from sim.slack.ratelimits import FaultConfig
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import RUN, WAIT, Json, advance_until, gpubot_pods, roots
from tests.integration.test_reaper import (
    ALICE_DM,
    gpu_nodes,
    pod_notes,
    reaping_bot,
    round_after_round,
    said,
    start_workload,
)

pytestmark = pytest.mark.usefixtures("slack_env")

CUT_OFF: dict[str, dict[str, bool]] = {
    "not_in_channel": {"bot_member": False},
    "is_archived": {"archived": True},
    "channel_not_found": {"deleted": True},
}
"""What happens to the workload's channel, by the error Slack then answers the bot's posts with."""
WHY = {"not_in_channel": "not-member", "is_archived": "archived", "channel_not_found": "gone"}
GRACE = timedelta(minutes=5)
"""The reaper's default grace after a lease's end: the delete is due at end + grace."""


def alice_dms(slack: BackgroundSlack, words: str) -> list[Json]:
    return [m for m in slack.messages(ALICE_DM) if words in m["text"]]


def undelivered(bot: runtime.Bot) -> list[str]:
    return [
        line
        for line in bot.telemetry.scrape().decode().splitlines()
        if line.startswith("gpubot_undelivered_total{")
    ]


@pytest.mark.parametrize("error", sorted(CUT_OFF))
def test_a_lease_ends_on_time_and_its_owner_hears_by_dm_when_the_thread_is_out_of_reach(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str, error: str
) -> None:
    with reaping_bot(sim, slack, tmp_path, redis_url) as bot:
        root = start_workload(sim, slack)
        end = podspec.parse_time(pod_notes(sim)[labels.LEASE_END_ANNOTATION])
        assert end is not None
        slack.change_channel("C_GPU", **CUT_OFF[error])
        late = round_after_round(sim, bot, end + GRACE)
        deleted = slack.wait_until(lambda: alice_dms(slack, "Deleted"), timeout=WAIT)
        advance_until(sim, slack, lambda: not gpubot_pods(sim) and not gpu_nodes(sim), stride=60, limit=3600)
        recorded = undelivered(bot)
        marks = bot.services.tracker.threads()
    assert late == 1, f"deleted {late} rounds after its lease ended, not in the first"
    reminded, nudged = alice_dms(slack, "The lease on"), alice_dms(slack, "left on")
    assert len(reminded) == len(nudged) == len(deleted) == 1
    note = "I could not post this in its thread in <#C_GPU>"
    for dm in (*reminded, *nudged, *deleted):
        assert note in json.dumps(dm["blocks"]), dm
    assert "`/invite @gpubot`" in json.dumps(reminded[0]["blocks"]) or error != "not_in_channel"
    assert not said(slack, root, "The lease on") and not said(slack, root, "Deleted")
    why = WHY[error]
    assert sorted(recorded) == [
        f'gpubot_undelivered_total{{act="{act}",where="thread",why="{why}"}} 1.0'
        for act in ("expire", "nudge", "remind")
    ]
    assert gpu_nodes(sim) == [] and not marks


def test_a_delete_waits_for_no_slack_outage_and_is_told_once_slack_is_back(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    down = FaultConfig(rate=1.0, statuses=(503,), methods=frozenset({"chat.postMessage"}))
    quick = slack_outbox.OutboxSettings(post_timeout_seconds=0.5)
    """A message waits half a second for Slack, so each round of the outage costs the test little."""
    with reaping_bot(sim, slack, tmp_path, redis_url, outbox=quick) as bot:
        root = start_workload(sim, slack)
        end = podspec.parse_time(pod_notes(sim)[labels.LEASE_END_ANNOTATION])
        assert end is not None
        slack.set_faults(down)
        late = round_after_round(sim, bot, end + GRACE, flush=False)
        assert not said(slack, root, "The lease on") and not said(slack, root, "Deleted")
        slack.set_faults(FaultConfig())
        for _ in range(3):  # the next rounds tell what the outage held back, the delete's once
            bot.reap()
            bot.outbox.flush(WAIT)
        told = [said(slack, root, words) for words in ("The lease on", "left on", "Deleted")]
        recorded = undelivered(bot)
    assert late == 1
    assert [len(found) for found in told] == [0, 0, 1], "a reminder due before the delete is not sent after"
    assert not alice_dms(slack, "Deleted") and recorded == []


@pytest.mark.parametrize("private", [False, True])
def test_a_run_in_a_channel_without_the_bot_is_refused_at_once_with_how_to_invite_it(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot, private: bool
) -> None:
    """Slack answers the bot's post not_in_channel in a public channel, channel_not_found in a private one."""
    slack.change_channel("C_GPU", bot_member=False, private=private)
    delivery = slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    refusal = slack.wait_until(
        lambda: [e for e in slack.ephemerals("U_ALICE") if "`/invite @gpubot`" in e["text"]], timeout=WAIT
    )
    sim.advance(60)
    bot.outbox.flush(WAIT)
    refused = [c.error for c in slack.calls("chat.postMessage")]
    assert delivery.acked
    assert refused == ["channel_not_found" if private else "not_in_channel"]
    (said,) = refusal
    assert said["source"] == "response_url" and "nothing was started" in said["text"]
    assert gpubot_pods(sim) == [] and roots(slack) == []


def test_a_slack_outage_during_a_run_is_told_as_slacks_not_the_clusters(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    """Posting the thread's root fails (Slack answers 503 until the outbox gives up): the asker hears that
    Slack failed, through the ephemeral path that still works, and no pod is made for a thread nobody has."""
    down = FaultConfig(rate=1.0, statuses=(503,), methods=frozenset({"chat.postMessage"}))
    quick = slack_outbox.OutboxSettings(post_timeout_seconds=0.5)
    with reaping_bot(sim, slack, tmp_path, redis_url, outbox=quick):
        slack.set_faults(down)
        assert slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN).acked
        told = slack.wait_until(
            lambda: [e["text"] for e in slack.ephemerals("U_ALICE") if "did not work" in e["text"]],
            timeout=WAIT,
        )
        slack.set_faults(FaultConfig())
    (text,) = told
    assert text.startswith("That did not work: Slack is not taking gpubot's messages right now"), text
    assert "the cluster said" not in text and gpubot_pods(sim) == [] and roots(slack) == []
