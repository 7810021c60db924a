"""The App Home as Slack delivers it: the `app_home_opened` event when a user opens the app, and the
`block_actions` payload of a button pressed on their Home tab.

Event: api.slack.com/events/app_home_opened — `type`, `user`, `channel` (the app's DM with the user),
`tab` ("home" or "messages"), `event_ts`, and `view` (the tab's current state) once a view has been
published for that user; wrapped in the Events API's `event_callback` envelope. A press on the Home tab:
api.slack.com/reference/interaction-payloads/block-actions — the `container` is `{"type": "view", "view_id"}`
and the `view` is sent, with no `channel`, no `message` and no `response_url` (of `respond`, `say` and
`ack(errors)` a maintainer answered "you cannot use any of them for Home tabs", slackapi/bolt-js#968).
"""

from __future__ import annotations

import time
import uuid

from sim.slack import payloads
from sim.slack.transcript import Json, Team, Workspace

TABS = ("home", "messages")


def opened_event(ws: Workspace, *, user: str, channel: str, tab: str, view: Json | None) -> Json:
    now = time.time()
    event: Json = {
        "type": "app_home_opened",
        "user": user,
        "channel": channel,
        "tab": tab,
        "event_ts": f"{now:.6f}",
    }
    if view is not None and tab == "home":
        event["view"] = {**view, "app_installed_team_id": ws.identity.team_id}
    ident = ws.identity
    return {
        "token": payloads.VERIFICATION_TOKEN,
        "team_id": ident.team_id,
        "api_app_id": ident.app_id,
        "event": event,
        "type": "event_callback",
        "event_id": "Ev" + uuid.uuid4().hex[:10].upper(),
        "event_time": int(now),
        "authorizations": [
            {
                "enterprise_id": ident.enterprise_id or None,
                "team_id": ident.team_id,
                "user_id": ident.bot_user_id,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
    }


def find_button(view: Json, action_id: str, value: str | None) -> payloads.Button:
    """The Home's button with this action id (and value, when several share the id: one per workload)."""
    for button in payloads.iter_buttons(list(view.get("blocks", []))):
        if button.action_id == action_id and (value is None or button.value == value):
            return button
    shown = f" and value {value!r}" if value is not None else ""
    raise LookupError(f"no button with action_id {action_id!r}{shown} on that App Home")


def block_actions(
    ws: Workspace,
    *,
    user: str,
    team: Team,
    view: Json,
    button: payloads.Button,
    action_ts: str,
    trigger_id: str,
) -> Json:
    return {
        "type": "block_actions",
        "user": payloads.user_field(ws, user, team),
        "api_app_id": ws.identity.app_id,
        "token": payloads.VERIFICATION_TOKEN,
        "container": {"type": "view", "view_id": view["id"]},
        "trigger_id": trigger_id,
        "team": payloads.team_field(team),
        "enterprise": payloads.enterprise_field(team),
        "is_enterprise_install": False,
        "view": view,
        "actions": [
            {
                "type": "button",
                "action_id": button.action_id,
                "block_id": button.block_id,
                "text": button.text,
                "value": button.value,
                "action_ts": action_ts,
                **({"style": button.style} if button.style else {}),
            }
        ],
    }
