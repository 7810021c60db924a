"""Handlers: the App Home tab. Ack the event at once; the Home is built and published lazily."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App

from bot.services import Services

EVENT = "app_home_opened"
HOME_TAB = "home"
"""app_home_opened also comes for the Messages tab (`tab: "messages"`), which shows no view of ours
(api.slack.com/events/app_home_opened)."""


class HomeTab:
    def __init__(self, services: Services) -> None:
        self.services = services

    def ack_opened(self, ack: Ack) -> None:
        ack()

    def run_opened(self, event: dict[str, Any]) -> None:
        if event.get("tab") == HOME_TAB and self.services.home is not None:
            self.services.home.publish(str(event.get("user", "")))


def pressed_on_home(body: dict[str, Any]) -> str:
    """The presser of a button on their App Home, "" for a press anywhere else (a message, a modal)."""
    view = body.get("view") or {}
    if (body.get("container") or {}).get("type") == "view" and view.get("type") == HOME_TAB:
        return str((body.get("user") or {}).get("id", ""))
    return ""


def register(app: App, services: Services) -> None:
    listener = HomeTab(services)
    app.event(EVENT)(ack=listener.ack_opened, lazy=[listener.run_opened])
