"""Fixtures for hostile input: the real bot on the sim, over Socket Mode or behind its real HTTP server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from slack_bolt import BoltResponse

from bot import runtime
from sim.cluster import world
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import bot_settings
from tests.integration.test_http_mode import SECRET, http_settings, served_bot


@dataclass
class ListenerGate:
    """A Bolt global middleware, after Bolt's own signature check: each request that goes on to a listener.

    Real Bolt runs it; it only records and passes the request on, so what reaches gpubot's listeners is
    exactly what passes through here."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, body: dict[str, Any], next: Any) -> BoltResponse | None:
        with self._lock:
            self.bodies.append(dict(body))
        return next()  # type: ignore[no-any-return]

    def triggers(self) -> list[str]:
        with self._lock:
            return [str(body.get("trigger_id", "")) for body in self.bodies]


@dataclass
class HttpBot:
    bot: runtime.Bot
    url: str
    gate: ListenerGate


@pytest.fixture
def http_slack(slack_env: None) -> Iterator[BackgroundSlack]:
    config = SlackConfig(mode="http", rate_limits=RateLimitConfig(enabled=False))
    with BackgroundSlack(config) as running:
        yield running


@pytest.fixture
def http_bot(
    sim: world.BackgroundWorld, http_slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> Iterator[HttpBot]:
    """The real bot (Redis, sim, emulator) behind `http_mode.make_http_server`, its listeners gated."""
    config = http_settings(bot_settings(sim, http_slack, tmp_path, redis_url))
    with served_bot(config) as (bot, url):
        gate = ListenerGate()
        bot.app.use(gate.record)
        http_slack.configure_http(bot_url=url, signing_secret=SECRET)
        yield HttpBot(bot, url, gate)
