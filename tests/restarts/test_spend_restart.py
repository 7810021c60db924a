"""Spend survives a restart: a finished run's cost is in Redis by day, a running one's comes from its pod,
so `/gpu usage` says the same before the bot is killed and after it starts again."""

from __future__ import annotations

import re
import time

import pytest

from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import CUDA, WAIT, advance_until, step_reached
from tests.restarts import ledger, processes
from tests.restarts.conftest import BotFactory

pytestmark = pytest.mark.usefixtures("slack_env")
LONG_RUN = f"run {CUDA} -- sleep 86400"


def usage_text(slack: BackgroundSlack, user: str = "U_ALICE") -> str:
    before = len(slack.ephemerals(user))
    assert slack.type_command(user, "C_GPU", "/gpu", "usage").acked
    answers = processes.wait(lambda: slack.ephemerals(user)[before:], what="the /gpu usage answer")
    return str(answers[-1]["text"])


def test_usage_says_the_same_after_the_bot_is_killed_and_started_again(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bots: BotFactory, own_redis: processes.RedisServer
) -> None:
    pods = ledger.pod_ledger(sim)
    bot = bots()
    bot.start()
    slack.type_command("U_ALICE", "C_GPU", "/gpu", LONG_RUN)
    advance_until(sim, slack, step_reached(slack, "Running on"))
    sim.advance(3600, step=60)
    slack.type_command("U_ALICE", "C_GPU", "/gpu", "release")
    advance_until(sim, slack, lambda: not pods.live)  # over: its cost is settled into the store
    # The bot settles the cost when its watch sees the pod go, a moment after the sim deleted it.
    deadline = time.monotonic() + WAIT
    while not own_redis.keys("gpubot:spend:*"):
        assert time.monotonic() < deadline, "a finished run's cost is kept by day"
        time.sleep(0.05)

    slack.type_command("U_ALICE", "C_GPU", "/gpu", LONG_RUN)
    running = lambda: [p for p in sim.pods() if p.get("status", {}).get("phase") == "Running"]  # noqa: E731
    advance_until(sim, slack, running)
    sim.advance(1800, step=60)
    before = usage_text(slack)
    assert before.startswith("Your spend this week, since Monday "), before
    hours = float(re.findall(r"(\d+\.\d) GPU-hours", before)[0])
    assert 1.5 <= hours < 1.7, before  # the finished hour (from Redis) and the running half (from its pod)

    bot.kill()
    bot.start()
    assert usage_text(slack) == before
