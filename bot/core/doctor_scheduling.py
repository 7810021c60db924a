"""Core: doctor's checks of whether pods reach the GPU pool: each profile, and a --manifest file.

A pod reaches a pool when its nodeSelector matches the pool's labels and its tolerations cover the
pool's blocking taints; otherwise the autoscaler's template simulation rejects the pool too and the pod
waits forever. At zero nodes the pool's taints come from the cloud's template, else the expected GPU taint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bot.core import labels, manifests, models, taints
from bot.core.doctor_facts import GKE, Check, Manifest, PoolFacts, Status

TOLERATIONS = "profile-tolerations"
MANIFEST_FIELDS, MANIFEST_TOLERATIONS, MANIFEST_GPU = (
    "manifest-fields",
    "manifest-tolerations",
    "manifest-gpu-limits",
)


@dataclass(frozen=True)
class Subject:
    """A profile or a manifest's pod spec: what decides where its pods may go."""

    name: str
    tolerations: tuple[models.Toleration, ...]
    selector: Mapping[str, str]
    resources: frozenset[str]
    """Extended resources its pods request: GKE's ExtendedResourceToleration tolerates taints of that key."""
    fix_where: str
    """Where the tolerations are edited, for the fix."""
    dropped: tuple[str, ...] = ()
    """Tolerations as written that do not count (invalid, or an unknown field in place of the key)."""


def selects(selector: Mapping[str, str], node_labels: Mapping[str, str]) -> bool:
    return all(node_labels.get(k) == v for k, v in selector.items())


def _toleration_yaml(taint: taints.Taint) -> str:
    return f"{{key: {taint.key}, operator: Equal, value: {taint.value}, effect: {taint.effect}}}"


def _selector_text(selector: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(selector.items())) or "(none)"


def reach_checks(name: str, subject: Subject, pools: Iterable[PoolFacts]) -> list[Check]:
    """One check per GPU pool the subject's nodeSelector picks; a failure when it picks none."""
    pools = tuple(pools)
    targets = [
        p
        for p in pools
        if (seen := p.known_labels()) is None or any(selects(subject.selector, lab) for lab in seen)
    ]
    if pools and not targets:
        return [
            Check(
                name,
                Status.FAIL,
                f"{subject.name}: its nodeSelector {_selector_text(subject.selector)} matches no GPU pool's "
                f"nodes ({', '.join(p.name for p in pools)}), so its pods trigger no scale-up "
                "(\"didn't match Pod's node affinity/selector\")",
                f"change the nodeSelector in {subject.fix_where} to labels the GPU pool's nodes carry",
            )
        ]
    return [_toleration_check(name, subject, pool) for pool in targets] or [
        _toleration_check(name, subject, None)
    ]


def _toleration_check(name: str, subject: Subject, pool: PoolFacts | None) -> Check:
    known = pool.known_taints() if pool else None
    found = known if known is not None else (taints.EXPECTED_GPU_TAINT,)
    where = (
        f"{pool.name}'s taints"
        if pool and known is not None
        else f"the expected GPU taint; {pool.name}'s own are unknown at zero nodes"
        if pool
        else "the expected GPU taint; no GPU pool was found"
    )
    if subject.dropped:
        where += f"; {', '.join(subject.dropped)} does not count, see manifest-fields"
    blocking = [t for t in found if taints.blocks(t)]
    missing = taints.untolerated(subject.tolerations, found)
    target = f"{subject.name} → {pool.name}" if pool else subject.name
    if not missing:
        what = taints.render(blocking) if blocking else "nothing: the pool has no blocking taint"
        return Check(name, Status.PASS, f"{target}: tolerates {what} ({where})")
    fix = f"add to the tolerations in {subject.fix_where}: " + "; ".join(_toleration_yaml(t) for t in missing)
    rescued = all(t.key in subject.resources for t in missing)
    if rescued and pool is not None and pool.cloud == GKE:
        return Check(
            name,
            Status.WARN,
            f"{target}: no toleration for {taints.render(missing)} ({where}); its pods get on only because "
            f"GKE's ExtendedResourceToleration admission adds one for pods that request "
            f"{', '.join(sorted(subject.resources))}, which other clusters (EKS) lack",
            fix,
        )
    return Check(
        name,
        Status.FAIL,
        f"{target}: does not tolerate {taints.render(missing)} ({where}), so its pods stay Pending "
        '("untolerated taint") and trigger no scale-up',
        fix,
    )


def profile_checks(profiles: Mapping[str, models.GpuProfile], pools: Iterable[PoolFacts]) -> list[Check]:
    pools = tuple(pools)
    out: list[Check] = []
    for profile in profiles.values():
        subject = Subject(
            name=f"profile {profile.name}",
            tolerations=profile.tolerations,
            selector=profile.node_selector_map,
            resources=frozenset({profile.resource_name}),
            fix_where=f"profiles.{profile.name} of the profiles file (GPUBOT_PROFILES_FILE)",
        )
        out += reach_checks(TOLERATIONS, subject, pools)
    return out


# -- --manifest FILE ----------------------------------------------------------------------------------


def manifest_checks(manifest: Manifest, pools: Iterable[PoolFacts], resources: frozenset[str]) -> list[Check]:
    """Field names first (what strict validation refuses), then where it would land, then its GPU limits."""
    parsed = manifests.parse(manifest.text)
    if parsed.error:
        return [Check(MANIFEST_FIELDS, Status.FAIL, f"{manifest.path}: {parsed.error}", "")]
    several = len(parsed.specs) > 1
    problems = [
        f"{spec.owner}: {p}" if several else p
        for spec in parsed.specs
        for p in manifests.field_problems(spec)
    ]
    out = [_fields_check(manifest.path, problems)]
    pools = tuple(pools)
    for spec in parsed.specs:
        asks = manifests.gpu_asks(spec, resources)
        subject = Subject(
            name=f"{manifest.path} ({spec.owner})",
            tolerations=manifests.tolerations(spec),
            selector=manifests.node_selector(spec),
            resources=frozenset(a.resource for a in asks),
            fix_where=f"{spec.path}.tolerations of {manifest.path}",
            dropped=manifests.invalid_tolerations(spec),
        )
        out += reach_checks(MANIFEST_TOLERATIONS, subject, pools)
        out.append(_gpu_check(f"{manifest.path} ({spec.owner})", spec.path, asks))
    return out


def _fields_check(path: str, problems: list[str]) -> Check:
    if not problems:
        return Check(
            MANIFEST_FIELDS,
            Status.PASS,
            f"{path}: every field of the pod spec, its containers and its tolerations is a Kubernetes field",
        )
    return Check(
        MANIFEST_FIELDS,
        Status.FAIL,
        f"{path}: " + "; ".join(problems),
        "fix those fields: kubectl's strict validation refuses the file (\"strict decoding error: unknown "
        'field"), and without it Kubernetes drops unknown fields silently — a toleration without its '
        "key tolerates nothing",
    )


def _gpu_check(subject: str, path: str, asks: list[manifests.GpuAsk]) -> Check:
    resource = labels.GPU_RESOURCE
    limit_fix = f"set it in the container: resources: {{limits: {{{resource}: 1}}}}"
    if not asks:
        return Check(
            MANIFEST_GPU,
            Status.FAIL,
            f"{subject}: no container sets {resource} in resources.limits, so the pod gets no GPU and "
            "triggers no GPU scale-up",
            f"add to the container in {path}.containers: resources: {{limits: {{{resource}: 1}}}}",
        )
    unlimited = [a.container for a in asks if not a.limit]
    if unlimited:
        return Check(
            MANIFEST_GPU,
            Status.FAIL,
            f"{subject}: container(s) {', '.join(unlimited)} request {resource} without a limit; the API "
            "server refuses that (extended resources are set in limits)",
            limit_fix,
        )
    unequal = [a.container for a in asks if a.request and a.request != a.limit]
    if unequal:
        return Check(
            MANIFEST_GPU,
            Status.FAIL,
            f"{subject}: container(s) {', '.join(unequal)} request a different {resource} count than their "
            "limit; the API server refuses that (requests must equal limits for GPUs)",
            "drop the request (it defaults to the limit) or make the two equal",
        )
    said = ", ".join(f"{a.container} {a.limit}" for a in asks)
    return Check(MANIFEST_GPU, Status.PASS, f"{subject}: asks for {resource} in limits ({said})")
