"""`gpubot serve`: the bot itself, configured from the environment (docs/deploy.md)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from types import FrameType
from typing import Any

from bot.services import tracker
from bot.settings import Settings, SettingsError

logger = logging.getLogger(__name__)

SOCKET_CLOSED = "Socket Mode connection closed: later commands go to the other replicas"

SERVE_DESCRIPTION = """\
Run the bot: it answers /gpu in Slack, creates and follows GPU pods in the
cluster, and reaps the forgotten ones. It reads everything from the environment
(docs/deploy.md lists every variable) and runs until SIGTERM or Ctrl-C. Settings
it cannot start with are named in one line, and it exits 2."""

SERVE_EPILOG = """\
environment (the essentials):
  SLACK_BOT_TOKEN       the bot token, xoxb-…, from your Slack app's
                        OAuth & Permissions page
  SLACK_APP_TOKEN       the app-level token, xapp-…, from its Basic Information
                        page, for Socket Mode (the default: no public URL needed)
  SLACK_MODE=http       take Slack's requests over HTTP on PORT (default 3000)
                        instead; needs SLACK_SIGNING_SECRET
  KUBECONFIG            the cluster (default: ~/.kube/config, or the pod's service
                        account when running inside Kubernetes)
  GPUBOT_NAMESPACE      where the bot creates its pods (default: gpubot-workloads)
  REDIS_URL             its small shared state (default: redis://localhost:6379/0;
                        memory:// keeps it in the process, for one replica)
  GPUBOT_SCALE_CHANNEL  a channel id for one message per scale-up episode

example, a first run from a laptop (without Slack, try `gpubot demo`):
  export SLACK_BOT_TOKEN=xoxb-… SLACK_APP_TOKEN=xapp-… REDIS_URL=memory://
  gpubot serve"""


def add_parser(sub: Any) -> None:
    sub.add_parser(
        "serve",
        help="run the bot against Slack and the cluster its environment names",
        description=SERVE_DESCRIPTION,
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def run(args: argparse.Namespace) -> int:
    """`gpubot serve`; settings it cannot start with are one line naming the variables, and exit 2."""
    try:
        return serve(Settings.from_env())
    except SettingsError as err:
        print(f"gpubot serve: {err.one_line()}; see docs/deploy.md", file=sys.stderr)
        return 2


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def serve(settings: Settings, *, clock: Callable[[], datetime] = tracker.wall_clock) -> int:
    """`gpubot serve`: Socket Mode (or HTTP mode with a signing secret) until SIGTERM or Ctrl-C.

    `clock` is for a bot run against a simulated cluster's time, as the restart tests run it."""
    # Only `serve` needs the Slack and Kubernetes clients; the other commands start without them.
    from slack_bolt.adapter.socket_mode.websocket_client import SocketModeHandler

    from bot import app
    from bot.adapters import http_mode, observability, socket_mode

    observability.configure_logging(settings.log_level, json_lines=settings.log_json)
    logger.info("gpubot starting with %s", settings.redacted())
    bot = app.build(settings, clock=clock)
    bot.telemetry.serve(
        port=settings.health_port, ready=bot.unready_reason, deadlines=settings.slack.http_limits
    )
    bot.start()
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        if settings.slack.mode == "http":
            server = http_mode.make_http_server(bot.app, slack=settings.slack)
            logger.info("serving Slack requests at :%s%s", server.server_port, settings.slack.http_path)
            bot.slack_connected = lambda: True  # the socket listens from here on; requests queue until served
            try:
                server.serve_forever()
            finally:
                server.server_close()
        else:
            # websocket-client's handler, not the SDK's built-in one: that one's socket keeps Nagle's
            # algorithm on, so in a burst each ack sent while the one before is unacknowledged waits for
            # the server's delayed ACK (40 ms on Linux); websocket-client sets TCP_NODELAY.
            handler = SocketModeHandler(bot.app, settings.slack.app_token)
            try:  # from before the connection opens: a SIGTERM while it does must close it too
                socket_mode.connect(handler)
                bot.slack_connected = handler.client.is_connected
                threading.Event().wait()
            finally:  # first: Slack sends later envelopes to the other replicas' connections
                socket_mode.hang_up(handler)
                logger.info(SOCKET_CLOSED)
    except KeyboardInterrupt:
        logger.info("stopping")
    finally:
        bot.stop()
    return 0
