"""Fixtures for end-to-end bot tests: the Slack emulator, and the real bot on it and the sim."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot import app
from sim.cluster import world
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack
from sim.slack.socket_mode import SocketModeConfig
from tests.integration.botkit import bot_settings, running_bot


@pytest.fixture
def slack() -> Iterator[BackgroundSlack]:
    config = SlackConfig(
        rate_limits=RateLimitConfig(enabled=False), socket_mode=SocketModeConfig(ack_timeout=3.0)
    )
    with BackgroundSlack(config) as running:
        yield running


@pytest.fixture
def bot(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> Iterator[app.Bot]:
    with running_bot(bot_settings(sim, slack, tmp_path, redis_url), slack) as running:
        yield running
