"""Cluster messages in plain words, each with what the user can do about it.

Input is the upstream text (scheduler, Cluster Autoscaler, kubelet); output is what a data scientist
should read in Slack. Unknown messages are passed through rather than guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KUEUE_QUOTA = "kueue-quota"
"""Kueue holds the pod: its queue's quota is in use by others (`kueue.waiting_problem`)."""
IN_LINE = frozenset({"max-size", "quota", KUEUE_QUOTA})
"""Problems that make a pod wait for a GPU someone else holds: its pool cannot grow (its maximum, or the
cloud's GPU quota), or its Kueue queue's quota is in use, so the pods waiting are a line, served as GPUs
come back."""
SCALE_UP_FAILURES = frozenset({"quota", "stockout"})
"""Why a scale-up failed; the autoscaler's back-off that follows says less, so a thread keeps these."""


@dataclass(frozen=True)
class Problem:
    key: str
    """Stable id, so a thread reports the same problem once."""
    summary: str
    fix: str


def failed_scheduling(message: str) -> str:
    """Why a pod waits, from the scheduler's `0/N nodes are available: ...` message."""
    reasons = message.split(". preemption:", 1)[0]
    if "Insufficient nvidia.com/gpu" in reasons and "not-ready" not in reasons:
        return "waiting for a GPU node: no node has a free GPU right now"
    if "node.kubernetes.io/not-ready" in reasons:
        return "waiting for a GPU node: a new node is starting up"
    if "didn't match Pod's node affinity/selector" in reasons:
        return "waiting for a GPU node: the GPU pool has no nodes yet"
    if "untolerated taint" in reasons:
        return "waiting for a GPU node: the only nodes are reserved for other work"
    if "no nodes available" in reasons:
        return "waiting for a GPU node: the cluster has no nodes"
    return f"waiting for a GPU node: {reasons}"


def not_triggered(message: str) -> Problem:
    """NotTriggerScaleUp / FailedScaleUp: why no new node is coming."""
    if "max node group size reached" in message:
        return Problem(
            "max-size",
            "the GPU pool is at its maximum size, so no new node can be added",
            "wait for a GPU to free up (`/gpu status` shows who holds them), or ask an admin to "
            "raise the pool's maximum",
        )
    if "quota exceeded" in message.lower() or "QUOTA_EXCEEDED" in message:
        return Problem(
            "quota",
            "the cloud project's GPU quota is used up, so no new node can be added",
            "wait for a GPU to free up (`/gpu status` shows who holds them), or ask an admin to "
            "raise the project's GPU quota",
        )
    if "out of resources" in message:
        return Problem(
            "stockout",
            "the cloud has no GPUs of this type in the zone right now",
            "the autoscaler retries after a back-off; try another `--type` or try again later",
        )
    if "in backoff after failed scale-up" in message:
        return Problem(
            "backoff",
            "a recent scale-up failed, so the autoscaler is waiting before it tries again",
            "it retries by itself within 30 minutes; `/gpu status` shows the pool",
        )
    if "untolerated taint" in message:
        return Problem(
            "taint",
            "no GPU pool accepts this workload: it does not tolerate the pool's taint",
            "use a profile from `/gpu help`; gpubot adds the right toleration for each profile",
        )
    if "Insufficient nvidia.com/gpu" in message:
        return Problem(
            "too-many-gpus",
            "no GPU pool has nodes with that many GPUs",
            "ask for fewer GPUs with `--gpus`, or pick a bigger `--type`",
        )
    if "didn't match Pod's node affinity/selector" in message:
        return Problem(
            "no-pool",
            "no GPU pool matches this workload's node selector",
            "check the profile's node selector against the pools (`gpubot pool show`)",
        )
    return Problem(
        "no-scale-up",
        f"the autoscaler will not add a node: {message}",
        "ask an admin to look at the pool and the autoscaler status",
    )


def image_pull(message: str) -> Problem:
    image = _quoted(message)
    target = f" `{image}`" if image else ""
    if "not found" in message or "manifest unknown" in message:
        return Problem(
            "pull-not-found",
            f"the image{target} does not exist (or the tag is wrong)",
            "check the name and tag, e.g. `nvidia/cuda:12.4.1-base-ubuntu22.04`, then run again",
        )
    if "unauthorized" in message or "denied" in message:
        return Problem(
            "pull-denied",
            f"the image{target} is private and the cluster may not pull it",
            "use a public image or ask an admin to add an image pull secret",
        )
    return Problem(
        "pull-failed", f"the image{target} could not be pulled", "check the image reference and run again"
    )


def crash_loop() -> Problem:
    return Problem(
        "crash-loop",
        "the container keeps crashing and Kubernetes is restarting it",
        "look at your command's output; `/gpu release` stops it",
    )


def oom_killed() -> Problem:
    return Problem(
        "oom",
        "the container ran out of memory and was killed (OOMKilled)",
        "ask for more with `--memory`, e.g. `--memory 32Gi`",
    )


EXIT_MEANINGS: dict[int, str] = {
    1: "the program reported an error; its last lines say which",
    2: "wrong arguments or shell syntax",
    126: "the command exists but could not run: not executable, or no permission",
    127: "command not found: check its spelling and that the image has it on its PATH",
    137: "killed by SIGKILL: most often out of memory, or stopped by force",
    139: "crashed with a segmentation fault (SIGSEGV)",
    143: "stopped by SIGTERM: the pod was asked to shut down",
}
"""What an exit status usually means. 126, 127 and 128+N for a signal are the shell's (GNU Bash manual,
"Exit Status"); 1 and 2 are the common conventions (Bash: 2 for a builtin's misuse)."""


def exit_meaning(exit_code: int) -> str:
    if exit_code in EXIT_MEANINGS:
        return EXIT_MEANINGS[exit_code]
    if 128 < exit_code < 160:
        return f"ended by signal {exit_code - 128}"
    return ""


def finished(phase: str, exit_code: int | None, reason: str, *, ran: str = "", restarts: int = 0) -> str:
    """How a run ended, in a line: "failed after 3m05s: the command exited 127 (command not found: …)".
    `ran` is how long it ran, when its start is known; restarts are said when there were any."""
    after = f" after {ran}" if ran else ""
    restarted = f", after {restarts} restart{'' if restarts == 1 else 's'}" if restarts else ""
    if phase == "Succeeded":
        return f"finished{after}: the command exited 0"
    if reason == "OOMKilled":
        return f"failed{after}: out of memory (OOMKilled, exit 137){restarted}"
    if exit_code is None:
        return f"failed{after}{restarted}"
    meaning = exit_meaning(exit_code)
    said = f" ({meaning})" if meaning else ""
    return f"failed{after}: the command exited {exit_code}{said}{restarted}"


def _quoted(message: str) -> str:
    match = re.search(r'image "([^"]+)"', message)
    return match.group(1) if match else ""
