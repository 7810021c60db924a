"""Core: a start that is broken (an image that cannot be pulled, a container that keeps crashing or cannot be
configured): when its GPU is given back, and why, in plain words.

A pod stuck like this holds its GPU node up while doing nothing, and its lease may be hours long. Given
time, some of these fix themselves or are fixed (an image pushed late, a secret created), so they are
released only after the reaper's broken-start limit; a start that can never succeed as the pod is written
(an invalid image name) is released at once. Time counts from when the kubelet began starting the pod
(its status.startTime), which survives a restart of gpubot, so no memory of our own is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.core import notices

RETRIED = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "CrashLoopBackOff",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
"""Waiting reasons of a start the kubelet keeps retrying and failing: released after the limit."""
HOPELESS = frozenset({"InvalidImageName", "ErrImageNeverPull"})
"""Waiting reasons of a start that can never succeed as the pod is written: released at once."""
DETAIL_MAX = 300
"""Characters of the cluster's own message quoted in a thread; registry errors can run long."""


@dataclass(frozen=True)
class Start:
    """How a pod's first container waits, as its status says."""

    reason: str = ""
    """The container's waiting reason, e.g. `ImagePullBackOff`; "" while it runs or waits normally."""
    message: str = ""
    """The waiting state's message, as the kubelet wrote it."""
    since: datetime | None = None
    """When the kubelet began starting the pod (status.startTime)."""


def is_due(start: Start, now: datetime, limit: timedelta) -> bool:
    """Give the GPU back now: a hopeless start at once, a failing one once it has failed for `limit`."""
    if start.reason in HOPELESS:
        return True
    return start.reason in RETRIED and start.since is not None and now - start.since >= limit


def describe(start: Start, *, image: str, detail: str = "") -> tuple[str, str]:
    """(what went wrong, what to do), in plain words. `detail` is the cluster's best message for it (a
    pull failure's event carries the registry's own words), else the waiting message is quoted."""
    said = clip(detail or start.message)
    quoted = f" ({start.reason}: {said})" if said else f" ({start.reason})"
    shown = f"`{image}`" if image else "its image"
    again = "then `/gpu run` again."
    if start.reason in ("ErrImagePull", "ImagePullBackOff"):
        return f"the image {shown} could not be pulled{quoted}", f"Check the image name and tag, {again}"
    if start.reason == "InvalidImageName":
        return f"the image name {shown} is not valid{quoted}", f"Fix the image name, {again}"
    if start.reason == "ErrImageNeverPull":
        return (
            f"the image {shown} is not on the node and the pod may not pull it{quoted}",
            f"Ask an admin about the image pull policy, {again}",
        )
    if start.reason == "CrashLoopBackOff":
        return f"its container kept crashing{quoted}", f"Check the command and the image, {again}"
    if start.reason == "CreateContainerConfigError":
        return (
            f"its container could not be configured{quoted}",
            f"Ask an admin about the missing secret or config map, {again}",
        )
    return f"its container could not be started{quoted}", f"Check the command and the image, {again}"


def clip(text: str) -> str:
    """One line, at most DETAIL_MAX characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= DETAIL_MAX else flat[: DETAIL_MAX - 1] + "…"


def waited(start: Start, now: datetime) -> str:
    """How long it has been unable to start, e.g. "10m", or "" if unknown."""
    if start.since is None:
        return ""
    return notices.format_elapsed(now - start.since)
