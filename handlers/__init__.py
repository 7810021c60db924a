"""Thin Slack listeners: parse, ack at once, hand the slow half to one service (Bolt lazy listeners)."""

from __future__ import annotations

from slack_bolt import App

from bot.core import workspaces as core_workspaces
from bot.services import Services
from handlers import actions, forms, gpu, home, workspaces


def register(app: App, services: Services, *, installation: core_workspaces.Installation) -> None:
    """Every listener gpubot has, on one Bolt app, behind the check that a request is from its workspace."""
    workspaces.register(app, installation)
    gpu.register(app, services)
    actions.register(app, services)
    forms.register(app, services)
    home.register(app, services)
