"""The request bodies Slack sends an app when a user acts: slash commands, button clicks, message events.

They are the same dicts in Socket Mode (as an envelope's `payload`) and in HTTP mode (as the POST body).
Each names the workspace (`Team`) the user acts from, and its Enterprise Grid org, in the fields Slack's
references show: api.slack.com/interactivity/slash-commands (`team_id`, `team_domain`, `enterprise_id`,
`enterprise_name`) and api.slack.com/reference/interaction-payloads/block-actions (`team`, `user.team_id`,
`enterprise`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sim.slack.transcript import Ephemeral, Json, Message, Team, Workspace

VERIFICATION_TOKEN = "emulated-verification-token"
"""The deprecated per-app token Slack still puts in every payload."""


@dataclass(frozen=True)
class Button:
    block_id: str
    action_id: str
    text: Json
    value: str
    style: str


def new_trigger_id() -> str:
    return f"{uuid.uuid4().int % 10**13}.{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex}"


def slash_command(
    ws: Workspace,
    *,
    user: str,
    team: Team,
    channel: str,
    command: str,
    text: str,
    response_url: str,
    trigger_id: str,
) -> Json:
    grid = {"enterprise_id": team.enterprise_id, "enterprise_name": team.enterprise_name}
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": team.id,
        "team_domain": team.domain,
        **(grid if team.enterprise_id else {}),
        "channel_id": channel,
        "channel_name": _channel_name(ws, channel),
        "user_id": user,
        "user_name": user_name(ws, user),
        "command": command,
        "text": text,
        "api_app_id": ws.identity.app_id,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id,
    }


def user_name(ws: Workspace, user: str) -> str:
    """The emulated workspace's name for `user`; a user of another team is named by their id."""
    known = ws.users.get(user)
    return known.name if known else user.lower()


def team_field(team: Team) -> Json:
    """`team` of an interaction payload: in a Grid org it also names the org."""
    grid = {"enterprise_id": team.enterprise_id, "enterprise_name": team.enterprise_name}
    return {"id": team.id, "domain": team.domain, **(grid if team.enterprise_id else {})}


def user_field(ws: Workspace, user: str, team: Team) -> Json:
    name = user_name(ws, user)
    return {"id": user, "username": name, "name": name, "team_id": team.id}


def enterprise_field(team: Team) -> Json | None:
    return {"id": team.enterprise_id, "name": team.enterprise_name} if team.enterprise_id else None


def iter_buttons(blocks: list[Json]) -> Iterator[Button]:
    """Buttons in `actions` blocks and as section accessories, in display order."""
    for index, block in enumerate(blocks):
        block_id = str(block.get("block_id") or f"b{index}")
        elements: list[Any] = list(block.get("elements", [])) if block.get("type") == "actions" else []
        if block.get("type") == "section" and isinstance(block.get("accessory"), dict):
            elements.append(block["accessory"])
        for element in elements:
            if isinstance(element, dict) and element.get("type") == "button":
                yield Button(
                    block_id,
                    str(element.get("action_id", "")),
                    element.get("text", {}),
                    str(element.get("value", "")),
                    str(element.get("style", "")),
                )


def find_button(blocks: list[Json], action_id: str) -> Button:
    for button in iter_buttons(blocks):
        if button.action_id == action_id:
            return button
    raise LookupError(f"no button with action_id {action_id!r} in that message")


def block_actions(
    ws: Workspace,
    *,
    user: str,
    team: Team,
    target: Message | Ephemeral,
    button: Button,
    value: str,
    action_ts: str,
    response_url: str,
    trigger_id: str,
) -> Json:
    ident = ws.identity
    ephemeral = isinstance(target, Ephemeral)
    container: Json = {
        "type": "message",
        "message_ts": target.ts,
        "channel_id": target.channel,
        "is_ephemeral": ephemeral,
    }
    payload: Json = {
        "type": "block_actions",
        "user": user_field(ws, user, team),
        "api_app_id": ident.app_id,
        "token": VERIFICATION_TOKEN,
        "container": container,
        "trigger_id": trigger_id,
        "team": team_field(team),
        "enterprise": enterprise_field(team),
        "is_enterprise_install": False,
        "channel": {"id": target.channel, "name": _channel_name(ws, target.channel)},
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [
            {
                "type": "button",
                "action_id": button.action_id,
                "block_id": button.block_id,
                "text": button.text,
                "value": value,
                "action_ts": action_ts,
                **({"style": button.style} if button.style else {}),
            }
        ],
    }
    if isinstance(target, Message):
        payload["message"] = target.to_api(ident.team_id, ident.app_id)
    return payload


def message_event(ws: Workspace, *, message: Message, mention: bool) -> Json:
    """An Events API `event_callback`: `app_mention` when the text names the bot, else `message`."""
    ident = ws.identity
    event: Json = {
        "type": "app_mention" if mention else "message",
        "user": message.user,
        "text": message.text,
        "ts": message.ts,
        "channel": message.channel,
        "event_ts": message.ts,
        "channel_type": "im" if ws.channels[message.channel].is_im else "channel",
    }
    if message.thread_ts:
        event["thread_ts"] = message.thread_ts
    if mention:
        del event["channel_type"]
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": ident.team_id,
        "api_app_id": ident.app_id,
        "event": event,
        "type": "event_callback",
        "event_id": "Ev" + uuid.uuid4().hex[:10].upper(),
        "event_time": int(float(message.ts)),
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
        "event_context": "4-" + uuid.uuid4().hex,
    }


def _channel_name(ws: Workspace, channel: str) -> str:
    found = ws.channels.get(channel)
    if found is None:
        return channel
    return "directmessage" if found.is_im else found.name
