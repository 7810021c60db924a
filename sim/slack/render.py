"""A plain-text, Slack-like rendering of a transcript snapshot, for the demo and for reading failed tests."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from sim.slack.transcript import Json

INDENT = "    "


def render_text(snapshot: Json) -> str:
    """Channels in order, threads indented under their parent, edits, deletions and ephemerals marked."""
    names = {user["id"]: user["name"] for user in snapshot.get("users", [])}
    sections = []
    for channel in snapshot.get("channels", []):
        lines = _channel_lines(channel, snapshot, names)
        if lines:
            sections.append("\n".join([_channel_title(channel, names), *lines]))
    return "\n\n".join(sections) + "\n"


def render_blocks(blocks: list[Json]) -> list[str]:
    lines: list[str] = []
    for block in blocks:
        lines.extend(_block_lines(block))
    return lines


def _channel_title(channel: Json, names: dict[str, str]) -> str:
    if channel.get("is_im"):
        return f"DM with {names.get(channel.get('user', ''), channel.get('user'))} ({channel['id']})"
    return f"#{channel['name']} ({channel['id']})"


def _channel_lines(channel: Json, snapshot: Json, names: dict[str, str]) -> list[str]:
    cid = channel["id"]
    messages = channel.get("messages", [])
    parents = {m["ts"] for m in messages if not m.get("thread_ts")}
    entries: list[tuple[str, list[str]]] = []
    replies: dict[str, list[tuple[str, list[str]]]] = {}
    for message in messages:
        item = (message["ts"], _message_lines(message))
        _place(item, message.get("thread_ts", ""), parents, entries, replies)
    for ephemeral in snapshot.get("ephemerals", []):
        if ephemeral["channel"] == cid:
            item = (ephemeral["message_ts"], _ephemeral_lines(ephemeral, names))
            _place(item, ephemeral.get("thread_ts", ""), parents, entries, replies)
    for action in snapshot.get("actions", []):
        if action["channel"] == cid:
            entries.append((action["ts"], [_action_line(action, names)]))
    lines: list[str] = []
    for ts, body in sorted(entries, key=lambda entry: entry[0]):
        lines.extend(INDENT + line for line in body)
        for _, reply in sorted(replies.get(ts, []), key=lambda entry: entry[0]):
            lines.extend(
                INDENT * 2 + "↳ " + line if i == 0 else INDENT * 2 + "  " + line
                for i, line in enumerate(reply)
            )
    return lines


def _place(
    item: tuple[str, list[str]],
    thread_ts: str,
    parents: set[str],
    entries: list[tuple[str, list[str]]],
    replies: dict[str, list[tuple[str, list[str]]]],
) -> None:
    if thread_ts and thread_ts in parents and thread_ts != item[0]:
        replies.setdefault(thread_ts, []).append(item)
    else:
        entries.append(item)


def _clock(ts: str) -> str:
    return dt.datetime.fromtimestamp(float(ts), dt.UTC).strftime("%H:%M:%S")


def _message_lines(message: Json) -> list[str]:
    head = f"[{_clock(message['ts'])}] {message.get('username') or message.get('user')}:"
    if message.get("deleted"):
        return [f"{head} (This message was deleted.)"]
    edited = " (edited)" if message.get("edited") else ""
    text, blocks, shared = message.get("text", ""), message.get("blocks") or [], message.get("files") or []
    body = [head + edited] if shared and not text and not blocks else _with_body(head, text, blocks, edited)
    reactions = message.get("reactions") or {}
    shown = "  " + " ".join(f":{name}: {len(users)}" for name, users in reactions.items())
    return body + [f"  {file_line(f)}" for f in shared] + ([shown] if reactions else [])


def file_line(shared: Json) -> str:
    """A shared file as a phone shows its card: name, size and title, never the content."""
    title = shared.get("title") or ""
    suffix = f" — {title}" if title and title != shared.get("name") else ""
    return f"[file: {shared.get('name')} ({human_size(int(shared.get('size') or 0))}){suffix}]"


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _ephemeral_lines(ephemeral: Json, names: dict[str, str]) -> list[str]:
    author = "Slackbot" if ephemeral.get("source") == "slack" else "gpubot"
    who = names.get(ephemeral["user"], ephemeral["user"])
    head = f"[{_clock(ephemeral['message_ts'])}] {author} (only visible to {who}):"
    if ephemeral.get("deleted"):
        return [f"{head} (deleted)"]
    edited = " (edited)" if len(ephemeral.get("revisions", [])) > 1 else ""
    return _with_body(head, ephemeral.get("text", ""), ephemeral.get("blocks") or [], edited)


def _with_body(head: str, text: str, blocks: list[Json], suffix: str) -> list[str]:
    if not blocks:
        first, *rest = shown(text or "").splitlines() or [""]
        return [f"{head} {first}{suffix}", *(f"  {line}" for line in rest)]
    return [f"{head}{suffix}", *(f"  | {line}" for line in render_blocks(blocks))]


def _action_line(action: Json, names: dict[str, str]) -> str:
    who = names.get(action["user"], action["user"])
    if action["kind"] == "command":
        return f"[{_clock(action['ts'])}] {who} typed: {action['detail'].strip()}"
    if action["kind"] == "click":
        return f"[{_clock(action['ts'])}] {who} clicked [{action['detail']}]"
    return f"[{_clock(action['ts'])}] {who} {action['kind']}: {action['detail']}"


DATE_TOKEN = re.compile(r"<!date\^\d+\^[^|>]*\|([^>]*)>")
"""`<!date^1392734382^{date_short_pretty} at {time}|fallback>`: the transcript has no reader's time zone,
so it shows the fallback (docs.slack.dev, "Formatting text for app surfaces", "Date formatting")."""


def shown(mrkdwn: str) -> str:
    """What a Slack client displays for escaped mrkdwn: date tokens as their fallback, and the three
    control characters decoded (the same page, "Escaping text": &amp; &lt; &gt;)."""
    dated = DATE_TOKEN.sub(lambda match: match.group(1), mrkdwn)
    return dated.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _text_of(obj: Any) -> str:
    if isinstance(obj, dict):
        if obj.get("type") == "image":
            return f"[image: {obj.get('alt_text', '')}]"
        text = str(obj.get("text", ""))
        return shown(text) if obj.get("type") == "mrkdwn" else text
    return str(obj or "")


def _element(element: Any) -> str:
    if isinstance(element, dict) and element.get("type") == "button":
        style = f" ({element['style']})" if element.get("style") else ""
        return f"[{_text_of(element.get('text'))}]{style}"
    if isinstance(element, dict):
        return f"<{element.get('type', '?')}>"
    return str(element)


def _block_lines(block: Json) -> list[str]:
    kind = block.get("type")
    if kind == "header":
        return [f"== {_text_of(block.get('text'))} =="]
    if kind == "section":
        lines = _text_of(block.get("text")).splitlines() if block.get("text") else []
        if block.get("fields"):
            lines.append(" | ".join(_text_of(f) for f in block["fields"]))
        if block.get("accessory"):
            lines.append(_element(block["accessory"]))
        return lines or [""]
    if kind == "context":
        return [" · ".join(_text_of(e) for e in block.get("elements", []))]
    if kind == "actions":
        return [" ".join(_element(e) for e in block.get("elements", []))]
    if kind == "divider":
        return ["---"]
    if kind == "image":
        return [f"[image: {block.get('alt_text', '')}]"]
    if kind == "input":
        return _input_lines(block)
    return [f"<{kind} block>"]


def render_view(view: Json) -> list[str]:
    """A modal as its reader sees it: the title, each block, then its buttons."""
    buttons = " ".join(f"[{_text_of(view[key])}]" for key in ("close", "submit") if view.get(key))
    return [f"== {_text_of(view.get('title'))} ==", *render_blocks(view.get("blocks") or []), buttons]


def _input_lines(block: Json) -> list[str]:
    """`Label (optional): [value]` with a select's options, then the hint, indented."""
    element = block.get("element") or {}
    optional = " (optional)" if block.get("optional") else ""
    head = f"{_text_of(block.get('label'))}{optional}:"
    if element.get("type") in ("static_select", "radio_buttons"):
        chosen = (element.get("initial_option") or {}).get("value")
        lines = [head]
        for option in element.get("options") or []:
            mark = "(x)" if option.get("value") == chosen else "( )"
            about = f" — {_text_of(option['description'])}" if option.get("description") else ""
            lines.append(f"  {mark} {_text_of(option.get('text'))}{about}")
    else:
        value = element.get("initial_value")
        shown_value = f"[{value}]" if value else f"[ ] {_text_of(element.get('placeholder'))}".rstrip()
        lines = [f"{head} {shown_value}"]
    if block.get("hint"):
        lines.append(f"  {_text_of(block['hint'])}")
    return lines
