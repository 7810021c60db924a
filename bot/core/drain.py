"""Core: why a GPU pool stays up after gpubot's last workload on it left, in plain words with what to do.

The Cluster Autoscaler removes a node only once nothing it must respect holds it: no pod it may not evict
(`safe-to-evict: "false"`, no controller, kube-system without a budget), no node opt-out, the group above
its minimum size. The scale channel asks this module once a pool is still up well after it should have
drained; the inputs are what the API shows (the pool's nodes, the pods bound to them, the autoscaler's
status ConfigMap), so the same facts the autoscaler weighs are the ones people read.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from bot.core import autoscaler_status, cluster_nodes, labels, lifecycle, notices, workloads
from bot.core.fields import Body, as_map, as_maps, as_text, as_texts

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
MIRROR = "kubernetes.io/config.mirror"
"""Set by the kubelet on a static pod's API copy; the autoscaler never evicts those, nor waits for them."""
DRAIN_EXPECTED = timedelta(minutes=15)
"""The autoscaler's --scale-down-unneeded-time (10 min by default) plus a margin of 5 minutes."""
MAX_NAMED = 3
"""Pods or nodes named per reason; more are counted, so a message stays readable."""


class Cause(enum.Enum):
    NODE_OPTED_OUT = "node-opted-out"
    NOT_SAFE_TO_EVICT = "not-safe-to-evict"
    NO_CONTROLLER = "no-controller"
    KUBE_SYSTEM = "kube-system"
    MUST_MOVE = "must-move"
    MIN_SIZE = "min-size"
    AUTOSCALER = "autoscaler"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class PodFacts:
    namespace: str
    name: str
    owner_kinds: tuple[str, ...] = ()
    """The kinds of its ownerReferences, e.g. ("ReplicaSet",); empty for a bare pod."""
    annotations: Mapping[str, str] = field(default_factory=dict)
    phase: str = "Running"
    terminating: bool = False
    managed: bool = False
    """gpubot's own pod."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Reason:
    cause: Cause
    summary: str
    fix: str


# -- reading the API's objects -----------------------------------------------------------------------


def read_pod(pod: Body) -> PodFacts:
    metadata, status = as_map(pod.get("metadata")), as_map(pod.get("status"))
    return PodFacts(
        namespace=as_text(metadata.get("namespace")),
        name=as_text(metadata.get("name")),
        owner_kinds=tuple(
            kind for o in as_maps(metadata.get("ownerReferences")) if (kind := as_text(o.get("kind")))
        ),
        annotations=as_texts(metadata.get("annotations")),
        phase=as_text(status.get("phase")) or "Pending",
        terminating=bool(metadata.get("deletionTimestamp")),
        managed=workloads.is_managed(pod),
    )


# -- the diagnosis -----------------------------------------------------------------------------------


def diagnose(
    pool: str,
    *,
    nodes: Sequence[cluster_nodes.Node],
    pods: Sequence[PodFacts],
    status_text: str | None,
    min_size: int | None,
) -> list[Reason]:
    """Every reason the pool's nodes stay, most actionable first; one "unknown" reason if none is seen."""
    reasons = _node_reasons(nodes) + _pod_reasons(pods)
    status = autoscaler_status.parse(status_text)
    if min_size:
        reasons.append(_min_size_reason(pool, min_size, nodes, status.group(pool)))
    reasons += _status_reasons(pool, status if status_text is not None else None, blocked=bool(reasons))
    return reasons or [
        Reason(
            Cause.UNKNOWN,
            f"nothing gpubot can see keeps {pool} up: no other pods on its nodes, no opt-out, minimum 0",
            "the autoscaler may be removing the node right now, or failing to; its logs say which",
        )
    ]


def _names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:MAX_NAMED])
    more = len(items) - MAX_NAMED
    return f"{shown} and {more} more" if more > 0 else shown


def _node_reasons(nodes: Sequence[cluster_nodes.Node]) -> list[Reason]:
    held = [n.name for n in nodes if n.annotations.get(SCALE_DOWN_DISABLED) == "true"]
    if not held:
        return []
    one = len(held) == 1
    return [
        Reason(
            Cause.NODE_OPTED_OUT,
            f"node{'' if one else 's'} {_names(held)} {'is' if one else 'are'} annotated "
            f'{SCALE_DOWN_DISABLED}: "true", so the autoscaler never removes {"it" if one else "them"}',
            f"remove the annotation: `kubectl annotate node {held[0]} {SCALE_DOWN_DISABLED}-`",
        )
    ]


def is_ignored(pod: PodFacts) -> bool:
    """Pods the autoscaler does not move before removing a node: DaemonSet and mirror pods, finished or
    leaving pods, and gpubot's own (whose departure is what the caller waits for)."""
    return (
        pod.managed
        or pod.terminating
        or pod.phase in lifecycle.FINISHED_PHASES
        or "DaemonSet" in pod.owner_kinds
        or MIRROR in pod.annotations
    )


def blocking_cause(pod: PodFacts) -> Cause:
    """Why the autoscaler would not simply evict this pod, by its drain rules in their order."""
    safe = pod.annotations.get(SAFE_TO_EVICT)
    if safe == "false":
        return Cause.NOT_SAFE_TO_EVICT
    if safe == "true":
        return Cause.MUST_MOVE  # "true" overrides the controller and kube-system rules
    if not pod.owner_kinds:
        return Cause.NO_CONTROLLER
    if pod.namespace == "kube-system":
        return Cause.KUBE_SYSTEM
    return Cause.MUST_MOVE


def _pod_reasons(pods: Sequence[PodFacts]) -> list[Reason]:
    by_cause: dict[Cause, list[PodFacts]] = {}
    for pod in sorted((p for p in pods if not is_ignored(p)), key=lambda p: p.key):
        by_cause.setdefault(blocking_cause(pod), []).append(pod)
    return [_pod_reason(cause, found) for cause, found in sorted(by_cause.items(), key=_cause_order)]


def _cause_order(item: tuple[Cause, list[PodFacts]]) -> int:
    return list(Cause).index(item[0])


def _pod_reason(cause: Cause, pods: list[PodFacts]) -> Reason:
    one = len(pods) == 1
    names, first = _names([p.key for p in pods]), pods[0]
    they, them, their = ("it", "it", "its") if one else ("they", "them", "their")
    is_, s = ("is", "s") if one else ("are", "")
    delete = f"`kubectl delete pod -n {first.namespace} {first.name}`"
    if cause == Cause.NOT_SAFE_TO_EVICT:
        return Reason(
            cause,
            f'{names} {is_} annotated {SAFE_TO_EVICT}: "false", so the autoscaler will not evict {them} '
            "to free the node",
            f"delete {them} once done ({delete}), or drop the annotation: "
            f"`kubectl annotate pod -n {first.namespace} {first.name} {SAFE_TO_EVICT}-`",
        )
    if cause == Cause.NO_CONTROLLER:
        return Reason(
            cause,
            f"{names} {is_} {'a bare pod' if one else 'bare pods'} with no controller to recreate {them}, "
            f"so the autoscaler will not evict {them}",
            f"delete {them} once done ({delete}); run such work as a Deployment or Job that does not "
            "tolerate the GPU nodes' taint, so it stays off them",
        )
    if cause == Cause.KUBE_SYSTEM:
        return Reason(
            cause,
            f"{names} {is_} {'a kube-system pod' if one else 'kube-system pods'}; the autoscaler does not "
            "evict those without a PodDisruptionBudget",
            f'give {them} a PodDisruptionBudget, or annotate {them} {SAFE_TO_EVICT}: "true" if {they} '
            "may move",
        )
    kinds = sorted({k for p in pods for k in p.owner_kinds})
    owned = f" ({', '.join(kinds)})" if kinds else ""
    return Reason(
        cause,
        f"{names}{owned} run{s} on the GPU node{'' if one else 's'}; the autoscaler removes a node only "
        f"once it can move such pods elsewhere",
        f"if {they} need{s} no GPU, drop the GPU taint's toleration from {their} spec so {they} run{s} "
        f"elsewhere, or scale {them} down",
    )


def _min_size_reason(
    pool: str, min_size: int, nodes: Sequence[cluster_nodes.Node], group: autoscaler_status.NodeGroup | None
) -> Reason:
    high = group.max_size if group is not None else None
    top = str(high) if high is not None else "<max>"
    eks = any(labels.EKS_NODEGROUP_LABEL in n.labels for n in nodes)
    command = (
        f"`aws eks update-nodegroup-config --nodegroup-name {pool} --scaling-config minSize=0`"
        if eks
        else f"`gcloud container node-pools update {pool} --enable-autoscaling --min-nodes 0 "
        f"--max-nodes {top}`"
    )
    kept = f"{min_size} node{'' if min_size == 1 else 's'}"
    return Reason(
        Cause.MIN_SIZE,
        f"{pool}'s minimum size is {min_size}, so the autoscaler always keeps at least {kept}",
        f"set the pool's minimum to 0 to let it scale to zero: {command}",
    )


# -- the autoscaler's own status ---------------------------------------------------------------------


def _autoscaler(summary: str, fix: str) -> list[Reason]:
    return [Reason(Cause.AUTOSCALER, summary, fix)]


def _status_reasons(pool: str, status: autoscaler_status.Status | None, *, blocked: bool) -> list[Reason]:
    if status is None:
        return _autoscaler(
            "no Cluster Autoscaler status (kube-system/cluster-autoscaler-status): nothing may be "
            f"scaling {pool} down",
            "check that the pool has autoscaling on (GKE, EKS) or that the cluster-autoscaler runs",
        )
    if not status.structured:
        return []  # the old plain-text format says nothing this module can rely on
    if status.autoscaler not in ("", "Running"):
        return _autoscaler(
            f"the autoscaler reports itself {status.autoscaler}, so it scales nothing down yet",
            "give it a few minutes; if it stays so, its logs say why",
        )
    group = status.group(pool)
    if group is None:
        return _autoscaler(
            f"the autoscaler's status lists no node group for {pool}: it does not manage the pool, "
            "so nothing removes its nodes",
            "turn on autoscaling for the pool with a minimum of 0",
        )
    return _group_reasons(pool, group, blocked=blocked)


def _group_reasons(pool: str, group: autoscaler_status.NodeGroup, *, blocked: bool) -> list[Reason]:
    if group.health not in ("", "Healthy"):
        return _autoscaler(
            f"the autoscaler reports {pool} {group.health}, and it scales no unhealthy group down",
            f"look at the pool's nodes (`kubectl get nodes -l {labels.GKE_NODEPOOL_LABEL}={pool}`) "
            "and the autoscaler's logs",
        )
    status = group.scale_down
    if status == "NoCandidates":
        return _autoscaler(
            f"the autoscaler's status says ScaleDown: NoCandidates for {pool}: it sees no node there "
            "it may remove",
            "clear what holds the node (above)"
            if blocked
            else "its logs say why each node is not suitable for removal",
        )
    if status == "CandidatesPresent" and not blocked:  # with a blocker above, the count says nothing new
        count = group.candidates
        nodes = f"{count} node{'' if count == 1 else 's'}" if count is not None else "nodes"
        return _autoscaler(
            f"the autoscaler counts {nodes} of {pool} as unneeded (ScaleDown: CandidatesPresent)",
            "it removes an unneeded node after its scale-down-unneeded-time (10 minutes by default); "
            "if the node stays longer, the autoscaler's logs say why its removal fails",
        )
    return []


# -- the words ---------------------------------------------------------------------------------------


def describe(pool: str, reasons: Sequence[Reason], *, nodes: int, idle: timedelta) -> str:
    """The paragraph the episode message carries: the question, then each reason with its fix."""
    up = f"{nodes} node{'' if nodes == 1 else 's'}"
    took = notices.format_elapsed(idle)
    lines = [f"Why isn't {pool} draining? It still has {up}, {took} after gpubot's last workload left:"]
    lines += [f"• {reason.summary}. Fix: {reason.fix}" for reason in reasons]
    return "\n".join(lines)
