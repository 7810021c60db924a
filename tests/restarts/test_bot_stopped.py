"""A replica told to stop (SIGTERM, as a rolling update does) first closes its Socket Mode connection, so
Slack sends later commands to the other replicas, and only then stops its services and gives up the Lease."""

from __future__ import annotations

import pytest

from bot import settings
from bot.cli import serve
from sim.slack.runner import BackgroundSlack
from tests.restarts.conftest import BotFactory

pytestmark = pytest.mark.usefixtures("slack_env")


def test_a_stopping_replica_closes_its_socket_before_it_gives_up_the_lease(
    bots: BotFactory, slack: BackgroundSlack
) -> None:
    bot = bots("gpubot-0")
    bot.start()  # its marker is logged just before the socket opens: wait for Slack to see it
    assert slack.wait_until(lambda: slack.connections() == 1, timeout=10) is True
    assert bot.terminate() == 0
    said = bot.messages()
    closed = said.index(serve.SOCKET_CLOSED)
    released = next(
        i for i, m in enumerate(said) if m.endswith(f"released lease {settings.LeaderSettings().lease_name}")
    )
    assert closed < released, said[closed - 2 :]
    assert slack.wait_until(lambda: slack.connections() == 0, timeout=10) is True
