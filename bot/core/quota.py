"""Whether a parsed `/gpu run` may go ahead: a known profile, profile and lease bounds, the user's quota.

Decided before anything is created, so a refused request costs nothing and the user learns at once,
in the ack, what to type instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from bot.core import commands, models


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
    request: models.RunRequest, owned_gpus: int, policy: models.QuotaPolicy
) -> models.UsageError | None:
    """The user's GPUs in use (or pending) plus this request must stay within their quota."""
    allowed = policy.max_gpus_per_user
    if owned_gpus + request.gpus <= allowed:
        return None
    left = max(allowed - owned_gpus, 0)
    problem = (
        f"Your GPU quota is {allowed}; you already hold {owned_gpus}, so {request.gpus} more would exceed it."
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
    return check_limits(request, profile, policy) or profile


def check_run(
    request: models.RunRequest,
    *,
    profiles: Mapping[str, models.GpuProfile],
    default_profile: str,
    owned_gpus: int,
    policy: models.QuotaPolicy,
) -> models.GpuProfile | models.UsageError:
    """All of the above in the order a user would want to hear it; the profile to build the pod with."""
    profile = check_request(request, profiles=profiles, default_profile=default_profile, policy=policy)
    if isinstance(profile, models.UsageError):
        return profile
    return check_quota(request, owned_gpus, policy) or profile


def lease_hours(request: models.RunRequest, policy: models.QuotaPolicy) -> float:
    """The lease this run gets: what was asked (already bounded by check_limits), else the default."""
    return (
        request.hours
        if request.hours is not None
        else min(policy.default_lease_hours, policy.max_lease_hours)
    )
