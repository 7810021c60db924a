"""Handlers: `/gpu` alone opens the run form, and its submission. The form's checks answer in the ack, under
the field that is wrong (`response_action: errors`); a good submission closes it and runs lazily."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App

from bot.core import models, runform
from bot.services import Services

CALLBACK_ID = "gpubot_run_form"
"""Must equal `slack_forms.CALLBACK_ID`; handlers may not import adapters, so a test keeps them equal."""


def submitted(view: dict[str, Any]) -> runform.Submitted:
    """The form's values by block_id, as typed or as offered; a select gives its chosen option's value."""
    values = (view.get("state") or {}).get("values") or {}
    found: dict[str, str] = {}
    for name in runform.FIELDS:
        element = (values.get(name) or {}).get(name) or {}
        if element.get("type") == "static_select":
            found[name] = str((element.get("selected_option") or {}).get("value") or "")
        else:
            found[name] = str(element.get("value") or "")
    return runform.Submitted(**found)


def submitter(body: dict[str, Any]) -> models.Owner:
    user = body.get("user") or {}
    return models.Owner(
        user_id=str(user.get("id", "")),
        user_name=str(user.get("username") or user.get("name") or ""),
        team_id=str(user.get("team_id", "")),
    )


class RunFormListener:
    def __init__(self, services: Services) -> None:
        self.services = services

    def ack_submission(self, ack: Ack, view: dict[str, Any]) -> None:
        forms = self.services.forms
        checked = forms.check(submitted(view)) if forms is not None else None
        if isinstance(checked, dict):
            ack(response_action="errors", errors=checked)
        else:
            ack()

    def run_submission(self, body: dict[str, Any], view: dict[str, Any]) -> None:
        forms = self.services.forms
        checked = forms.check(submitted(view)) if forms is not None else None
        # A submission with mistakes (the ack kept the form open) claims nothing, so the fixed one runs.
        if forms is None or not isinstance(checked, models.RunRequest):
            return
        if self.services.first_delivery(f"form-{view.get('id', '')}"):
            channel = str(view.get("private_metadata") or "")
            forms.submit(checked, submitter(body), channel, str(view.get("id", "")))


def register(app: App, services: Services) -> None:
    listener = RunFormListener(services)
    app.view(CALLBACK_ID)(ack=listener.ack_submission, lazy=[listener.run_submission])
