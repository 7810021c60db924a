"""chat.scheduleMessage: a message checked now, as chat.postMessage checks one, and posted at `post_at`.

docs.slack.dev/reference/methods/chat.scheduleMessage: `time_in_past` for a time not in the future,
`time_too_far` beyond 120 days, `invalid_time` for one that is no Unix time; the answer carries a
`scheduled_message_id` and a `delayed_message` echo.
"""

from __future__ import annotations

import functools
import itertools
import time

from sim.slack.transcript import Json, Message, Workspace
from sim.slack.webapi import (
    Context,
    Method,
    Params,
    SlackError,
    flag_param,
    message_content,
    text_param,
    thread_param,
    writable_channel,
)

MAX_AHEAD = 120 * 24 * 3600.0
_ids = itertools.count(1)


def post_at_param(params: Params, now: float) -> int:
    try:
        post_at = int(float(str(params.get("post_at"))))
    except ValueError as exc:
        raise SlackError("invalid_time") from exc
    if post_at <= now:
        raise SlackError("time_in_past")
    if post_at > now + MAX_AHEAD:
        raise SlackError("time_too_far")
    return post_at


def post_scheduled(ws: Workspace, scheduled: Message) -> None:
    """Post it when its time comes, stamped then and threaded as the thread stands then."""
    scheduled.ts = ws.clock.next()
    scheduled.thread_ts = thread_param(ws, scheduled.channel, scheduled.thread_ts)
    ws.post(scheduled)


def chat_schedule_message(ctx: Context, params: Params) -> Json:
    ws, ident = ctx.workspace, ctx.workspace.identity
    channel_id = writable_channel(ctx, params)
    text, blocks = message_content(params)
    now = time.time()
    post_at = post_at_param(params, now)
    scheduled = Message(
        channel=channel_id,
        ts="",
        text=text,
        blocks=blocks,
        user=ident.bot_user_id,
        bot_id=ident.bot_id,
        thread_ts=text_param(params, "thread_ts"),
        reply_broadcast=flag_param(params, "reply_broadcast"),
    )
    ctx.later(post_at - now, functools.partial(post_scheduled, ws, scheduled))
    echo: Json = {"type": "delayed_message", "subtype": "bot_message", "text": text, "bot_id": ident.bot_id}
    if blocks:
        echo["blocks"] = blocks
    return {
        "channel": channel_id,
        "scheduled_message_id": f"Q{next(_ids):010d}",
        "post_at": str(post_at),
        "message": echo,
    }


METHODS: dict[str, Method] = {"chat.scheduleMessage": chat_schedule_message}
