"""Core: whether a notebook is idle, from its GPU and from what its Jupyter Server says of its kernels.

A notebook whose owner is typing in a kernel while its GPU sits at 0 % is not idle: for a profile with
`activity: jupyter`, idle means the GPU idle AND Jupyter quiet for the whole window (its last activity
older than the window, no kernel busy). A Jupyter that cannot be read (no token seen yet, the proxy cannot
reach it, an answer of the wrong shape) leaves the GPU's verdict alone, and the words say so.

The answers read are jupyter-server/jupyter_server v2.14.1's `GET /api/status` (services/api/handlers.py
APIStatusHandler: `started`, `last_activity`, `kernels`, `connections`) and `GET /api/kernels`
(services/kernels/kernelmanager.py `kernel_model`: `id`, `name`, `last_activity`, `execution_state`,
`connections`), times in ISO 8601 with `Z` (_tz.py `isoformat`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.core import notices, podspec

JUPYTER = "jupyter"
"""The one `activity:` a profile may name."""
ACTIVITIES = frozenset({JUPYTER})
BUSY_STATES = frozenset({"busy", "starting"})
"""A kernel running a cell, or coming up: someone is at work (jupyter_client's execution states)."""


@dataclass(frozen=True)
class Activity:
    """What a notebook's Jupyter Server reported: its last activity and each kernel's state."""

    last_activity: datetime
    """The latest of the server's and its kernels' last activity."""
    busy_kernels: int = 0


@dataclass(frozen=True)
class Unread:
    """Jupyter could not be read; `why` in words for its owner."""

    why: str


Reading = Activity | Unread


class Evidence(enum.Enum):
    GPU = "gpu"
    """A profile with no activity source: the GPU alone decides."""
    NOTEBOOK = "notebook"
    """The GPU and the notebook's Jupyter both."""
    GPU_UNREAD = "gpu-unread"
    """A notebook whose Jupyter could not be read: the GPU alone decided."""


@dataclass(frozen=True)
class Verdict:
    idle: bool
    evidence: Evidence = Evidence.GPU
    quiet_since: datetime | None = None
    """The notebook's last activity, when Jupyter was read."""
    why_unread: str = ""


def judge(gpu_idle: bool, reading: Reading | None, *, window: timedelta, now: datetime) -> Verdict:
    """Idle when the GPU is and, for a notebook (`reading` given), Jupyter shows nothing within `window`."""
    if reading is None:
        return Verdict(gpu_idle)
    if isinstance(reading, Unread):
        return Verdict(gpu_idle, Evidence.GPU_UNREAD, why_unread=reading.why)
    quiet = reading.busy_kernels == 0 and now - reading.last_activity >= window
    return Verdict(gpu_idle and quiet, Evidence.NOTEBOOK, quiet_since=reading.last_activity)


def read(status: Any, kernels: Any) -> Reading:
    """The two JSON answers as an `Activity`, or `Unread` when either is not of Jupyter Server's shape."""
    if not isinstance(status, Mapping) or not isinstance(kernels, list):
        return Unread("its Jupyter answered something other than Jupyter Server's API")
    times = [_time(status.get("last_activity"))]
    busy = 0
    for kernel in kernels:
        if not isinstance(kernel, Mapping):
            return Unread("its Jupyter answered something other than Jupyter Server's API")
        times.append(_time(kernel.get("last_activity")))
        busy += kernel.get("execution_state") in BUSY_STATES
    known = [t for t in times if t is not None]
    if times[0] is None or len(known) != len(times):
        return Unread("its Jupyter gave no time of last activity")
    return Activity(max(known), busy)


def _time(raw: Any) -> datetime | None:
    if not isinstance(raw, str):
        return None
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# -- words -------------------------------------------------------------------------------------------


def evidence_text(verdict: Verdict, gpu_idle_for: timedelta, *, under: str = "") -> str:
    """Which evidence the verdict used, for a warning, a release and the status line:
    "GPU idle 45m00s and no notebook activity since 14:05"; `under` follows the GPU's part."""
    gpu = f"GPU idle {notices.format_elapsed(gpu_idle_for.total_seconds())}{under}"
    if verdict.evidence is Evidence.NOTEBOOK and verdict.quiet_since is not None:
        return f"{gpu} and no notebook activity since {notices.clock_time(verdict.quiet_since)}"
    if verdict.evidence is Evidence.GPU_UNREAD:
        because = f" ({verdict.why_unread})" if verdict.why_unread else ""
        return f"{gpu}; its notebook's activity could not be read{because}, so the GPU alone decided"
    return gpu


def mark(verdict: Verdict) -> str:
    """The evidence as kept on the pod with its idle warning, for `/gpu status`."""
    if verdict.evidence is Evidence.NOTEBOOK and verdict.quiet_since is not None:
        return f"{Evidence.NOTEBOOK.value}:{podspec.format_time(verdict.quiet_since)}"
    return verdict.evidence.value


def from_mark(text: str) -> Verdict:
    """An idle warning's evidence read back from its mark; an unknown mark reads as the GPU alone."""
    kind, _, since = text.partition(":")
    if kind == Evidence.NOTEBOOK.value and (moment := _time(since)) is not None:
        return Verdict(True, Evidence.NOTEBOOK, quiet_since=moment)
    if kind == Evidence.GPU_UNREAD.value:
        return Verdict(True, Evidence.GPU_UNREAD)
    return Verdict(True)
