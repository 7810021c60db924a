"""The real bot in this process, on a stage: informers synced, threads resumed, one Socket Mode connection."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from slack_bolt.adapter.socket_mode.websocket_client import SocketModeHandler

from bot import app, runtime, settings
from bot.adapters import socket_mode
from sim.slack.runner import BackgroundSlack

WAIT = 10.0
"""Real seconds to wait for the bot to sync and connect; reached only when something is broken."""


@contextlib.contextmanager
def running_bot(
    config: settings.Settings,
    slack: BackgroundSlack,
    *,
    reaper_timer: bool = True,
    wait: float = WAIT,
    **build: Any,
) -> Iterator[runtime.Bot]:
    """`app.build(config, **build)`, started and connected; hung up and stopped when the block ends.

    Without `reaper_timer` the caller runs reaper rounds itself (`bot.reap()`) after moving a manual sim
    clock: a timer counts real seconds, which mean nothing on a clock the story moves."""
    bot = app.build(config, **build)
    bot.start(sync_timeout=wait)
    if not reaper_timer:
        bot.scheduler.remove_job("reap")
    handler = SocketModeHandler(bot.app, config.slack.app_token)
    before = slack.connections()
    socket_mode.connect(handler)
    slack.wait_until(lambda: slack.connections() > before, timeout=wait)
    try:
        yield bot
    finally:
        socket_mode.hang_up(handler)
        bot.stop()
