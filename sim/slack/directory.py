"""The workspace's directory: conversations.list and users.list, paginated with cursors as Slack does.

Slack hands out opaque `next_cursor` strings (base64 in practice) and an empty one on the last page
(docs.slack.dev/apis/web-api/pagination); `limit` defaults to 100 and Slack caps it at 1000
(docs.slack.dev/reference/methods/conversations.list, .../users.list).
"""

from __future__ import annotations

import base64
import binascii
import time

from sim.slack.transcript import Channel, Json
from sim.slack.webapi import Context, Method, Params, SlackError, flag_param, text_param

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
CONVERSATION_TYPES = ("public_channel", "private_channel", "mpim", "im")


def page(items: list[Json], params: Params) -> tuple[list[Json], Json]:
    """One page of `items` from `cursor`, with the `response_metadata` that leads to the next."""
    try:
        limit = int(params.get("limit") or DEFAULT_LIMIT)
    except ValueError as exc:
        raise SlackError("invalid_limit") from exc
    if limit < 1:
        raise SlackError("invalid_limit")
    start = decode_cursor(text_param(params, "cursor"))
    end = start + min(limit, MAX_LIMIT)
    following = encode_cursor(end) if end < len(items) else ""
    return items[start:end], {"next_cursor": following}


def encode_cursor(offset: int) -> str:
    return base64.b64encode(f"offset:{offset}".encode()).decode()


def decode_cursor(cursor: str) -> int:
    if not cursor:
        return 0
    try:
        kind, _, offset = base64.b64decode(cursor, validate=True).decode().partition(":")
        if kind == "offset" and offset.isdigit():
            return int(offset)
    except (binascii.Error, UnicodeDecodeError):
        pass
    raise SlackError("invalid_cursor")


def visible(channel: Channel, types: set[str], exclude_archived: bool) -> bool:
    """What a bot token lists: public channels, private ones it is in, and its DMs, of the asked types."""
    if channel.deleted or (exclude_archived and channel.archived):
        return False
    if channel.is_im:
        return "im" in types
    if channel.private:
        return "private_channel" in types and channel.bot_member
    return "public_channel" in types


def conversations_list(ctx: Context, params: Params) -> Json:
    types = {t for t in text_param(params, "types").split(",") if t} or {"public_channel"}
    if not types <= set(CONVERSATION_TYPES):
        raise SlackError("invalid_types")
    exclude_archived = flag_param(params, "exclude_archived")
    listed = [c.to_api() for c in ctx.workspace.channels.values() if visible(c, types, exclude_archived)]
    channels, metadata = page(listed, params)
    return {"channels": channels, "response_metadata": metadata}


def users_list(ctx: Context, params: Params) -> Json:
    """Every member, the bot user included. Slackbot (USLACKBOT), which real workspaces also list, is
    not emulated."""
    team = ctx.workspace.identity.team_id
    members, metadata = page([u.to_api(team) for u in ctx.workspace.users.values()], params)
    return {"members": members, "cache_ts": int(time.time()), "response_metadata": metadata}


METHODS: dict[str, Method] = {"conversations.list": conversations_list, "users.list": users_list}
