"""Core: what gpubot tells people, as neutral frozen models, so services never know how a chat renders it.

`bot/adapters/slack_render.py` alone turns these into Block Kit; tests and other chats can read them as-is.
Time and money arrive here as numbers and leave as the short text a thread shows.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace
from datetime import datetime

from bot.core import explain


class StepState(enum.Enum):
    DONE = "done"
    CURRENT = "current"
    PENDING = "pending"


@dataclass(frozen=True)
class StepLine:
    """One line of a thread's checklist, e.g. ("node Ready", DONE, "2m10s")."""

    label: str
    state: StepState
    elapsed: str = ""
    """How long the step took (done) or has taken so far (current); empty when unknown or pending."""


@dataclass(frozen=True)
class Buttons:
    release: bool = False
    extend: bool = False
    keep: bool = False
    """Keep an idle workload: the owner still needs it."""
    logs: bool = False
    """Show the pod's output: once its container has started, while the pod exists."""

    @property
    def any(self) -> bool:
        return self.release or self.extend or self.keep or self.logs


@dataclass(frozen=True)
class ThreadStatus:
    """The one status message at the root of a workload's thread, edited as the workload moves on."""

    namespace: str
    name: str
    owner: str
    """The owner's Slack user id."""
    image: str
    gpus: int
    profile: str
    headline: str
    """One line saying where things stand, e.g. "Running on gke-gpu-t4-1a2b"."""
    steps: tuple[StepLine, ...] = ()
    problem: explain.Problem | None = None
    outcome: str = ""
    """Set once the workload is over: "Completed (exit code 0)", "released by <owner>"."""
    lease_end: datetime | None = None
    """When the lease runs out; shown in each reader's own time zone. No countdown: a message is only
    edited for news, so one would freeze at its last edit and go on saying "in 3h" for hours."""
    buttons: Buttons = Buttons()
    note: str = ""
    """A line of context under the steps, e.g. when the node is usually ready."""

    @property
    def workload(self) -> str:
        """`namespace/name`: what buttons carry back so a click names its workload."""
        return f"{self.namespace}/{self.name}"

    def without_clocks(self) -> ThreadStatus:
        """The status with its running clock stopped (the current step's timer).
        Two statuses that differ only in clocks are not worth an edit: each edit is a Slack call, and the
        next real change brings the clocks up to date."""
        steps = tuple(replace(s, elapsed="") if s.state is StepState.CURRENT else s for s in self.steps)
        return replace(self, steps=steps)


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
    """The pool is back at zero and the episode is over."""
    cost: str = ""
    """What the episode cost, formatted, once known."""


Notice = ThreadStatus | Reply | Reminder | Ephemeral | ChannelEpisode


def format_elapsed(seconds: float) -> str:
    """A duration as threads show it: "45s", "1m05s", "2h03m"; negatives count as zero."""
    whole = max(0, math.floor(seconds))
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
