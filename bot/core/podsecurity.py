"""Core: which securityContext a workload runs with, and what to tell its owner when Pod Security refuses it.

The default meets Pod Security Standards "restricted" (runAsNonRoot with a set uid, seccomp RuntimeDefault,
no capabilities, no privilege escalation), so the pod is admitted in a namespace that enforces it. A profile
whose images must run as root says so (`security.runAsRoot`), and only its pods depart from the default:
one root image does not loosen every workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.core import models

PROFILE_SECURITY_FIELDS = frozenset({"runAsRoot", "runAsUser", "readOnlyRootFilesystem"})
MAX_UID = 2**31 - 1
"""The largest uid Kubernetes accepts (int64 in the API, but the kubelet's runtimes take 32-bit signed)."""
REFUSAL_MARK = "violates PodSecurity"
"""The words every Pod Security admission refusal carries (pod-security-admission admission.go)."""


@dataclass(frozen=True)
class SecurityDecision:
    """What one workload runs as: the fields of its pod and container securityContext that vary."""

    run_as_non_root: bool
    run_as_user: int | None
    read_only_root_filesystem: bool


def decide(defaults: models.PodSecurity, profile: models.ProfileSecurity) -> SecurityDecision:
    """The profile's departures over the bot-wide defaults; nothing typed in Slack takes part."""
    read_only = defaults.read_only_root_filesystem
    if profile.read_only_root_filesystem is not None:
        read_only = profile.read_only_root_filesystem
    if profile.run_as_root:
        # The image's own user (root for CUDA images): no uid forced, and no runAsNonRoot, which the
        # kubelet would answer with "container has runAsNonRoot and image will run as root".
        return SecurityDecision(run_as_non_root=False, run_as_user=None, read_only_root_filesystem=read_only)
    if profile.run_as_user is not None:
        return SecurityDecision(
            run_as_non_root=True, run_as_user=profile.run_as_user, read_only_root_filesystem=read_only
        )
    return SecurityDecision(
        run_as_non_root=defaults.run_as_non_root,
        run_as_user=defaults.run_as_user,
        read_only_root_filesystem=read_only,
    )


def pod_context(decision: SecurityDecision) -> dict[str, Any]:
    out: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    if decision.run_as_non_root:
        out["runAsNonRoot"] = True
    if decision.run_as_user is not None:
        out["runAsUser"] = decision.run_as_user
    return out


def container_context(decision: SecurityDecision) -> dict[str, Any]:
    """Fixed for every profile: root or not, a workload never escalates or holds a capability."""
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": decision.read_only_root_filesystem,
        "capabilities": {"drop": ["ALL"]},
    }


def read_profile_security(raw: Any, path: str) -> tuple[models.ProfileSecurity, list[tuple[str, str]]]:
    """A profile's `security:` mapping from profiles.yaml, and (path, problem) pairs for what is wrong."""
    if raw is None:
        return models.ProfileSecurity(), []
    if not isinstance(raw, Mapping):
        return models.ProfileSecurity(), [
            (path, "must be a mapping with runAsRoot, runAsUser, readOnlyRootFilesystem")
        ]
    problems = [
        (path, f"unknown field {name!r} (known: {', '.join(sorted(PROFILE_SECURITY_FIELDS))})")
        for name in sorted(set(raw) - PROFILE_SECURITY_FIELDS, key=str)
    ]
    root, user, read_only = (
        raw.get("runAsRoot", False),
        raw.get("runAsUser"),
        raw.get("readOnlyRootFilesystem"),
    )
    if not isinstance(root, bool):
        problems.append((f"{path}.runAsRoot", f"must be true or false, not {root!r}"))
        root = False
    if user is not None and (not isinstance(user, int) or isinstance(user, bool) or not 1 <= user <= MAX_UID):
        problems.append(
            (f"{path}.runAsUser", f"must be a uid from 1 to {MAX_UID} (0 is runAsRoot), not {user!r}")
        )
        user = None
    if root and user is not None:
        problems.append((f"{path}.runAsUser", "contradicts runAsRoot: true; keep one"))
    if read_only is not None and not isinstance(read_only, bool):
        problems.append((f"{path}.readOnlyRootFilesystem", f"must be true or false, not {read_only!r}"))
        read_only = None
    return models.ProfileSecurity(
        run_as_root=root, run_as_user=user, read_only_root_filesystem=read_only
    ), problems


def is_refusal(message: str) -> bool:
    """Whether the API server's message is a Pod Security admission refusal."""
    return REFUSAL_MARK in message


def explain_refusal(message: str, *, profile: models.GpuProfile, namespace: str) -> str:
    """The owner's words for a pod Pod Security refused: why, and who can change what."""
    if profile.security.run_as_root:
        why = (
            f"the `{profile.name}` profile runs its images as root, and the namespace `{namespace}` only "
            "admits pods that run as a non-root user (Pod Security)"
        )
        fix = (
            "Use an image that runs as a non-root user with another profile, or ask an admin to let "
            f"`{namespace}` admit root pods (Pod Security level `baseline`)"
        )
    else:
        why = f"the namespace `{namespace}` enforces a Pod Security level this pod does not meet"
        fix = "Ask an admin to check gpubot's pod security settings against the namespace's level"
    return f"The cluster refused the pod: {why}. {fix}. Nothing was created.\n> {message}"
