"""Services: the loops that read through ports, ask the core, and act through ports; handlers call these."""

from __future__ import annotations

from dataclasses import dataclass

from bot.services import launcher, tracker


@dataclass(frozen=True)
class Services:
    """What handlers may call: everything slow happens here, after the handler has acked."""

    launcher: launcher.Launcher
    tracker: tracker.Tracker
