"""Pure kube-scheduler Filter/Score decisions, shared by the scheduler and the autoscaler's template nodes.

Both controllers must agree on why a pod does not fit (the same reasons appear in FailedScheduling and in
NotTriggerScaleUp), so the rules live here once, over plain apiserver JSON dicts, with no I/O.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sim.cluster import messages

logger = logging.getLogger(__name__)

Resources = dict[str, int]
"""Base units: cpu in millicores, memory and ephemeral-storage in bytes, everything else a count."""

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
DEFAULT_MAX_PODS = 110  # kubelet --max-pods default
BASIC_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE)

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"  # v1.TaintNodeUnschedulable
SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")  # tainttoleration filterPredicate
TERMINAL_PHASES = ("Succeeded", "Failed")

# Missing from messages.py, copied here with their sources.

MAX_NODE_SCORE = 100  # framework.MaxNodeScore
SCORED_RESOURCES = (CPU, MEMORY)  # NodeResourcesFit LeastAllocated default weights: cpu 1, memory 1

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_BINARY_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIX = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


@dataclass(frozen=True)
class NodeFit:
    """One node's Filter verdict: the failing plugin's reasons, and whether preemption could ever help."""

    reasons: tuple[str, ...] = ()
    resolvable: bool = True
    """False for UnschedulableAndUnresolvable (taint, affinity, unschedulable, nodeName)."""

    @property
    def fits(self) -> bool:
        return not self.reasons


FITS = NodeFit()


def parse_quantity(value: str | int | float) -> Fraction:
    """resource.Quantity, exactly: `500m`, `1Gi`, `1.5`, `2e3`."""
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        raise ValueError(f"quantities must match the regular expression {_QUANTITY.pattern!r}: {value!r}")
    number, suffix = Fraction(match.group(1)), match.group(2) or ""
    if suffix in _BINARY_SUFFIX:
        return number * _BINARY_SUFFIX[suffix]
    exponent = _DECIMAL_SUFFIX[suffix] if suffix in _DECIMAL_SUFFIX else int(suffix[1:] or 0)
    return number * Fraction(10) ** exponent


@functools.lru_cache(maxsize=4096)
def to_base_units(resource: str, value: str | int | float) -> int:
    """Quantity.MilliValue() for cpu, Value() otherwise; both round up, as upstream does.

    Cached: every scheduling pass reads the same few quantities ("2", "8Gi") off every pod and node."""
    amount = parse_quantity(value)
    return math.ceil(amount * 1000 if resource == CPU else amount)


def parse_resource_list(resource_list: Mapping[str, Any] | None) -> Resources:
    return {name: to_base_units(name, quantity) for name, quantity in (resource_list or {}).items()}


def container_requests(container: Mapping[str, Any]) -> Resources:
    """Requests with each missing request defaulted to its limit (the apiserver's defaulting)."""
    resources = container.get("resources") or {}
    merged = parse_resource_list(resources.get("limits"))
    merged.update(parse_resource_list(resources.get("requests")))
    return merged


def add_resources(total: Resources, more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def max_resources(total: Resources, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        total[name] = max(total.get(name, 0), amount)


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    """component-helpers resource.PodRequests: containers summed, max'd with each init step, plus overhead.

    Sidecars (init containers with restartPolicy Always) keep running, so they add to the total and to
    every later init container's footprint.
    """
    spec = pod.get("spec") or {}
    total: Resources = {}
    for container in spec.get("containers") or []:
        add_resources(total, container_requests(container))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for container in spec.get("initContainers") or []:
        step = container_requests(container)
        if container.get("restartPolicy") == "Always":
            add_resources(total, step)
            add_resources(sidecars, step)
            step = dict(sidecars)
        else:
            add_resources(step, sidecars)
        max_resources(init_peak, step)
    max_resources(total, init_peak)
    add_resources(total, parse_resource_list(spec.get("overhead")))
    total[PODS] = 1
    return total


def used_resources(pods_on_node: Iterable[Mapping[str, Any]]) -> Resources:
    """What the scheduler's NodeInfo counts as requested: every non-terminal pod bound to the node."""
    used: Resources = {}
    for pod in pods_on_node:
        if (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES:
            add_resources(used, pod_requests(pod))
    return used


def node_allocatable(node: Mapping[str, Any]) -> Resources:
    allocatable = parse_resource_list((node.get("status") or {}).get("allocatable"))
    allocatable.setdefault(PODS, DEFAULT_MAX_PODS)
    return allocatable


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """v1.Toleration.ToleratesTaint: an empty effect or key is a wildcard; Exists ignores the value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def first_untolerated_taint(
    tolerations: Iterable[Mapping[str, Any]],
    taints: Iterable[Mapping[str, Any]],
    effects: Sequence[str] = SCHEDULING_EFFECTS,
) -> dict[str, Any] | None:
    """v1helper.FindMatchingUntoleratedTaint: the first taint, in node order, that no toleration covers."""
    tolerations = list(tolerations)
    for taint in taints:
        if taint.get("effect") in effects and not any(tolerates(t, taint) for t in tolerations):
            return dict(taint)
    return None


def _requirement_matches(requirement: Mapping[str, Any], values_by_key: Mapping[str, str]) -> bool:
    """One NodeSelectorRequirement; malformed ones match nothing, as a selector that fails to parse does."""
    key, operator = requirement.get("key", ""), requirement.get("operator", "")
    values: list[str] = list(requirement.get("values") or [])
    present = key in values_by_key
    if operator in ("In", "NotIn"):
        if not values:
            return False
        inside = present and values_by_key[key] in values
        return inside if operator == "In" else not inside
    if operator in ("Exists", "DoesNotExist"):
        return not values and present == (operator == "Exists")
    if operator in ("Gt", "Lt"):
        if len(values) != 1 or not present:
            return False
        try:
            actual, bound = int(values_by_key[key]), int(values[0])
        except ValueError:
            return False
        return actual > bound if operator == "Gt" else actual < bound
    return False


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, str], fields: Mapping[str, str]) -> bool:
    expressions = term.get("matchExpressions") or []
    field_expressions = term.get("matchFields") or []
    if not expressions and not field_expressions:
        return False  # an empty term selects nothing
    return all(_requirement_matches(r, labels) for r in expressions) and all(
        _requirement_matches(r, fields) for r in field_expressions
    )


def matches_node_selector(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """NodeAffinity Filter: spec.nodeSelector AND required node affinity (terms ORed, expressions ANDed)."""
    spec = pod.get("spec") or {}
    metadata = node.get("metadata") or {}
    labels: Mapping[str, str] = metadata.get("labels") or {}
    selector: Mapping[str, str] = spec.get("nodeSelector") or {}
    if any(labels.get(key) != value for key, value in selector.items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is None:
        return True
    fields = {"metadata.name": metadata.get("name", "")}
    return any(_term_matches(term, labels, fields) for term in required.get("nodeSelectorTerms") or [])


def insufficient_resources(requested: Mapping[str, int], free: Mapping[str, int]) -> list[str]:
    """noderesources fitsRequest: the pod count always, basic resources only when requested at all."""
    reasons = [messages.TOO_MANY_PODS] if requested.get(PODS, 1) > free.get(PODS, 0) else []
    if not any(amount for name, amount in requested.items() if name != PODS):
        return reasons
    for name in BASIC_RESOURCES:
        if requested.get(name, 0) > 0 and requested.get(name, 0) > free.get(name, 0):
            reasons.append(messages.insufficient(name))
    for name in sorted(set(requested) - {PODS, *BASIC_RESOURCES}):
        if requested[name] > 0 and requested[name] > free.get(name, 0):
            reasons.append(messages.insufficient(name))
    return reasons


def free_resources(node: Mapping[str, Any], used: Mapping[str, int]) -> Resources:
    allocatable = node_allocatable(node)
    return {name: allocatable.get(name, 0) - used.get(name, 0) for name in set(allocatable) | set(used)}


def _unresolvable_reasons(pod: Mapping[str, Any], node: Mapping[str, Any]) -> list[str]:
    """NodeUnschedulable, NodeName, TaintToleration, NodeAffinity in default order; first failure wins."""
    spec = pod.get("spec") or {}
    node_spec = node.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if node_spec.get("unschedulable"):
        cordon = {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
        if not any(tolerates(t, cordon) for t in tolerations):
            return [messages.NODE_UNSCHEDULABLE]
    node_name = (node.get("metadata") or {}).get("name")
    if spec.get("nodeName") and spec["nodeName"] != node_name:
        return [messages.NODE_NAME_MISMATCH]
    taint = first_untolerated_taint(tolerations, node_spec.get("taints") or [])
    if taint is not None:
        return [messages.untolerated_taint(taint.get("key", ""), taint.get("value") or "")]
    if not matches_node_selector(pod, node):
        return [messages.NODE_AFFINITY_MISMATCH]
    return []


def placement_kind(pod: Mapping[str, Any]) -> str:
    """Everything of a pod that `filter_node` reads: two pods of one kind fit the same nodes."""
    spec = pod.get("spec") or {}
    placed_by = ("tolerations", "nodeSelector", "affinity", "nodeName")
    kind = [pod_requests(pod), *(spec.get(key) for key in placed_by)]
    return json.dumps(kind, sort_keys=True)


def filter_node(
    pod: Mapping[str, Any], node: Mapping[str, Any], *, used: Mapping[str, int] | None = None
) -> NodeFit:
    """The Filter phase for one node; `used` is what the pods already bound there request."""
    unresolvable = _unresolvable_reasons(pod, node)
    if unresolvable:
        return NodeFit(tuple(unresolvable), resolvable=False)
    reasons = insufficient_resources(pod_requests(pod), free_resources(node, used or {}))
    return NodeFit(tuple(reasons), resolvable=True)


def failed_scheduling_message(fits: Mapping[str, NodeFit]) -> str:
    """FitError.Error() plus DefaultPreemption's PostFilter text; the sim has no priorities, so no victims."""
    if not fits:
        return messages.NO_NODES_AVAILABLE
    if any(fit.fits for fit in fits.values()):
        raise ValueError("failed_scheduling_message called while a node fits")
    reasons = [reason for fit in fits.values() for reason in fit.reasons]
    preemption = [
        messages.NO_PREEMPTION_VICTIMS if fit.resolvable else messages.PREEMPTION_NOT_HELPFUL
        for fit in fits.values()
    ]
    return messages.fit_error(len(fits), reasons, preemption)


def least_allocated_score(requested: Mapping[str, int], allocatable: Mapping[str, int]) -> int:
    """noderesources leastRequestedScore over cpu and memory, equally weighted, in integer arithmetic."""
    total = 0
    for name in SCORED_RESOURCES:
        capacity, want = allocatable.get(name, 0), requested.get(name, 0)
        if capacity > 0 and want <= capacity:
            total += (capacity - want) * MAX_NODE_SCORE // capacity
    return total // len(SCORED_RESOURCES)


def pick_node(
    pod: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]], used_by_node: Mapping[str, Mapping[str, int]]
) -> str | None:
    """The fitting node with the highest LeastAllocated score after placement; ties go to the first name."""
    request = pod_requests(pod)
    best: tuple[int, str] | None = None
    for node in nodes:
        name: str = (node.get("metadata") or {}).get("name", "")
        used = used_by_node.get(name) or {}
        if not filter_node(pod, node, used=used).fits:
            continue
        after = dict(used)
        add_resources(after, request)
        candidate = (-least_allocated_score(after, node_allocatable(node)), name)
        if best is None or candidate < best:
            best = candidate
    logger.debug("pick_node %s -> %s", (pod.get("metadata") or {}).get("name"), best and best[1])
    return None if best is None else best[1]
