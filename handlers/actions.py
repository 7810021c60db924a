"""Handlers: buttons on gpubot's messages. Ack at once; the change runs lazily in the leases service."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App

from bot.services import Services
from handlers import home

RELEASE_ACTION = "gpubot_release"
EXTEND_ACTION = "gpubot_extend"
KEEP_ACTION = "gpubot_keep"
KEEP_ASKED_ACTION = "gpubot_keep_asked"
LOGS_ACTION = "gpubot_logs"
ASK_ACTION = "gpubot_ask"
"""Must equal `slack_render`'s action ids; handlers may not import adapters, so a test keeps them equal."""


def clicked(body: dict[str, Any]) -> tuple[str, str, str]:
    """(value, user, channel) of a block_actions click."""
    action = (body.get("actions") or [{}])[0]
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id", "")
    return str(action.get("value", "")), str((body.get("user") or {}).get("id", "")), str(channel)


class LeaseButtons:
    """Release, Extend, Keep and Logs: each value is the workload's `namespace/name`; the clicker acts."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def ack_click(self, ack: Ack) -> None:
        ack()

    def _first(self, body: dict[str, Any]) -> bool:
        action = (body.get("actions") or [{}])[0]
        container = body.get("container") or {}
        where = container.get("message_ts") or container.get("view_id", "")
        value, user, _ = clicked(body)
        press = f"{user}:{where}:{action.get('action_id', '')}:{value}" if where else ""
        return self.services.first_press(str(body.get("trigger_id", "")), press)

    def _refresh_home(self, body: dict[str, Any]) -> None:
        """A press on the App Home (which has no channel: the answer goes by DM) redraws it."""
        user = home.pressed_on_home(body)
        if user and self.services.home is not None:
            self.services.home.publish(user)

    def run_release(self, body: dict[str, Any]) -> None:
        if self._first(body):
            self.services.leases.press("Release", *clicked(body))
            self._refresh_home(body)

    def run_extend(self, body: dict[str, Any]) -> None:
        if self._first(body):
            self.services.leases.press("Extend", *clicked(body))
            self._refresh_home(body)

    def run_keep(self, body: dict[str, Any]) -> None:
        if self._first(body):
            self.services.leases.press("Keep", *clicked(body))

    def run_keep_asked(self, body: dict[str, Any]) -> None:
        if self._first(body):
            self.services.leases.press("Keep", *clicked(body), asked=True)

    def run_logs(self, body: dict[str, Any]) -> None:
        if self._first(body):
            self.services.logs.logs_key(*clicked(body))

    def run_ask(self, body: dict[str, Any]) -> None:
        if self._first(body) and self.services.asks is not None:
            self.services.asks.ask_key(*clicked(body))


def register(app: App, services: Services) -> None:
    buttons = LeaseButtons(services)
    app.action(RELEASE_ACTION)(ack=buttons.ack_click, lazy=[buttons.run_release])
    app.action(EXTEND_ACTION)(ack=buttons.ack_click, lazy=[buttons.run_extend])
    app.action(KEEP_ACTION)(ack=buttons.ack_click, lazy=[buttons.run_keep])
    app.action(KEEP_ASKED_ACTION)(ack=buttons.ack_click, lazy=[buttons.run_keep_asked])
    app.action(LOGS_ACTION)(ack=buttons.ack_click, lazy=[buttons.run_logs])
    app.action(ASK_ACTION)(ack=buttons.ack_click, lazy=[buttons.run_ask])
