"""Adapters: one Socket Mode connection opened and hung up for good, around the SDK's reconnect machinery."""

from __future__ import annotations

import threading

from slack_bolt.adapter.socket_mode.websocket_client import SocketModeHandler

CONNECT_SECONDS = 10.0
"""How long `connect` waits for the socket to open before it lets the SDK's own reconnects take over."""


def connect(handler: SocketModeHandler, *, timeout: float = CONNECT_SECONDS) -> bool:
    """Open the Socket Mode connection, with the SDK's reconnects off until it is read from; True once
    Slack's `hello` has arrived. The SDK's monitor checks at once and, finding the new socket not open
    yet, starts a second connection while the first goes on running where `hang_up` cannot reach it (the
    replica would keep taking commands after it hung up). Waiting for `hello` rather than the socket's
    opening also means its reader is running: websocket-client opens the socket, then starts reading."""
    client = handler.client
    opened = threading.Event()
    client.on_message_listeners.append(lambda _ws, _message: opened.set())
    client.default_auto_reconnect_enabled = False
    handler.connect()  # type: ignore[no-untyped-call]  # returns before the socket is open
    is_open = opened.wait(timeout)
    client.default_auto_reconnect_enabled = client.auto_reconnect_enabled = True
    return is_open


def hang_up(handler: SocketModeHandler) -> None:
    """End the Socket Mode connection now, for good. Not `handler.close()`, which also joins the client's
    threads and can take ten seconds (websocket-client waits out its ping interval). Their loops are told
    to stop first, unjoined: a session runner still looping would call `run_forever` again 0.5 s later,
    reconnecting the replica that just hung up (or, once Slack is gone, failing every 0.5 s forever)."""
    client = handler.client
    client.closed = True
    client.auto_reconnect_enabled = False
    for runner in (client.current_session_runner, client.current_app_monitor, client.message_processor):
        runner.event.set()
    client.disconnect()
    # The message workers are left idle rather than shut down: the processor's last turn may still hand
    # them a message, and a pool shut down under it raises in that thread.
