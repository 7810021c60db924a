"""Whether a parsed `/gpu run` may go ahead: a known profile, profile and lease bounds, the user's quota.

Decided before anything is created, so a refused request costs nothing and the user learns at once,
in the ack, what to type instead.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from bot.core import commands, images, models, podspec

RESERVATION_TTL = timedelta(minutes=10)
"""A reservation older than this is taken for one whose replica died between the check and the pod: it
counts no more. Far above a slow start (the root's post waits a minute at most, the create four tries)."""


def resolve_profile(
    request: models.RunRequest, profiles: Mapping[str, models.GpuProfile], default: str
) -> models.GpuProfile | models.UsageError:
    """The profile named by `--type`, or the default one."""
    name = request.profile or default
    profile = profiles.get(name)
    if profile is not None:
        return profile
    known = ", ".join(f"`{key}`" for key in sorted(profiles)) or "none configured"
    fallback = default if default in profiles else next(iter(sorted(profiles)), None)
    return models.UsageError(
        f"There is no GPU type `{name}`. Known types: {known}.",
        commands.format_run(replace(request, profile=fallback)),
    )


def check_limits(
    request: models.RunRequest, profile: models.GpuProfile, policy: models.QuotaPolicy
) -> models.UsageError | None:
    """Per-pod GPUs within what one node of the profile has; the lease within the configured maximum."""
    if request.gpus > profile.max_count:
        per_node = f"{profile.max_count} GPU{'s' if profile.max_count != 1 else ''}"
        return models.UsageError(
            f"A `{profile.name}` pod can have at most {per_node} (one node's worth); "
            f"you asked for {request.gpus}.",
            commands.format_run(replace(request, gpus=profile.max_count)),
        )
    if request.hours is not None and request.hours > policy.max_lease_hours:
        return models.UsageError(
            f"Leases are at most {policy.max_lease_hours:g} hours; you asked for {request.hours:g}. "
            "You can `/gpu extend` later.",
            commands.format_run(replace(request, hours=policy.max_lease_hours)),
        )
    return None


def check_quota(
    request: models.RunRequest, owned_gpus: int, policy: models.QuotaPolicy, *, starting: int = 0
) -> models.UsageError | None:
    """The user's GPUs in use (or pending), those of their runs still being started (`starting`, see
    `in_flight_gpus`), plus this request must stay within their quota."""
    allowed = policy.max_gpus_per_user
    if owned_gpus + starting + request.gpus <= allowed:
        return None
    left = max(allowed - owned_gpus - starting, 0)
    also = f", and {starting} more are being started for you" if starting else ""
    problem = (
        f"Your GPU quota is {allowed}; you already hold {owned_gpus}{also}, "
        f"so {request.gpus} more would exceed it."
    )
    if left:
        return models.UsageError(problem, commands.format_run(replace(request, gpus=left)))
    return models.UsageError(f"{problem} Release one first.", "/gpu release NAME")


def check_request(
    request: models.RunRequest,
    *,
    profiles: Mapping[str, models.GpuProfile],
    default_profile: str,
    policy: models.QuotaPolicy,
) -> models.GpuProfile | models.UsageError:
    """What configuration alone decides (the type, GPUs per node, the lease): checked before the ack, so
    the ack never promises a run the next message refuses."""
    profile = resolve_profile(request, profiles, default_profile)
    if isinstance(profile, models.UsageError):
        return profile
    return check_image(request, profile) or check_limits(request, profile, policy) or profile


def check_image(request: models.RunRequest, profile: models.GpuProfile) -> models.UsageError | None:
    """A run with no image typed takes its profile's; a profile without one cannot say what to run."""
    if request.image or profile.image:
        return None
    return models.UsageError(
        f"`/gpu run` needs an image: the `{profile.name}` type has none of its own.",
        commands.format_run(replace(request, image=images.EXAMPLE_IMAGE)),
    )


def with_profile_defaults(request: models.RunRequest, profile: models.GpuProfile) -> models.RunRequest:
    """What the profile fills in for what was not typed: its image, its ports."""
    return replace(request, image=request.image or profile.image, ports=request.ports or profile.ports)


def lease_hours(request: models.RunRequest, policy: models.QuotaPolicy) -> float:
    """The lease this run gets: what was asked (already bounded by check_limits), else the default."""
    return (
        request.hours
        if request.hours is not None
        else min(policy.default_lease_hours, policy.max_lease_hours)
    )


# -- reservations: the quota held atomically between the check and the pod -------------------------


@dataclass(frozen=True)
class Reservation:
    """GPUs promised to one run from its quota check until its pod exists (or it fails or is cancelled).

    Tickets order reservations as the store took them: a run counts only the reservations ahead of its own,
    so of twenty runs at once the first ones to reserve go ahead and the rest are refused, never all."""

    request_id: str
    owner_id: str
    gpus: int
    at: datetime
    pod: str = ""
    """The pod's name once it is known (`--name`, else once the thread root is out): a release finds it."""
    ticket: int = 0

    def to_json(self) -> str:
        fields = {"owner": self.owner_id, "gpus": self.gpus, "at": podspec.format_time(self.at)}
        return json.dumps({**fields, "pod": self.pod})


def read_reservation(request_id: str, ticket: int, raw: str) -> Reservation | None:
    """A reservation as stored; None for one that cannot be read (it then counts for nothing)."""
    try:
        found = json.loads(raw)
        at = podspec.parse_time(str(found["at"]))
        if at is None:
            return None
        return Reservation(request_id, str(found["owner"]), int(found["gpus"]), at, str(found["pod"]), ticket)
    except (ValueError, KeyError, TypeError):
        return None


def is_stale(reservation: Reservation, now: datetime) -> bool:
    return now - reservation.at > RESERVATION_TTL


def in_flight_gpus(
    reservations: Iterable[Reservation], *, mine: Reservation, pods: Collection[str], now: datetime
) -> int:
    """GPUs the owner's runs ahead of `mine` are starting, as the pod list read after `mine` was reserved
    does not show them yet: theirs (and their pods, once listed) count; later ones count theirs against
    ours instead; a reservation whose pod is listed is counted there, not twice."""
    return sum(
        other.gpus
        for other in reservations
        if other.owner_id == mine.owner_id
        and other.request_id != mine.request_id
        and other.ticket < mine.ticket
        and not is_stale(other, now)
        and not (other.pod and other.pod in pods)
    )


def starting_named(
    reservations: Iterable[Reservation], *, name: str, owner: str, now: datetime
) -> list[Reservation]:
    """The runs a `/gpu release` names that are still being started: by their pod's name, or (no name) the
    asker's own; stale reservations are nobody's run any more."""
    live = [r for r in reservations if not is_stale(r, now)]
    if name:
        return [r for r in live if r.pod == name]
    return sorted((r for r in live if r.owner_id == owner), key=lambda r: r.ticket)
