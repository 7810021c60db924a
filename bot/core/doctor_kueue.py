"""Core: `gpubot doctor`'s Kueue checks, for profiles with `queue:`: Kueue's API is served, each LocalQueue
exists and points at a ClusterQueue that has quota for the profile's resource. Pure: facts in, checks out.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.core import kueue, models
from bot.core.doctor_facts import Check, KueueFacts, Status

NAME = "kueue"
INSTALL = (
    "install Kueue v0.19.2 (kubectl apply --server-side -f "
    "https://github.com/kubernetes-sigs/kueue/releases/download/v0.19.2/manifests.yaml), or drop `queue:` "
    "from the profile"
)


def kueue_checks(
    profiles: Mapping[str, models.GpuProfile], facts: KueueFacts | None, namespace: str
) -> list[Check]:
    queued = {name: p for name, p in profiles.items() if p.queue}
    if not queued:
        return []
    if facts is None or facts.error:
        said = facts.error if facts is not None else "not read"
        return [
            Check(
                NAME, Status.WARN, f"could not read Kueue's objects: {said}", "run doctor against the cluster"
            )
        ]
    if not facts.served:
        names = ", ".join(sorted(queued))
        return [
            Check(
                NAME,
                Status.FAIL,
                f"profiles {names} submit to Kueue, but the cluster does not serve "
                f"{kueue.GROUP}/{kueue.VERSION}",
                INSTALL,
            )
        ]
    return [_profile_check(name, profile, facts, namespace) for name, profile in sorted(queued.items())]


def _profile_check(name: str, profile: models.GpuProfile, facts: KueueFacts, namespace: str) -> Check:
    check = f"{NAME}-{name}"
    target = facts.local_queues.get(profile.queue)
    if target is None:
        return Check(
            check,
            Status.FAIL,
            f"profile {name}: no LocalQueue {profile.queue} in namespace {namespace}; "
            "its runs would wait forever",
            f"create it: a LocalQueue named {profile.queue} in {namespace} with spec.clusterQueue set "
            'to your ClusterQueue (docs/deploy.md, "With Kueue")',
        )
    cluster_queue = facts.cluster_queues.get(target)
    if cluster_queue is None:
        return Check(
            check,
            Status.FAIL,
            f"profile {name}: LocalQueue {profile.queue} points at ClusterQueue {target}, "
            "which does not exist",
            f"create ClusterQueue {target} with a quota for {profile.resource_name}, or point the LocalQueue "
            "at one that exists",
        )
    quota = cluster_queue.quota.get(profile.resource_name, 0)
    if quota <= 0:
        return Check(
            check,
            Status.FAIL,
            f"profile {name}: ClusterQueue {target} has no quota for {profile.resource_name}, so Kueue "
            "admits none of its runs",
            f"add {profile.resource_name} to the ClusterQueue's coveredResources with a nominalQuota",
        )
    return Check(
        check,
        Status.PASS,
        f"profile {name}: LocalQueue {profile.queue} → ClusterQueue {target}, "
        f"{quota} {profile.resource_name}",
    )
