"""A replica that hangs up its Socket Mode connection stays off it: Slack sends later commands elsewhere."""

from __future__ import annotations

from slack_bolt import App
from slack_bolt.adapter.socket_mode.websocket_client import SocketModeHandler
from slack_sdk import WebClient

from bot.adapters import socket_mode
from sim.slack.runner import BackgroundSlack

WAIT = 10.0


def test_a_hung_up_connection_stops_its_loops_and_never_reconnects(
    slack: BackgroundSlack,
) -> None:
    bolt = App(client=WebClient(token=slack.bot_token, base_url=slack.api_url))
    handler = SocketModeHandler(bolt, slack.app_token)
    assert socket_mode.connect(handler) is True
    assert slack.wait_until(lambda: slack.connections() == 1, timeout=WAIT)
    assert slack.run(lambda: slack.emulator.hub.opened_total) == 1, "one connection, not a second at once"
    client = handler.client
    socket_mode.hang_up(handler)
    opened = slack.run(lambda: slack.emulator.hub.opened_total)
    loops = (client.current_app_monitor, client.message_processor)
    for loop in loops:
        loop.thread.join(timeout=WAIT)
    assert not any(loop.thread.is_alive() for loop in loops), "the monitor would reconnect"
    # The session loop runs `run_forever` again 0.5 s after it returns unless told to stop. Its last
    # `run_forever` may stay parked in websocket-client's poll() on the closed socket, a daemon thread
    # that reads nothing more; what matters is that its session is closed and never run again.
    assert client.current_session_runner.event.is_set(), "the session loop would reconnect in 0.5 s"
    session = client.current_session
    assert session is not None and session.sock is None and not session.keep_running
    assert slack.wait_until(lambda: slack.connections(draining=True) == 0, timeout=WAIT) is True
    assert slack.run(lambda: slack.emulator.hub.opened_total) == opened, "reconnected after hanging up"
