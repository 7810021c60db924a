"""A workload's journey from Pending to Running, as a pure state machine over what the watches see.

The tracker feeds it pod, event and node observations in any order and with repeats; it answers
with the milestones that are new, so a thread shows each step once, with the time it happened.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field, replace
from datetime import datetime

from bot.core import cluster_nodes, explain, notices


class Step(enum.IntEnum):
    """Steps in the order a user lives them; a later step implies the earlier ones are over."""

    ADMITTED = 1
    """Kueue admitted its Workload (only for a profile with `queue:`): the scheduler may now place it."""
    WAITING = 2
    SCALE_UP = 3
    PROVISIONING = 4
    NODE_READY = 5
    GPU_READY = 6
    SCHEDULED = 7
    PULLING = 8
    RUNNING = 9


FINISHED_PHASES = frozenset({"Succeeded", "Failed"})
"""The pod phases of a run that is over: its containers will not run again."""


class Outcome(enum.Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DELETED = "deleted"


@dataclass(frozen=True)
class PodSeen:
    at: datetime
    phase: str
    node: str = ""
    waiting_reason: str = ""
    waiting_message: str = ""
    terminated_reason: str = ""
    exit_code: int | None = None
    restarts: int = 0
    deleted: bool = False
    admitted_to: str = ""
    """The Kueue queue that admitted it (its gate is lifted); empty for a pod Kueue does not manage."""


@dataclass(frozen=True)
class EventSeen:
    at: datetime
    reason: str
    message: str
    type: str = "Normal"


@dataclass(frozen=True)
class NodeSeen(cluster_nodes.Node):
    """A node as seen at a moment: `at` says when, for the journey's timeline."""

    at: datetime = field(kw_only=True)


@dataclass(frozen=True)
class KueueSeen:
    """Its Kueue Workload as seen at a moment: admitted, or held with the reason in plain words."""

    at: datetime
    admitted: bool
    queue: str
    problem: explain.Problem | None = None


Observation = PodSeen | EventSeen | NodeSeen | KueueSeen


@dataclass(frozen=True)
class Milestone:
    step: Step | None
    at: datetime
    text: str
    problem: explain.Problem | None = None
    outcome: Outcome | None = None
    late: bool = False
    """Reached after a later step was already seen; fills in history, is not news."""


@dataclass(frozen=True)
class Progress:
    """What is known about one workload; rebuilt from observations after a restart."""

    created: datetime
    reached: tuple[tuple[Step, datetime], ...] = ()
    node: str = ""
    pool: str = ""
    scale_up: str = ""
    coming: str = ""
    """The node its scale-up brings, once it appears."""
    problems: tuple[str, ...] = ()
    outcome: Outcome | None = None
    gone: bool = False
    """The pod no longer exists; a finished run keeps its outcome, so its thread still says how it ended."""
    start_error: str = ""
    """The newest kubelet failure message about starting it (a pull's, with the registry's words)."""

    def at(self, step: Step) -> datetime | None:
        return next((t for s, t in self.reached if s == step), None)

    @property
    def step(self) -> Step | None:
        return max((s for s, _ in self.reached), default=None)

    @property
    def held_since(self) -> datetime | None:
        """When it began to hold its GPUs: scheduled onto its node (running, if that went unseen)."""
        return self.at(Step.SCHEDULED) or self.at(Step.RUNNING)


SCALE_UP_INFO = re.compile(r"\{(?P<group>\S+) (?P<old>\d+)->(?P<new>\d+) \(max: (?P<max>\d+)\)\}")


def pool_name(group_id: str) -> str:
    """The pool behind an autoscaler group id.

    GKE ids are MIG URLs ending `gke-<cluster>-<pool>[-<hash>]-grp`; AWS ids are ASG names, kept as they are.
    """
    tail = group_id.rsplit("/", 1)[-1]
    if not (tail.startswith("gke-") and tail.endswith("-grp")):
        return tail
    parts = tail.removeprefix("gke-").removesuffix("-grp").split("-")
    if len(parts) > 2 and re.fullmatch(r"[0-9a-f]{8}", parts[-1]):
        parts = parts[:-1]
    return "-".join(parts[1:]) or tail


def advance(progress: Progress, seen: Observation) -> tuple[Progress, list[Milestone]]:
    if progress.outcome is not None:  # over: only the pod's going is still news, and no milestone
        gone = isinstance(seen, PodSeen) and seen.deleted
        return (replace(progress, gone=True) if gone else progress), []
    if isinstance(seen, EventSeen):
        return _on_event(progress, seen)
    if isinstance(seen, NodeSeen):
        return _on_node(progress, seen)
    if isinstance(seen, KueueSeen):
        return _on_kueue(progress, seen)
    return _on_pod(progress, seen)


def _on_kueue(progress: Progress, seen: KueueSeen) -> tuple[Progress, list[Milestone]]:
    if seen.admitted:
        return _reach(progress, Step.ADMITTED, seen.at, f"admitted by Kueue (queue {seen.queue})")
    if seen.problem is not None and progress.at(Step.ADMITTED) is None:
        return _problem(progress, seen.at, seen.problem)
    return progress, []


def _reach(progress: Progress, step: Step, at: datetime, text: str) -> tuple[Progress, list[Milestone]]:
    """Record a step once. Watches of different kinds are not ordered with each other, so a step may
    arrive after a later one (the pod's Scheduled event before the node's GPU update): it is still
    recorded, with its own time, and marked late so nobody is notified of stale news."""
    if progress.at(step) is not None:
        return progress, []
    late = progress.step is not None and progress.step > step
    return replace(progress, reached=(*progress.reached, (step, at))), [Milestone(step, at, text, late=late)]


def flag(progress: Progress, at: datetime, problem: explain.Problem) -> tuple[Progress, list[Milestone]]:
    """A problem seen from outside the watches (a timer): reported once, like the ones events bring."""
    if progress.outcome is not None:
        return progress, []
    return _problem(progress, at, problem)


def _problem(progress: Progress, at: datetime, problem: explain.Problem) -> tuple[Progress, list[Milestone]]:
    if problem.key in progress.problems:
        return progress, []
    return replace(progress, problems=(*progress.problems, problem.key)), [
        Milestone(None, at, problem.summary, problem=problem)
    ]


def _on_event(progress: Progress, seen: EventSeen) -> tuple[Progress, list[Milestone]]:
    if seen.reason == "Failed" and seen.type == "Warning" and not seen.message.startswith("Error: "):
        progress = replace(progress, start_error=seen.message)  # "Error: X" only restates the reason
    if seen.reason == "FailedScheduling":
        return _reach(progress, Step.WAITING, seen.at, explain.failed_scheduling(seen.message))
    if seen.reason == "TriggeredScaleUp":
        match = SCALE_UP_INFO.search(seen.message)
        if not match:
            return progress, []
        scale_up = f"{match['old']}→{match['new']} (max {match['max']})"
        progress = replace(progress, pool=pool_name(match["group"]), scale_up=scale_up)
        progress, out = _reach(progress, Step.WAITING, seen.at, "waiting for a GPU node")
        text = f"scale-up triggered: {progress.pool} {scale_up}"
        progress, more = _reach(progress, Step.SCALE_UP, seen.at, text)
        return progress, out + more
    if seen.reason in ("NotTriggerScaleUp", "FailedScaleUp"):
        return _problem(progress, seen.at, explain.not_triggered(seen.message))
    if seen.reason == "Scheduled":
        node = seen.message.rsplit(" to ", 1)[-1]
        return _reach(replace(progress, node=node), Step.SCHEDULED, seen.at, f"scheduled on {node}")
    if seen.reason == "Pulling":
        return _reach(progress, Step.PULLING, seen.at, "pulling the image")
    if seen.reason == "Failed" and "pull" in seen.message.lower() and "Error:" not in seen.message:
        return _problem(progress, seen.at, explain.image_pull(seen.message))
    if seen.reason == "BackOff" and "restarting failed container" in seen.message:
        return _problem(progress, seen.at, explain.crash_loop())
    return progress, []


def _on_node(progress: Progress, seen: NodeSeen) -> tuple[Progress, list[Milestone]]:
    if not progress.pool or seen.pool != progress.pool or progress.at(Step.SCALE_UP) is None:
        return progress, []
    if seen.name != (progress.node or progress.coming or seen.name):
        return progress, []  # another of the pool's new nodes: this pod waits for its own
    out: list[Milestone] = []
    if not progress.coming:
        progress = replace(progress, coming=seen.name)
    created = min(seen.created or seen.at, seen.at)
    progress, step = _reach(progress, Step.PROVISIONING, created, f"node {seen.name} is provisioning")
    out += step
    ready = min(max(seen.ready_since or seen.at, created), seen.at)
    if seen.ready:
        progress, step = _reach(progress, Step.NODE_READY, ready, f"node {seen.name} is Ready")
        out += step
    if seen.ready and seen.gpus > 0:
        # Seen late, the GPUs were allocatable before the pod was scheduled onto them, if it was.
        scheduled = progress.at(Step.SCHEDULED) or seen.at
        allocatable = max(min(seen.at, scheduled), ready)
        progress, step = _reach(
            progress, Step.GPU_READY, allocatable, f"{seen.gpus} GPU allocatable on {seen.name}"
        )
        out += step
    return progress, out


def _on_pod(progress: Progress, seen: PodSeen) -> tuple[Progress, list[Milestone]]:
    if seen.deleted and progress.outcome in (Outcome.SUCCEEDED, Outcome.FAILED):
        return replace(progress, gone=True), []  # its end was told; the cleanup is the deleter's to say
    if seen.deleted:
        return replace(progress, outcome=Outcome.DELETED, gone=True), [
            Milestone(None, seen.at, "deleted", outcome=Outcome.DELETED)
        ]
    out: list[Milestone] = []
    if seen.admitted_to:  # the Workload's own word may come later: the watches are not ordered
        progress, out = _on_kueue(progress, KueueSeen(seen.at, admitted=True, queue=seen.admitted_to))
    if seen.node and not progress.node:
        progress, step = _reach(
            replace(progress, node=seen.node), Step.SCHEDULED, seen.at, f"scheduled on {seen.node}"
        )
        out += step
    if seen.waiting_reason in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName"):
        progress, step = _problem(
            progress, seen.at, explain.image_pull(seen.waiting_message or seen.waiting_reason)
        )
        out += step
    if seen.phase == "Running" and not seen.waiting_reason:
        progress, step = _reach(progress, Step.RUNNING, seen.at, "Running")
        out += step
    if seen.terminated_reason == "OOMKilled":
        progress, step = _problem(progress, seen.at, explain.oom_killed())
        out += step
    if seen.phase in FINISHED_PHASES:
        outcome = Outcome.SUCCEEDED if seen.phase == "Succeeded" else Outcome.FAILED
        started = progress.at(Step.RUNNING)
        ran = notices.format_elapsed(seen.at - started) if started else ""
        text = explain.finished(
            seen.phase, seen.exit_code, seen.terminated_reason, ran=ran, restarts=seen.restarts
        )
        progress = replace(progress, outcome=outcome)
        out.append(Milestone(None, seen.at, text, outcome=outcome))
    return progress, out
