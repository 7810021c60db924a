"""Core: what gpubot tells people, as neutral frozen models, so services never know how a chat renders it.

`bot/adapters/slack_render.py` alone turns these into Block Kit; tests and other chats can read them as-is.
Time and money arrive here as numbers and leave as the short text a thread shows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from bot.core import explain


@dataclass(frozen=True)
class Buttons:
    release: bool = False
    extend: bool = False
    keep: bool = False
    """Keep an idle workload: the owner still needs it."""
    logs: bool = False
    """Show the pod's output: once its container has started, while the pod exists."""
    ask: bool = False
    """Ask the owners of idle GPUs for one: while it waits in line at a full pool."""
    keep_asked: bool = False
    """Keep it for `reaping.ASKED_KEEP` only: someone waiting asked for the GPU, the owner needs it a bit."""

    @property
    def any(self) -> bool:
        return self.release or self.extend or self.keep or self.keep_asked or self.logs or self.ask


@dataclass(frozen=True)
class Connect:
    """How to reach a running workload from one's own machine, with cluster credentials."""

    shell: str
    """The command for a shell in its container, e.g. `kubectl exec -it -n ns name -- sh`."""
    forward: str = ""
    """The command that forwards its ports to the same ports here; empty when it has none."""
    url: str = ""
    """What to open once forwarded: a notebook's URL with its token, read from its output."""


@dataclass(frozen=True)
class ThreadStatus:
    """The one status message at the root of a workload's thread, edited as the workload moves on.

    Compact enough for a phone: where it stands now (the headline), what it is, what has happened to this
    pod (the timeline), its lease and its buttons. It is edited for news only (`news`): a step inside the
    same stage reaches the timeline with the next edit, as each edit is a Slack call."""

    namespace: str
    name: str
    owner: str
    """The owner's Slack user id."""
    image: str
    gpus: int
    profile: str
    headline: str
    """Where things stand now, true until the next edit, e.g. "Running on gke-gpu-t4-1a2b"."""
    timeline: tuple[str, ...] = ()
    """What has happened to this pod, each with how long after the request, e.g. "node Ready +2m10s"."""
    problem: explain.Problem | None = None
    ending: str = ""
    """Set once the workload is over: what it held and cost, e.g. "held 1 GPU 2m00s: ≈ $0.02"."""
    lease_end: datetime | None = None
    """When the lease runs out; shown in each reader's own time zone. No countdown: a message is only
    edited for news, so one would freeze at its last edit and go on saying "in 3h" for hours."""
    buttons: Buttons = Buttons()
    note: str = ""
    """A line of context, e.g. when the node is usually ready."""
    connect: Connect | None = None
    """While it runs: how to reach it."""

    @property
    def workload(self) -> str:
        """`namespace/name`: what buttons carry back so a click names its workload."""
        return f"{self.namespace}/{self.name}"

    def news(self) -> ThreadStatus:
        """What is worth an edit: the status without its timeline and note, which only ride along."""
        return replace(self, timeline=(), note="")


@dataclass(frozen=True)
class Reply:
    """A message in a workload's thread: a milestone worth a notification, or a confirmation."""

    text: str
    output: tuple[str, ...] = ()
    """The last lines of the pod's output, shown as a code block under the text (a failure's evidence)."""
    mention: str = ""
    """A Slack user id to @-mention at the start, so a moment that matters notifies its owner."""


@dataclass(frozen=True)
class Reminder:
    """The reaper speaking to an owner, in the workload's thread or a DM, with what they can press."""

    text: str
    workload: str
    """`namespace/name`, carried back by the buttons."""
    buttons: Buttons = Buttons()
    thread_channel: str = ""
    """Set on a DM: the channel whose thread follows the workload, linked for the reader."""
    thread_note: str = ""
    """Set on a DM sent instead of a thread reply: why the thread could not take it, in plain words."""


@dataclass(frozen=True)
class Ephemeral:
    """An answer only the person who asked sees: usage errors, `/gpu status`, refusals, `/gpu logs`."""

    text: str
    output: tuple[str, ...] = ()
    """Lines of a pod's output, shown as a code block under the text; the renderer keeps the last that fit."""


@dataclass(frozen=True)
class ChannelEpisode:
    """The single channel message of one scale episode (scale-up to back at zero), edited as it goes."""

    pool: str
    headline: str
    lines: tuple[str, ...] = ()
    """What happened so far, oldest first, e.g. "scale-up for alice's train-1", "node Ready after 2m10s"."""
    warning: str = ""
    """Max size reached, provisioning far slower than usual; empty when all is well."""
    closed: bool = False
    """The pool is back at zero and the episode is over; its last line says what it cost."""


@dataclass(frozen=True)
class UsageReport:
    """`/gpu usage` and the App Home's spend: amounts already worded, people and channels as Slack ids,
    which only the renderer turns into names (a mention shows each reader the current name)."""

    title: str
    """E.g. "Your spend this week, since Monday 30 Nov (UTC)"."""
    lines: tuple[str, ...] = ()
    by_user: tuple[tuple[str, str], ...] = ()
    """(Slack user id, amount) rows, biggest first."""
    by_channel: tuple[tuple[str, str], ...] = ()
    """(Slack channel id, amount) rows: the channels runs were started from."""
    note: str = ""


@dataclass(frozen=True)
class HomeWorkload:
    line: str
    """What `/gpu status` says of it: phase, node, age, lease left, GPUs."""
    workload: str
    """`namespace/name`, carried back by its buttons."""
    buttons: Buttons = Buttons()


@dataclass(frozen=True)
class Home:
    """A user's App Home tab: their workloads with buttons, their spend, the pools now, the warm schedules,
    and for admins everyone's usage. Published whole each time; Slack keeps the last one per user."""

    workloads: tuple[HomeWorkload, ...]
    spend: UsageReport
    pools: tuple[str, ...]
    warm: tuple[str, ...] = ()
    everyone: UsageReport | None = None
    updated: datetime | None = None
    problem: str = ""
    """Why the workloads and pools are missing (the cluster could not be read), with what to do."""


Notice = ThreadStatus | Reply | Reminder | Ephemeral | ChannelEpisode | UsageReport


MOMENT = re.compile("\ue000(-?\\d+)\ue001")
"""A moment inside core text (`clock_time`); private-use marks, which no Slack or cluster text carries."""


def clock_time(moment: datetime) -> str:
    """A moment in a sentence, which the chat shows in each reader's own time zone (Slack's date token);
    text read anywhere else shows it in UTC (`plain_times`)."""
    return f"\ue000{int(moment.timestamp())}\ue001"


def utc_clock(moment: datetime) -> str:
    """A moment for readers with no time zone of their own: "Sat 14:05 UTC"."""
    return moment.astimezone(UTC).strftime("%a %H:%M UTC")


def moments(text: str, shown: Callable[[datetime], str] = utc_clock) -> str:
    """Text with each `clock_time` moment as `shown` gives it (UTC by default)."""
    return MOMENT.sub(lambda match: shown(datetime.fromtimestamp(int(match[1]), UTC)), text)


def format_elapsed(span: float | timedelta) -> str:
    """A duration (in seconds, or a timedelta) as threads show it: "45s", "1m05s", "2h03m"; negatives count
    as zero."""
    whole = max(0, math.floor(span.total_seconds() if isinstance(span, timedelta) else span))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def format_cost(dollars: float) -> str:
    """Money as people read it: "$0.42", "$12.50", "<$0.01" for a sliver above zero."""
    if 0 < dollars < 0.005:
        return "<$0.01"
    return f"${max(dollars, 0.0):,.2f}"


def format_gpus(count: int, profile: str) -> str:
    """How many GPUs of which profile: "1 GPU (t4)", "4 GPUs (a100)"."""
    return f"{count} GPU{'' if count == 1 else 's'} ({profile})"
