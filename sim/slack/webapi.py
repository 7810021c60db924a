"""The Web API methods a chat-ops bot calls, answering with Slack's field names and error strings.

Each method is a plain function of the workspace and the call's parameters; transport, auth and limits
live in `emulator`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sim.slack import blockkit, schema
from sim.slack.transcript import Channel, Ephemeral, Json, Message, Workspace

MAX_TEXT = 40_000


class SlackError(Exception):
    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


@dataclass
class Context:
    workspace: Workspace
    issue_ws_url: Callable[[], str]
    """apps.connections.open: a fresh one-time Socket Mode URL."""
    triggers: dict[str, float] = field(default_factory=dict)
    """trigger_id → wall time issued; views.open accepts one for `trigger_ttl` seconds."""
    trigger_ttl: float = 3.0
    views: list[Json] = field(default_factory=list)
    base_url: Callable[[], str] = lambda: ""
    """The emulator's own `http://host:port`, for the upload and file URLs it hands out."""
    max_file_bytes: int = 1 << 30
    """files.getUploadURLExternal refuses a larger `length` (slack_sdk's MAX_V2_FILE_SIZE, 1 GB)."""
    homes: dict[str, Json] = field(default_factory=dict)
    """user id → the App Home view views.publish last published for them."""
    home_tab_enabled: bool = True
    """The app's manifest turns the Home tab on (`features.app_home.home_tab_enabled`); off, views.publish
    answers `not_enabled`."""
    bot_scopes: frozenset[str] | None = None
    """The bot token's scopes (`SlackConfig.bot_scopes`); None grants every one."""
    later: Callable[[float, Callable[[], None]], None] = lambda delay, action: None
    """Run `action` after `delay` wall seconds on the emulator's loop (chat.scheduleMessage)."""


Params = dict[str, Any]
Method = Callable[[Context, Params], Json]


# -- parameter parsing --------------------------------------------------------------------------
def text_param(params: Params, key: str) -> str:
    value = params.get(key)
    return "" if value is None else str(value)


def flag_param(params: Params, key: str) -> bool:
    return params.get(key) in (True, "true", "1", 1)


def json_param(params: Params, key: str, error: str) -> Any:
    value = params.get(key)
    if isinstance(value, str) and value:
        try:
            return json.loads(value)
        except ValueError as exc:
            raise SlackError(error) from exc
    return value


def blocks_param(params: Params) -> list[Json]:
    """The message's blocks, or Slack's refusal: `invalid_blocks_format` for blocks that are not a JSON
    array, `invalid_blocks` with each finding for blocks that break Block Kit's rules."""
    blocks = json_param(params, "blocks", "invalid_blocks_format")
    if blocks is None or blocks == "":
        return []
    if not isinstance(blocks, list):
        raise SlackError("invalid_blocks_format")
    problems = blockkit.check_message_blocks(blocks)
    if problems:
        raise invalid_blocks(problems)
    return blocks


def invalid_blocks(problems: list[schema.Problem]) -> SlackError:
    """Slack's answer to blocks that break the rules: each finding in `errors`, and again with an
    `[ERROR]` prefix in `response_metadata.messages` (a real chat.postMessage answer, quoted whole in a
    slack_sdk SlackApiError: stoiveyp/Slack.NetStandard#60 shows the same `errors`)."""
    lines = schema.format_problems(problems)
    return SlackError("invalid_blocks", errors=lines, response_metadata={"messages": error_lines(lines)})


def error_lines(lines: list[str]) -> list[str]:
    return [f"[ERROR] {line}" for line in lines]


def message_content(params: Params) -> tuple[str, list[Json]]:
    text, blocks = text_param(params, "text"), blocks_param(params)
    if not text and not blocks:
        raise SlackError("no_text")
    if len(text) > MAX_TEXT:
        raise SlackError("msg_too_long")
    return text, blocks


def channel_param(ctx: Context, params: Params) -> str:
    channel = ctx.workspace.resolve_channel(text_param(params, "channel"))
    if channel is None:
        raise SlackError("channel_not_found")
    return channel.id


def thread_param(ws: Workspace, channel_id: str, thread_ts: str) -> str:
    """The thread a post with this `thread_ts` lands in: a reply's ts names its parent's thread, as in
    Slack, and an unknown ts posts to the channel itself."""
    parent = ws.messages.get((channel_id, thread_ts))
    if parent is None:
        return ""
    return parent.thread_ts or thread_ts


def user_param(ctx: Context, params: Params, key: str = "user") -> str:
    user = text_param(params, key)
    if user not in ctx.workspace.users:
        raise SlackError("user_not_found")
    return user


# -- methods ------------------------------------------------------------------------------------
def api_test(ctx: Context, params: Params) -> Json:
    args = {k: v for k, v in params.items() if k != "token"}
    return {"args": args} if args else {}


def auth_test(ctx: Context, params: Params) -> Json:
    """docs.slack.dev/reference/methods/auth.test: `enterprise_id` only for a workspace in a Grid org."""
    ident = ctx.workspace.identity
    return {
        "url": f"https://{ident.team_domain}.slack.com/",
        "team": ident.team_name,
        "user": ident.bot_name,
        "team_id": ident.team_id,
        "user_id": ident.bot_user_id,
        "bot_id": ident.bot_id,
        "app_id": ident.app_id,
        "is_enterprise_install": False,
        **({"enterprise_id": ident.enterprise_id} if ident.enterprise_id else {}),
    }


def writable_channel(ctx: Context, params: Params) -> str:
    """A channel the bot may post in: chat.postMessage and chat.postEphemeral answer `channel_not_found`
    (unknown or deleted), `is_archived` ("Channel has been archived.") and `not_in_channel`, as Slack's
    method references list them (docs.slack.dev/reference/methods/chat.postMessage, …/chat.postEphemeral).
    A private channel the bot is not in is invisible to it, so `channel_not_found` there too (what
    troubleshooting guides report, e.g. bundle.social/slack-api/errors; the references do not say)."""
    return writable(ctx.workspace.resolve_channel(text_param(params, "channel")))


def writable(channel: Channel | None, *, unknown: str = "channel_not_found") -> str:
    """The one membership check of every method that posts (chat.*, files.completeUploadExternal): the
    channel's id, or Slack's refusal. `unknown` names the answer for a channel the API does not know (none,
    deleted, or private without the bot), which differs between methods."""
    if channel is None or (channel.private and not channel.bot_member):
        raise SlackError(unknown)
    if channel.archived:
        raise SlackError("is_archived")
    if not channel.bot_member:
        raise SlackError("not_in_channel")
    return channel.id


def chat_post_message(ctx: Context, params: Params) -> Json:
    ws, ident = ctx.workspace, ctx.workspace.identity
    channel_id = writable_channel(ctx, params)
    text, blocks = message_content(params)
    thread_ts = thread_param(ws, channel_id, text_param(params, "thread_ts"))
    message = ws.post(
        Message(
            channel=channel_id,
            ts=ws.clock.next(),
            text=text,
            blocks=blocks,
            user=ident.bot_user_id,
            bot_id=ident.bot_id,
            thread_ts=thread_ts,
            reply_broadcast=flag_param(params, "reply_broadcast"),
            metadata=json_param(params, "metadata", "invalid_metadata_format"),
        )
    )
    return {"channel": channel_id, "ts": message.ts, "message": message.to_api(ident.team_id, ident.app_id)}


def _own_message(ctx: Context, params: Params, refusal: str) -> Message:
    channel_id = channel_param(ctx, params)
    message = ctx.workspace.messages.get((channel_id, text_param(params, "ts")))
    if message is None or message.deleted:
        raise SlackError("message_not_found")
    if message.bot_id != ctx.workspace.identity.bot_id:
        raise SlackError(refusal)
    return message


def chat_update(ctx: Context, params: Params) -> Json:
    ident = ctx.workspace.identity
    message = _own_message(ctx, params, "cant_update_message")
    if ctx.workspace.channels[message.channel].archived:
        # "The message cannot be edited within a frozen, archived or deleted channel."
        # (docs.slack.dev/reference/methods/chat.update)
        raise SlackError("is_inactive")
    has_text, has_blocks = "text" in params, "blocks" in params
    if not has_text and not has_blocks:
        raise SlackError("no_text")
    text = text_param(params, "text") if has_text else ("" if has_blocks else message.text)
    blocks = blocks_param(params) if has_blocks else message.blocks
    if len(text) > MAX_TEXT:
        raise SlackError("msg_too_long")
    ctx.workspace.edit(message, text=text, blocks=blocks)
    if "metadata" in params:
        message.metadata = json_param(params, "metadata", "invalid_metadata_format")
    api = message.to_api(ident.team_id, ident.app_id)
    return {"channel": message.channel, "ts": message.ts, "text": text, "message": api}


def chat_delete(ctx: Context, params: Params) -> Json:
    message = _own_message(ctx, params, "cant_delete_message")
    message.deleted = True
    ctx.workspace.changed()
    return {"channel": message.channel, "ts": message.ts}


def chat_post_ephemeral(ctx: Context, params: Params) -> Json:
    ws = ctx.workspace
    channel_id = writable_channel(ctx, params)
    user = user_param(ctx, params)
    text, blocks = message_content(params)
    channel = ws.channels[channel_id]
    if user not in channel.members:
        raise SlackError("user_not_in_channel")
    ephemeral = Ephemeral(
        channel_id, ws.clock.next(), user, text, blocks, "chat.postEphemeral", text_param(params, "thread_ts")
    )
    ws.add_ephemeral(ephemeral)
    return {"message_ts": ephemeral.ts}


def conversations_open(ctx: Context, params: Params) -> Json:
    ws = ctx.workspace
    if params.get("channel"):
        channel = ws.channels.get(text_param(params, "channel"))
        if channel is None or channel.deleted:
            raise SlackError("channel_not_found")
        return {"channel": channel.to_api() if flag_param(params, "return_im") else {"id": channel.id}}
    users = [u for u in text_param(params, "users").split(",") if u]
    if not users:
        raise SlackError("users_list_not_supplied")
    if len(users) > 1:
        raise SlackError("not_supported_by_emulator", detail="multi-person DMs are not emulated")
    if users[0] not in ws.users or ws.users[users[0]].is_bot:
        raise SlackError("user_not_found")
    already_open = ("D" + users[0].removeprefix("U")) in ws.channels
    channel = ws.open_dm(users[0])
    shown = channel.to_api() if flag_param(params, "return_im") else {"id": channel.id}
    return {"channel": shown, "already_open": already_open, "no_op": already_open}


def conversations_info(ctx: Context, params: Params) -> Json:
    channel = ctx.workspace.channels.get(text_param(params, "channel"))
    if channel is None or channel.deleted or (channel.private and not channel.bot_member):
        raise SlackError("channel_not_found")
    return {"channel": channel.to_api()}


def history_scope_checked(ctx: Context, channel_id: str) -> None:
    """conversations.history and .replies need the history scope of the conversation's type
    (docs.slack.dev/reference/methods/conversations.history: channels:history, groups:history, im:history,
    mpim:history); without it Slack answers `missing_scope` with the scope `needed` and those `provided`."""
    if ctx.bot_scopes is None:
        return
    channel = ctx.workspace.channels[channel_id]
    needed = "im:history" if channel.is_im else "groups:history" if channel.private else "channels:history"
    if needed not in ctx.bot_scopes:
        raise SlackError("missing_scope", needed=needed, provided=",".join(sorted(ctx.bot_scopes)))


def conversations_history(ctx: Context, params: Params) -> Json:
    channel_id = channel_param(ctx, params)
    history_scope_checked(ctx, channel_id)
    limit = int(params.get("limit") or 100)
    listed = ctx.workspace.history(channel_id)
    return {"messages": listed_messages(ctx, params, listed[:limit]), "has_more": len(listed) > limit}


def conversations_replies(ctx: Context, params: Params) -> Json:
    channel_id = channel_param(ctx, params)
    history_scope_checked(ctx, channel_id)
    thread = ctx.workspace.thread_of(channel_id, text_param(params, "ts"))
    if not thread:
        raise SlackError("thread_not_found")
    return {"messages": listed_messages(ctx, params, thread), "has_more": False}


def listed_messages(ctx: Context, params: Params, messages: list[Message]) -> list[Json]:
    """Messages as conversations.history and .replies list them: a message's `metadata` only when asked
    with `include_all_metadata` ("Return all metadata associated with messages. Defaults to false.",
    docs.slack.dev/reference/methods/conversations.history, …/conversations.replies)."""
    ident = ctx.workspace.identity
    listed = [m.to_api(ident.team_id, ident.app_id) for m in messages]
    if not flag_param(params, "include_all_metadata"):
        for message in listed:
            message.pop("metadata", None)
    return listed


def users_info(ctx: Context, params: Params) -> Json:
    user = ctx.workspace.users[user_param(ctx, params)]
    return {"user": user.to_api(ctx.workspace.identity.team_id)}


def chat_get_permalink(ctx: Context, params: Params) -> Json:
    """docs.slack.dev/reference/methods/chat.getPermalink: `https://<domain>.slack.com/archives/<channel>/
    p<ts without its dot>`, and for a thread reply `?thread_ts=<parent>&cid=<channel>`."""
    channel_id = channel_param(ctx, params)
    message = ctx.workspace.messages.get((channel_id, text_param(params, "message_ts")))
    if message is None or message.deleted:
        raise SlackError("message_not_found")
    domain = ctx.workspace.identity.team_domain
    link = f"https://{domain}.slack.com/archives/{channel_id}/p{message.ts.replace('.', '')}"
    if message.thread_ts and message.thread_ts != message.ts:
        link += f"?thread_ts={message.thread_ts}&cid={channel_id}"
    return {"channel": channel_id, "permalink": link}


REACTION_NAME = re.compile(r"[a-z0-9_+'-]+(::skin-tone-[2-6])?")
"""An emoji name as Slack spells one (`thumbsup`, `+1`, `wave::skin-tone-3`), without colons."""


def reactions_add(ctx: Context, params: Params) -> Json:
    """docs.slack.dev/reference/methods/reactions.add: `channel`, `timestamp`, `name`; `already_reacted`
    when the bot has, `invalid_name` for a name that is no emoji name. Custom emoji are not known, so
    any well-formed name counts as one."""
    channel_id = channel_param(ctx, params)
    name = text_param(params, "name")
    if not REACTION_NAME.fullmatch(name):
        raise SlackError("invalid_name")
    message = ctx.workspace.messages.get((channel_id, text_param(params, "timestamp")))
    if message is None or message.deleted:
        raise SlackError("message_not_found")
    if ctx.workspace.channels[channel_id].archived:
        raise SlackError("is_archived")
    users = message.reactions.setdefault(name, [])
    if ctx.workspace.identity.bot_user_id in users:
        raise SlackError("already_reacted")
    users.append(ctx.workspace.identity.bot_user_id)
    ctx.workspace.changed()
    return {}


def apps_connections_open(ctx: Context, params: Params) -> Json:
    return {"url": ctx.issue_ws_url()}


BOT_METHODS: dict[str, Method] = {
    "api.test": api_test,
    "auth.test": auth_test,
    "chat.postMessage": chat_post_message,
    "chat.update": chat_update,
    "chat.delete": chat_delete,
    "chat.postEphemeral": chat_post_ephemeral,
    "conversations.open": conversations_open,
    "conversations.info": conversations_info,
    "conversations.history": conversations_history,
    "conversations.replies": conversations_replies,
    "users.info": users_info,
    "chat.getPermalink": chat_get_permalink,
    "reactions.add": reactions_add,
}
APP_METHODS: dict[str, Method] = {"apps.connections.open": apps_connections_open, "api.test": api_test}
