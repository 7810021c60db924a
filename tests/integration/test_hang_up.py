"""A replica that hangs up its Socket Mode connection stays off it: Slack sends later commands elsewhere."""

from __future__ import annotations

from slack_bolt import App
from slack_bolt.adapter.socket_mode.websocket_client import SocketModeHandler
from slack_sdk import WebClient

from bot import app
from sim.slack.runner import BackgroundSlack

WAIT = 10.0


def test_a_hung_up_connection_stops_its_threads_and_never_reconnects(
    slack: BackgroundSlack,
) -> None:
    bolt = App(client=WebClient(token=slack.bot_token, base_url=slack.api_url))
    handler = SocketModeHandler(bolt, slack.app_token)
    handler.connect()  # type: ignore[no-untyped-call]
    assert slack.wait_until(lambda: slack.connections() >= 1, timeout=WAIT)
    client = handler.client
    app.hang_up(handler)
    opened = slack.run(lambda: slack.emulator.hub.opened_total)
    runners = (client.current_session_runner, client.current_app_monitor, client.message_processor)
    for runner in runners:
        runner.thread.join(timeout=WAIT)
    assert not any(runner.thread.is_alive() for runner in runners), "a loop would reconnect in 0.5 s"
    assert client.current_session is not None and client.current_session.sock is None
    assert slack.run(lambda: slack.emulator.hub.opened_total) == opened, "reconnected after hanging up"
