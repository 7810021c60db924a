"""What Slack shows for an app's reply to a user: an ack payload or a `response_url` POST.

`response_type: in_channel` posts in the channel, anything else is an ephemeral for the user;
`replace_original` / `delete_original` act on the message a button was clicked in. A response_url works
five times within thirty minutes, as Slack documents.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from sim.slack import blockkit
from sim.slack.transcript import Ephemeral, Json, Message, Workspace

MAX_USES = 5
LIFETIME = 30 * 60.0


@dataclass
class ResponseTarget:
    """Where replies to one command or click land."""

    user: str
    channel: str
    thread_ts: str = ""
    original: Message | Ephemeral | None = None
    issued: float = field(default_factory=time.time)
    uses: int = 0


class ResponseUrls:
    def __init__(self) -> None:
        self._targets: dict[str, ResponseTarget] = {}

    def issue(self, base_url: str, kind: str, target: ResponseTarget) -> str:
        hook = uuid.uuid4().hex
        self._targets[hook] = target
        return f"{base_url}/emulator/v1/response/{kind}/{hook}"

    def use(self, hook: str, *, now: float | None = None) -> ResponseTarget | str:
        """The target, or the error Slack answers with."""
        target = self._targets.get(hook)
        if target is None:
            return "no_active_hooks"
        if (time.time() if now is None else now) - target.issued > LIFETIME:
            return "expired_url"
        if target.uses >= MAX_USES:
            return "used_url"
        target.uses += 1
        return target


def refusal(body: Json | None) -> str:
    """Why Slack refuses a reply's blocks, or "" when it takes them. A response_url answers only with
    the error's name and HTTP 400, no findings (slackapi/java-slack-sdk#1017,
    sourcegraph/sourcegraph#49979, bugsink/bugsink#317 for the hooks.slack.com URLs)."""
    blocks = (body or {}).get("blocks")
    if blocks is None:
        return ""
    if not isinstance(blocks, list):
        return "invalid_blocks_format"
    return "invalid_blocks" if blockkit.check_message_blocks(blocks) else ""


def apply_response(ws: Workspace, target: ResponseTarget, body: Json | None, *, source: str) -> str:
    """Show `body` as Slack would; returns what happened (`ephemeral`, `in_channel`, `replaced`, ...)."""
    if not body:
        return "nothing"
    original = target.original
    if original is not None and _truthy(body.get("delete_original")):
        original.deleted = True
        ws.changed()
        return "deleted"
    text, blocks = str(body.get("text") or ""), _blocks(body.get("blocks"))
    if original is not None and _truthy(body.get("replace_original")):
        if isinstance(original, Message):
            ws.edit(original, text=text, blocks=blocks)
        else:
            original.text, original.blocks = text, blocks
            ws.edit_ephemeral(original)
        return "replaced"
    if not text and not blocks:
        return "nothing"
    thread_ts = str(body.get("thread_ts") or target.thread_ts)
    if body.get("response_type") == "in_channel":
        ident = ws.identity
        ws.post(
            Message(
                channel=target.channel,
                ts=ws.clock.next(),
                text=text,
                blocks=blocks,
                user=ident.bot_user_id,
                bot_id=ident.bot_id,
                thread_ts=thread_ts if (target.channel, thread_ts) in ws.messages else "",
            )
        )
        return "in_channel"
    ws.add_ephemeral(Ephemeral(target.channel, ws.clock.next(), target.user, text, blocks, source, thread_ts))
    return "ephemeral"


def _truthy(value: Any) -> bool:
    return value in (True, "true", "1", 1)


def _blocks(value: Any) -> list[Json]:
    return [block for block in value if isinstance(block, dict)] if isinstance(value, list) else []
