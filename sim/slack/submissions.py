"""A user submits a modal: the `view_submission` payload Slack sends, and what Slack does with the ack.

The payload follows api.slack.com/reference/interaction-payloads/views (`view_submission`: `team`, `user`
with its `team_id`, `view` with its `state.values`, `enterprise`, `is_enterprise_install`). The ack's
`response_action` follows api.slack.com/surfaces/modals (handling submissions): an empty 200 closes the
view; `errors` keeps it open with a message under each named input block; `update` replaces it; `push`
stacks a new one on it; `clear` closes the whole stack.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.slack import blockkit, payloads, views
from sim.slack.transcript import Json, Team, Workspace
from sim.slack.webapi import Context


def find_view(ctx: Context, view_id: str) -> Json:
    """An open modal; LookupError for an unknown one, a closed one, or an App Home (never submitted)."""
    found = next((v for v in ctx.views if v["id"] == view_id), None)
    if found is None or found.get("type") != "modal":
        raise LookupError(f"no open modal {view_id!r}")
    return found


def input_blocks(view: Json) -> list[Json]:
    return [b for b in view.get("blocks", []) if isinstance(b, dict) and b.get("type") == "input"]


SELECTED = ("static_select", "radio_buttons")
"""Elements whose state is the option chosen (`selected_option`), not a typed `value`."""


def state_values(view: Json, typed: Mapping[str, str]) -> Json:
    """`view.state.values`: each input's element by block_id and action_id, with what the user typed or
    chose (`typed` by block_id; for a select, the chosen option's value). An input the user left alone
    keeps what the view offered (`initial_value`, `initial_option`), or null when it offered nothing, as
    Slack sends it (api.slack.com/changelog/2020-09-full-state-on-view-submisson-and-block-actions: the
    state holds each stateful element's current value)."""
    values: Json = {}
    for block in input_blocks(view):
        element = block.get("element") or {}
        kind = str(element.get("type", "plain_text_input"))
        action_id = str(element.get("action_id", ""))
        block_id = str(block.get("block_id", ""))
        if kind in SELECTED:
            state = {"type": kind, "selected_option": chosen(element, typed.get(block_id))}
        else:
            value = typed.get(block_id, element.get("initial_value"))
            state = {"type": kind, "value": value if value != "" else None}
        values[block_id] = {action_id: state}
    return values


def chosen(element: Json, value: str | None) -> Json | None:
    """The option whose value was chosen; the initial one when none was. A value the select does not
    offer cannot be chosen in Slack's client: LookupError."""
    if value is None:
        initial = element.get("initial_option")
        return dict(initial) if isinstance(initial, dict) else None
    options = [o for group in element.get("option_groups") or [] for o in group.get("options") or []]
    for option in [*(element.get("options") or []), *options]:
        if isinstance(option, dict) and option.get("value") == value:
            return dict(option)
    raise LookupError(f"the select {element.get('action_id')!r} offers no option {value!r}")


def view_submission(
    ws: Workspace, *, user: str, team: Team, view: Json, typed: Mapping[str, str], trigger_id: str
) -> Json:
    ident = ws.identity
    submitted = {
        **view,
        "state": {"values": state_values(view, typed)},
        "app_installed_team_id": ident.team_id,
    }
    return {
        "type": "view_submission",
        "team": payloads.team_field(team),
        "user": payloads.user_field(ws, user, team),
        "api_app_id": ident.app_id,
        "token": payloads.VERIFICATION_TOKEN,
        "trigger_id": trigger_id,
        "view": submitted,
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": payloads.enterprise_field(team),
    }


def apply_ack(ctx: Context, view: Json, ack: Any) -> str:
    """What the user sees after the app's ack: `closed`, `errors`, `updated`, `pushed`, `cleared`, or
    `invalid_response` (Slack shows its generic error and leaves the modal as it was)."""
    answer = ack if isinstance(ack, dict) else {}
    action = answer.get("response_action")
    if not answer or action is None:
        ctx.views.remove(view)
        return "closed"
    if action == "errors":
        errors = answer.get("errors")
        inputs = {str(b.get("block_id", "")) for b in input_blocks(view)}
        ok = isinstance(errors, dict) and errors and set(errors) <= inputs
        return "errors" if ok else "invalid_response"
    if action == "clear":
        ctx.views[:] = [v for v in ctx.views if v["root_view_id"] != view["root_view_id"]]
        return "cleared"
    new = answer.get("view")
    if action not in ("update", "push") or not isinstance(new, dict) or blockkit.check_view(new):
        return "invalid_response"
    if action == "update":
        replaced = views.shown(
            ctx, new, view_id=view["id"], root_id=view["root_view_id"], previous=view["previous_view_id"]
        )
        view.clear()
        view.update(replaced)
        return "updated"
    ctx.views.append(views.shown(ctx, new, root_id=view["root_view_id"], previous=view["id"]))
    return "pushed"
