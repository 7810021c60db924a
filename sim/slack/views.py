"""Modals and App Home: views.open, views.push, views.update and views.publish, each checking its view
as Slack does.

Slack refuses a view that breaks Block Kit's rules with `invalid_arguments` and the findings in
`response_metadata.messages` only, no `errors` list (a real views.open answer for a long
private_metadata, quoted in a public note). Errors otherwise are the methods' documented names
(docs.slack.dev/reference/methods/views.open, .push, .update, .publish).
"""

from __future__ import annotations

import itertools
import time

from sim.slack import blockkit, schema
from sim.slack.transcript import Json
from sim.slack.webapi import (
    Context,
    Method,
    Params,
    SlackError,
    error_lines,
    json_param,
    text_param,
)

ROOT_TYPE_MISMATCH = "must match the `type` of the root view whose stack we're pushing onto"
"""views.push of a non-modal view: Slack's line, quoted in a public Bolt app's comment."""

_hashes = itertools.count(1)


def view_param(params: Params) -> Json:
    view = json_param(params, "view", "invalid_arguments")
    if not isinstance(view, dict):
        raise SlackError("invalid_arguments")
    problems = blockkit.check_view(view)
    if problems:
        raise invalid_view(problems)
    return view


def invalid_view(problems: list[schema.Problem]) -> SlackError:
    return SlackError(
        "invalid_arguments", response_metadata={"messages": error_lines(schema.format_problems(problems))}
    )


def use_trigger(ctx: Context, params: Params) -> None:
    issued = ctx.triggers.get(text_param(params, "trigger_id"))
    if issued is None:
        raise SlackError("invalid_trigger_id")
    if time.time() - issued > ctx.trigger_ttl:
        raise SlackError("expired_trigger_id")


def shown(
    ctx: Context, view: Json, *, view_id: str = "", root_id: str = "", previous: str | None = None
) -> Json:
    """A view as Slack echoes it back: the app's fields plus the ids and hash Slack adds."""
    ident = ctx.workspace.identity
    view_id = view_id or f"V{len(ctx.views) + len(ctx.homes) + 1:08d}"
    return {
        **view,
        "id": view_id,
        "team_id": ident.team_id,
        "app_id": ident.app_id,
        "bot_id": ident.bot_id,
        "root_view_id": root_id or view_id,
        "previous_view_id": previous,
        "hash": f"{int(time.time())}.{next(_hashes):08d}",
        "state": {"values": {}},
    }


def views_open(ctx: Context, params: Params) -> Json:
    use_trigger(ctx, params)
    opened = shown(ctx, view_param(params))
    ctx.views.append(opened)
    return {"view": opened}


def views_push(ctx: Context, params: Params) -> Json:
    """A modal on top of the one the trigger came from; only modals stack."""
    use_trigger(ctx, params)
    view = view_param(params)
    if view.get("type") != "modal":
        raise invalid_view([(ROOT_TYPE_MISMATCH, "/view/type")])
    below = ctx.views[-1] if ctx.views else None
    root = str(below["root_view_id"]) if below else ""
    pushed = shown(ctx, view, root_id=root, previous=str(below["id"]) if below else None)
    ctx.views.append(pushed)
    return {"view": pushed}


def views_update(ctx: Context, params: Params) -> Json:
    view_id, external_id = text_param(params, "view_id"), text_param(params, "external_id")
    if not view_id and not external_id:
        raise SlackError("invalid_arguments")
    everything = [*ctx.views, *ctx.homes.values()]
    found = next(
        (
            v
            for v in everything
            if v["id"] == view_id or (external_id and v.get("external_id") == external_id)
        ),
        None,
    )
    if found is None:
        raise SlackError("not_found")
    if params.get("hash") and params["hash"] != found["hash"]:
        raise SlackError("hash_conflict")
    updated = shown(
        ctx,
        view_param(params),
        view_id=found["id"],
        root_id=found["root_view_id"],
        previous=found["previous_view_id"],
    )
    found.clear()
    found.update(updated)
    return {"view": found}


INVALID_USER_ID = "invalid `user_id`"
"""views.publish's answer to a missing or unknown user_id, without the "[ERROR]" prefix its schema findings
carry (api.slack.com/methods/views.publish, "Typical error response, before getting to any possible
validation errors")."""
HOME = "home"


def views_publish(ctx: Context, params: Params) -> Json:
    """Only a Home tab view is published; any other type fails the method's view schema, which Slack
    answers with the union line at /view (a real failed views.publish answer, in slack-web's golden tests:
    hackage slack-web-2.2.1.0 tests/golden/ResponseJSON/failed_view_publish.json)."""
    user = text_param(params, "user_id")
    if user not in ctx.workspace.users or ctx.workspace.users[user].is_bot:
        raise SlackError("invalid_arguments", response_metadata={"messages": [INVALID_USER_ID]})
    view = view_param(params)
    if view.get("type") != HOME:
        raise invalid_view([(schema.UNION, "/view")])
    if not ctx.home_tab_enabled:
        # docs.slack.dev/reference/methods/views.publish errors: "not_enabled: Error returned if a `home`
        # view is published but the Home tab isn't enabled for the app."
        raise SlackError("not_enabled")
    before = ctx.homes.get(user)
    if before is not None and params.get("hash") and params["hash"] != before["hash"]:
        raise SlackError("hash_conflict")
    ctx.homes[user] = shown(ctx, view, view_id=before["id"] if before else "")
    return {"view": ctx.homes[user]}


METHODS: dict[str, Method] = {
    "views.open": views_open,
    "views.push": views_push,
    "views.update": views_update,
    "views.publish": views_publish,
}
