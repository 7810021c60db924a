"""Adapter: the only place that knows Block Kit, turning core notices into (fallback text, blocks).

Pure functions, tested against golden JSON. Core text is escaped (Slack reads `&`, `<`, `>` as markup) and
fitted into Block Kit's limits here, so no notice, however long, makes Slack answer `invalid_blocks`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from bot.core import notices, reaping

Block = dict[str, Any]

RELEASE_ACTION = "gpubot_release"
KEEP_ACTION = "gpubot_keep"
KEEP_ASKED_ACTION = "gpubot_keep_asked"
EXTEND_ACTION = "gpubot_extend"
LOGS_ACTION = "gpubot_logs"
ASK_ACTION = "gpubot_ask"
"""Button action ids; handlers route clicks on them, and the value is the workload's `namespace/name`."""

MAX_BLOCKS = 50
SECTION_TEXT_MAX = 3000
FALLBACK_TEXT_MAX = 4000
"""Slack truncates longer top-level text and calls 4,000 the sensible ceiling for notifications."""
BUTTON_VALUE_MAX = 2000


class Rendered(NamedTuple):
    text: str
    """The notification and screen-reader fallback; always sent alongside the blocks."""
    blocks: list[Block]


def render(notice: notices.Notice) -> Rendered:
    if isinstance(notice, notices.ThreadStatus):
        return render_thread_status(notice)
    if isinstance(notice, notices.ChannelEpisode):
        return render_episode(notice)
    if isinstance(notice, notices.Reminder):
        return render_reminder(notice)
    if isinstance(notice, notices.UsageReport):
        return render_usage(notice)
    if isinstance(notice, notices.Reply) and notice.mention:
        return mentioning(notice.mention, render_text(notice.text, notice.output))
    return render_text(notice.text, notice.output)


def mentioning(user: str, rendered: Rendered) -> Rendered:
    """The user's mention before the text: in the fallback text, which is what notifies, and in the first
    section, which is what is shown."""
    tag = f"<@{escape(user)}> "
    first, *rest = rendered.blocks
    shown = {**first, "text": {**first["text"], "text": clip(tag + first["text"]["text"], SECTION_TEXT_MAX)}}
    return Rendered(clip(tag + rendered.text, FALLBACK_TEXT_MAX), [shown, *rest])


def render_reminder(reminder: notices.Reminder) -> Rendered:
    blocks = sections(reminder.text)[: MAX_BLOCKS - 2]
    if reminder.thread_channel:
        where = f"<#{escape(reminder.thread_channel)}>"
        said = (
            f"I could not post this in its thread in {where}: {escape(reminder.thread_note)}"
            if reminder.thread_note
            else f"its thread is in {where}"
        )
        blocks.append(context([said], block_id="gpubot_where"))
    elif reminder.thread_note:
        blocks.append(context([escape(reminder.thread_note)], block_id="gpubot_where"))
    if reminder.buttons.any:
        blocks.append(button_row(reminder.workload, reminder.buttons))
    return Rendered(fallback(reminder.text), blocks)


def render_usage(report: notices.UsageReport) -> Rendered:
    """A title, its lines, then the rows by user and by channel as mentions, which Slack shows as names."""
    blocks = usage_blocks(report)[:MAX_BLOCKS]
    return Rendered(fallback("\n".join((report.title, *report.lines))), blocks)


def usage_blocks(report: notices.UsageReport) -> list[Block]:
    text = "\n".join((f"*{escape(report.title)}*", *(escape(line) for line in report.lines)))
    blocks = [section(text)]
    for heading, rows, mark in (("By user", report.by_user, "@"), ("By channel", report.by_channel, "#")):
        if rows:
            lines = [f"*{heading}*"] + [f"• <{mark}{escape(who)}> {escape(amount)}" for who, amount in rows]
            blocks += [section(chunk) for chunk in line_chunks(lines)]
    if report.note:
        blocks.append(context([escape(report.note)]))
    return blocks


def line_chunks(lines: list[str]) -> list[str]:
    """Whole lines packed into as few section texts as they fit in."""
    chunks: list[str] = []
    for line in lines:
        line = clip(line, SECTION_TEXT_MAX)
        if chunks and len(chunks[-1]) + 1 + len(line) <= SECTION_TEXT_MAX:
            chunks[-1] += "\n" + line
        else:
            chunks.append(line)
    return chunks


HOME_MAX_BLOCKS = 100
"""docs.slack.dev/reference/views/home-tab-views: "blocks … Max of 100 blocks"."""
HOME_WORKLOADS_SHOWN = 20
"""Two blocks each (the line and its buttons): 40 of the 100, leaving room for spend, pools and usage."""


def render_home(home: notices.Home) -> dict[str, Any]:
    """The Home tab view for views.publish: sections a phone reads top-down, buttons under each workload."""
    blocks: list[Block] = [header("Your GPU workloads")]
    if home.problem:
        blocks.append(section(f":warning: {escape(home.problem)}"))
    for index, item in enumerate(home.workloads[:HOME_WORKLOADS_SHOWN]):
        blocks.append(section(escape(item.line), block_id=f"gpubot_workload_{index}"))
        if item.buttons.any:
            row = button_row(item.workload, item.buttons)
            blocks.append({**row, "block_id": f"gpubot_actions_{index}"})
    hidden = len(home.workloads) - HOME_WORKLOADS_SHOWN
    if not home.workloads and not home.problem:
        blocks.append(section(escape("None running. Start one with `/gpu run IMAGE`.")))
    elif hidden > 0:
        blocks.append(context([escape(f"and {hidden} more: `/gpu status` lists them all")]))
    blocks += [divider(), *usage_blocks(home.spend), divider(), header("GPU pools now")]
    blocks.append(section(escape("\n".join(home.pools) or "No GPU pool found.")))
    if home.warm:
        blocks += [
            header("Warm schedules"),
            *(section(c) for c in line_chunks([escape(w) for w in home.warm])),
        ]
    if home.everyone is not None:
        blocks += [divider(), *usage_blocks(home.everyone)]
    if home.updated is not None:
        blocks.append(context([f"Updated {date_token(home.updated)}, each time you open this tab"]))
    if len(blocks) > HOME_MAX_BLOCKS:
        blocks = [*blocks[: HOME_MAX_BLOCKS - 1], context([escape("More than fits here: `/gpu usage`")])]
    return {"type": "home", "callback_id": "gpubot_home", "blocks": blocks}


def render_text(text: str, output: tuple[str, ...] = ()) -> Rendered:
    """A plain reply or ephemeral: escaped, split into sections that each fit; then the pod's output, if
    any, as one code block of the last lines that fit in a section."""
    blocks = sections(text)[: MAX_BLOCKS - 1 if output else MAX_BLOCKS]
    if output:
        blocks.append(section(code_block(output), block_id="gpubot_output"))
    return Rendered(fallback(text), blocks)


CODE_FENCE = "```"
CODE_ROOM = SECTION_TEXT_MAX - 2 * len(CODE_FENCE) - 2
"""What a section holds of output lines between the fences and their line ends."""


def code_block(lines: tuple[str, ...]) -> str:
    """The last lines that fit in a section between fences, escaped; a fence inside the output is broken
    with a zero-width space so it cannot end the block early. A lone line too long keeps its end."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        shown = _code_line(line)
        if used + len(shown) + 1 > CODE_ROOM:
            if not kept:
                kept.append("…" + shown[-(CODE_ROOM - 1) :])
            break
        kept.append(shown)
        used += len(shown) + 1
    return CODE_FENCE + "\n" + "\n".join(reversed(kept)) + "\n" + CODE_FENCE


def code_block_fits(lines: Sequence[str]) -> bool:
    """Whether `code_block` shows every one of these lines, whole: what `/gpu logs` asks before deciding
    that the answer needs a file."""
    return sum(len(_code_line(line)) + 1 for line in lines) <= CODE_ROOM


def _code_line(line: str) -> str:
    return escape(line).replace(CODE_FENCE, "`\u200b``") or " "


def render_thread_status(status: notices.ThreadStatus) -> Rendered:
    """Five lines on a phone: the state now, what it is, what happened to it, the lease, the buttons."""
    owner = f" · <@{status.owner}>" if status.owner else ""
    summary = (
        f"*{escape(status.headline)}*\n`{escape(status.workload)}`{owner}"
        f" · {escape(notices.format_gpus(status.gpus, status.profile))} · `{escape(status.image)}`"
    )
    blocks = [section(summary, block_id="gpubot_summary")]
    alt_text = f"{status.workload}: {status.headline}"
    if status.timeline:
        blocks.append(context([escape(" · ".join(status.timeline))], block_id="gpubot_timeline"))
    if status.problem is not None:
        problem = f":warning: *{escape(status.problem.summary)}*\n{escape(status.problem.fix)}"
        blocks.append(section(problem, block_id="gpubot_problem"))
        alt_text += f" — {status.problem.summary}"
    facts = [escape(fact) for fact in (status.ending, status.note) if fact]
    if status.lease_end is not None:
        facts.append(f"lease ends {date_token(status.lease_end)}")
    if facts:
        blocks.append(context(facts, block_id="gpubot_facts"))
    if status.connect is not None:
        blocks.append(section(connect_text(status.connect), block_id="gpubot_connect"))
    if status.buttons.any:
        blocks.append(button_row(status.workload, status.buttons))
    return Rendered(fallback(alt_text), blocks)


def connect_text(connect: notices.Connect) -> str:
    """Copyable lines: each command whole in its own code span, the URL as a link."""
    shell = f"`{escape(connect.shell)}`"
    if not connect.forward:  # one line on a phone: nothing to forward
        return f"*Shell* from your machine, with your cluster credentials: {shell}"
    lines = ["*Connect* from your machine, with your cluster credentials:", f"`{escape(connect.forward)}`"]
    if connect.url:
        lines.append(f"then open <{escape(connect.url)}>")
    lines.append(f"Shell: {shell}")
    return "\n".join(lines)


def render_episode(episode: notices.ChannelEpisode) -> Rendered:
    icon = ":white_check_mark:" if episode.closed else ":arrows_counterclockwise:"
    blocks = [
        section(f"{icon} *{escape(episode.pool)}* · {escape(episode.headline)}", block_id="gpubot_episode")
    ]
    if episode.lines:
        blocks.append(
            section("\n".join(f"• {escape(line)}" for line in episode.lines), block_id="gpubot_log")
        )
    if episode.warning:
        blocks.append(section(f":warning: {escape(episode.warning)}", block_id="gpubot_warning"))
    return Rendered(fallback(f"{episode.pool}: {episode.headline}"), blocks)


def date_token(moment: datetime) -> str:
    """A time each reader sees in their own zone ("Today at 2:00 PM"), with UTC as the fallback for
    clients that cannot (docs.slack.dev, "Formatting text for app surfaces", "Date formatting")."""
    fallback = notices.utc_clock(moment)
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} at {{time}}|{fallback}>"


def button_row(workload: str, buttons: notices.Buttons) -> Block:
    """The buttons for the workload `namespace/name`, each carrying that key back as its value."""
    value = clip(workload, BUTTON_VALUE_MAX)
    elements: list[Block] = []
    if buttons.extend:
        elements.append(button("Extend lease", EXTEND_ACTION, value, style="primary"))
    if buttons.keep:
        elements.append(button("Keep it, I'm using it", KEEP_ACTION, value))
    if buttons.keep_asked:
        minutes = int(reaping.ASKED_KEEP.total_seconds() // 60)
        elements.append(button(f"Keep {minutes} min", KEEP_ASKED_ACTION, value))
    if buttons.logs:
        elements.append(button("Logs", LOGS_ACTION, value))
    if buttons.ask:
        elements.append(button("Ask for a GPU", ASK_ACTION, value))
    if buttons.release:
        release = button("Release GPU", RELEASE_ACTION, value, style="danger")
        release["confirm"] = {
            "title": plain(f"Release {clip(workload.rpartition('/')[2], 80)}?"),
            "text": plain("The pod is deleted and its GPU goes back to the pool."),
            "confirm": plain("Release"),
            "deny": plain("Keep it"),
        }
        elements.append(release)
    return {"type": "actions", "block_id": "gpubot_actions", "elements": elements}


# -- Block Kit pieces --------------------------------------------------------------------------------


def section(mrkdwn: str, *, block_id: str = "") -> Block:
    text = {"type": "mrkdwn", "text": clip(mrkdwn, SECTION_TEXT_MAX)}
    return {"type": "section", "text": text} | ({"block_id": block_id} if block_id else {})


def sections(text: str) -> list[Block]:
    """Escaped text as as many sections as it takes, split at line ends where possible."""
    chunks: list[str] = []
    current = ""
    for line in escape(text).split("\n"):
        while len(line) > SECTION_TEXT_MAX:
            if current:
                chunks.append(current)
                current = ""
            chunks.append(line[:SECTION_TEXT_MAX])
            line = line[SECTION_TEXT_MAX:]
        candidate = f"{current}\n{line}" if current else line
        if len(candidate) > SECTION_TEXT_MAX:
            chunks.append(current)
            candidate = line
        current = candidate
    if current or not chunks:
        chunks.append(current or " ")
    return [section(chunk) for chunk in chunks]


def header(text: str) -> Block:
    """block-kit/blocks/header-block: plain_text of at most 150 characters."""
    return {"type": "header", "text": plain(clip(text, 150))}


def divider() -> Block:
    return {"type": "divider"}


def context(texts: list[str], *, block_id: str = "") -> Block:
    elements = [{"type": "mrkdwn", "text": clip(t, SECTION_TEXT_MAX)} for t in texts[:10]]
    return {"type": "context", "elements": elements} | ({"block_id": block_id} if block_id else {})


def button(label: str, action_id: str, value: str, *, style: str = "") -> Block:
    element: Block = {
        "type": "button",
        "action_id": action_id,
        "text": plain(clip(label, 75)),
        "value": value,
    }
    if style:
        element["style"] = style
    return element


def plain(text: str) -> Block:
    return {"type": "plain_text", "text": text, "emoji": True}


def escape(text: str) -> str:
    """Slack's three control characters, so core text never turns into links or mentions; then each
    moment in it (`notices.clock_time`) as a date token, shown in the reader's own time zone."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return notices.moments(escaped, date_token)


def fallback(text: str) -> str:
    return clip(escape(text), FALLBACK_TEXT_MAX) or " "


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
