"""Core: a pool change the cloud is still carrying out, in the words a person reads while waiting for it.

GKE answers a change with an Operation and EKS with a nodegroup status or an update; both take minutes.
Adapters poll them and report each look as a `Pending`; the wording of progress, a timeout, a Ctrl-C and a
failure lives here, so every one says what is happening and the command that shows it at the cloud.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass


class Change(enum.Enum):
    CREATE = "Creating"
    RESIZE = "Resizing"
    DELETE = "Deleting"


@dataclass(frozen=True)
class Pending:
    """One look at a change still under way."""

    change: Change
    cloud: str
    """`GKE` or `EKS`."""
    pool: str
    state: str
    """The cloud's own word: RUNNING (a GKE Operation), CREATING, DELETING, InProgress (EKS)."""
    check: str
    """The cloud's command that shows this change, for when gpubot stops waiting."""

    @property
    def noun(self) -> str:
        return "node pool" if self.cloud == "GKE" else "nodegroup"


Watch = Callable[[Pending], None]
"""Called with each look at a change still under way; adapters call it before every wait."""


def duration_text(seconds: float) -> str:
    """45s, 1m10s, 1h5m: short enough for a progress line."""
    whole = max(int(seconds), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m"
    if minutes:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    return f"{secs}s"


def next_delay(attempt: int, ceiling: float) -> float:
    """Seconds before the next look: 0.5, 1, 2, 4, then `ceiling` (gcloud's 5 s), so a quick change is
    seen quickly and a slow one is not polled more often than gcloud polls it."""
    return min(0.5 * 2.0 ** min(attempt, 10), ceiling)


def progress_line(pending: Pending, elapsed: float) -> str:
    doing = f"{pending.change.value} {pending.noun} {pending.pool}"
    return f"{doing} ... {pending.state} ({duration_text(elapsed)})"


def done_line(change: Change, cloud: str, pool: str, elapsed: float) -> str:
    noun = "node pool" if cloud == "GKE" else "nodegroup"
    return f"{change.value} {noun} {pool} ... done in {duration_text(elapsed)}"


def carries_on(pending: Pending) -> str:
    return (
        f"{pending.cloud} carries on {pending.change.value.lower()} {pending.pool}; "
        f"check it with: {pending.check}"
    )


def timeout_text(pending: Pending, waited: float) -> str:
    return f"stopped waiting after {duration_text(waited)} (still {pending.state}). " + carries_on(pending)


def interrupted_text(pending: Pending) -> str:
    return "stopped waiting (Ctrl-C). " + carries_on(pending)


def gke_check(*, project: str, location: str, operation: str) -> str:
    return f"gcloud container operations describe {operation} --project {project} --location {location}"


def eks_check(*, cluster: str, nodegroup: str, region: str, update_id: str = "") -> str:
    where = f" --region {region}" if region else ""
    if update_id:
        return (
            f"aws eks describe-update --name {cluster} --nodegroup-name {nodegroup} "
            f"--update-id {update_id}{where}"
        )
    return f"aws eks describe-nodegroup --cluster-name {cluster} --nodegroup-name {nodegroup}{where}"


def failed_text(change: Change, cloud: str, pool: str, reason: str, check: str) -> str:
    """A change the cloud gave up on, its reason in the cloud's words, and where to read more."""
    noun = "node pool" if cloud == "GKE" else "nodegroup"
    verb = {Change.CREATE: "create", Change.RESIZE: "resize", Change.DELETE: "delete"}[change]
    return f"{cloud} could not {verb} {noun} {pool}: {reason.rstrip('.')}. Details: {check}"
