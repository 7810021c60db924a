"""Fixtures for the restart tests: the sim, the Slack emulator, a Redis of their own, and bot processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sim.cluster import world
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack
from sim.slack.socket_mode import SocketModeConfig
from tests.restarts import processes


@pytest.fixture
def slack() -> Iterator[BackgroundSlack]:
    config = SlackConfig(
        rate_limits=RateLimitConfig(enabled=False), socket_mode=SocketModeConfig(ack_timeout=3.0)
    )
    with BackgroundSlack(config) as running:
        yield running


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[processes.RedisServer]:
    """A redis-server these tests may stop, flush and start again (the session's one is shared)."""
    with processes.redis_server(tmp_path) as server:
        yield server


BotFactory = Callable[..., processes.BotProcess]


@pytest.fixture
def bots(
    sim: world.BackgroundWorld, slack: BackgroundSlack, own_redis: processes.RedisServer, tmp_path: Path
) -> Iterator[BotFactory]:
    """Make bot processes (not started); every one still running at the end gets SIGTERM."""
    made: list[processes.BotProcess] = []

    def make(identity: str = "gpubot-0", **extra: str) -> processes.BotProcess:
        env = processes.bot_environment(sim, slack, own_redis.url, tmp_path, POD_NAME=identity, **extra)
        bot = processes.BotProcess(env, tmp_path / f"{identity}.log", slack=slack)
        made.append(bot)
        return bot

    yield make
    for bot in made:
        bot.terminate()
