"""The emulator times each Socket Mode ack, from the envelope sent to the ack read: what a bench needs."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from slack_bolt import Ack, App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk import WebClient

from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack
from sim.slack.socket_mode import SocketModeConfig

pytestmark = pytest.mark.usefixtures("slack_env")
DELAY = 0.2


@pytest.fixture
def slack() -> Iterator[BackgroundSlack]:
    config = SlackConfig(
        rate_limits=RateLimitConfig(enabled=False), socket_mode=SocketModeConfig(ack_timeout=2.0)
    )
    with BackgroundSlack(config) as running:
        yield running


def test_ack_seconds_spans_the_apps_work_before_its_ack(slack: BackgroundSlack) -> None:
    app = App(client=WebClient(token=slack.bot_token, base_url=slack.api_url), process_before_response=True)

    def slow(ack: Ack) -> None:
        time.sleep(DELAY)
        ack()

    app.command("/gpu")(slow)
    handler = SocketModeHandler(app, slack.app_token)
    handler.connect()  # type: ignore[no-untyped-call]
    try:
        slack.wait_for_connections(1)
        delivery = slack.type_command("alice", "C_GPU", "/gpu", "status")
    finally:
        handler.close()  # type: ignore[no-untyped-call]
    assert delivery.acked
    assert DELAY <= delivery.ack_seconds <= delivery.seconds < 2.0


def test_an_unacked_envelope_has_no_ack_time(slack: BackgroundSlack) -> None:
    app = App(client=WebClient(token=slack.bot_token, base_url=slack.api_url))
    handler = SocketModeHandler(app, slack.app_token)  # no listener: nothing acks
    handler.connect()  # type: ignore[no-untyped-call]
    try:
        slack.wait_for_connections(1)
        delivery = slack.type_command("alice", "C_GPU", "/gpu", "status")
    finally:
        handler.close()  # type: ignore[no-untyped-call]
    assert (delivery.acked, delivery.ack_seconds) == (False, 0.0)
