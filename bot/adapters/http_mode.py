"""Adapters: HTTP mode's server, Bolt's WSGI adapter behind gpubot's guard, with bounded workers."""

from __future__ import annotations

import logging
from typing import Any
from wsgiref import simple_server

from slack_bolt import App
from slack_bolt.adapter.wsgi import SlackRequestHandler

from bot import settings as settings_module
from bot.adapters import http_server, slack_http

logger = logging.getLogger(__name__)


class _QuietRequestHandler(http_server.DeadlineHandlerMixIn, simple_server.WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("http %s: %s", self.address_string(), format % args)


def make_http_server(
    app: App, *, slack: settings_module.SlackSettings, port: int | None = None, host: str = "0.0.0.0"
) -> simple_server.WSGIServer:
    """HTTP mode: Bolt's WSGI adapter behind gpubot's checks, on a server with bounded workers and read
    deadlines (`slack.http_limits`); `serve_forever()` runs it and `shutdown()` stops it, which Bolt's
    SlackAppDevelopmentServer cannot. `port` overrides `slack.http_port`; 0 picks a free port."""
    limits = slack.http_limits
    guarded = slack_http.SlackRequestGuard(
        SlackRequestHandler(app, slack.http_path),
        path=slack.http_path,
        signing_secret=slack.signing_secret,
        max_body_bytes=limits.max_body_bytes,
    )
    address = (host, slack.http_port if port is None else port)
    server = http_server.BoundedWSGIServer(address, _QuietRequestHandler, limits=limits, name="slack-http")
    server.set_app(guarded)
    return server
