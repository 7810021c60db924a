"""Services: the loops that read through ports, ask the core, and act through ports; handlers call these."""

from __future__ import annotations

from dataclasses import dataclass

from bot.core import ports
from bot.services import asks, doctor, forms, home, launcher, leases, logs, spend, tracker, warm

DELIVERY_TTL_SECONDS = 3600
"""Slack redelivers within minutes; an hour of memory per request id is ample and cheap."""
PRESS_TTL_SECONDS = 10
"""Two presses of one button on one message this close together are a double click: the first counts."""


@dataclass(frozen=True)
class Services:
    """What handlers may call: everything slow happens here, after the handler has acked."""

    launcher: launcher.Launcher
    tracker: tracker.Tracker
    leases: leases.Leases
    logs: logs.Logs
    store: ports.Store | None = None
    warmer: warm.Warmer | None = None
    doctor: doctor.SlackDoctor | None = None
    asks: asks.Asks | None = None
    forms: forms.RunForms | None = None
    spending: spend.Spending | None = None
    """`/gpu usage`."""
    home: home.AppHome | None = None
    """The App Home tab."""

    def first_delivery(self, request_id: str) -> bool:
        """Slack may deliver a request twice (an ack lost, then a redelivery to any replica): act once."""
        if not request_id or self.store is None:
            return True
        return self.store.claim(f"slack-request:{request_id}", DELIVERY_TTL_SECONDS)

    def first_press(self, request_id: str, press: str) -> bool:
        """A button click, delivered once, and not the second half of a double click (`press` names the
        user, the message and the button): each click is a new request, so the request id cannot tell."""
        if not self.first_delivery(request_id):
            return False
        if not press or self.store is None:
            return True
        return self.store.claim(f"slack-press:{press}", PRESS_TTL_SECONDS)
