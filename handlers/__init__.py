"""Thin Slack listeners: parse, ack at once, hand the slow half to one service (Bolt lazy listeners)."""

from __future__ import annotations

from slack_bolt import App

from bot.services import Services
from handlers import actions, gpu


def register(app: App, services: Services) -> None:
    """Every listener gpubot has, on one Bolt app."""
    gpu.register(app, services)
    actions.register(app, services)
