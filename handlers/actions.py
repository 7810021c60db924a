"""Handlers: buttons on gpubot's messages. Ack at once; the release itself runs lazily in the service."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App

from bot.services import Services

RELEASE_ACTION = "gpubot_release"
"""Must equal `slack_render.RELEASE_ACTION`; handlers may not import adapters, so a test keeps them equal."""


def clicked(body: dict[str, Any]) -> tuple[str, str, str]:
    """(value, user, channel) of a block_actions click."""
    action = (body.get("actions") or [{}])[0]
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id", "")
    return str(action.get("value", "")), str((body.get("user") or {}).get("id", "")), str(channel)


class ReleaseButton:
    def __init__(self, services: Services) -> None:
        self.services = services

    def ack_release(self, ack: Ack) -> None:
        ack()

    def run_release(self, body: dict[str, Any]) -> None:
        if not self.services.first_delivery(str(body.get("trigger_id", ""))):
            return
        value, user, channel = clicked(body)
        self.services.launcher.release_key(value, user, channel)


def register(app: App, services: Services) -> None:
    button = ReleaseButton(services)
    app.action(RELEASE_ACTION)(ack=button.ack_release, lazy=[button.run_release])
