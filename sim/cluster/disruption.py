"""The disruption controller's PodDisruptionBudget status: what the eviction subresource reads.

The eviction handler trusts only status (disruptionsAllowed, observedGeneration), never the pods
themselves, so status is kept current on every pod or budget change, as kube-controller-manager's
disruption controller does (pkg/controller/disruption/disruption.go, v1.32.4).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from typing import Any

from sim.cluster import selectors
from sim.cluster.store import Change, Obj, Store, rfc3339

DISRUPTION_ALLOWED = "DisruptionAllowed"  # policy/v1 DisruptionAllowedCondition
SUFFICIENT_PODS = "SufficientPods"  # policy/v1 SufficientPodsReason
INSUFFICIENT_PODS = "InsufficientPods"  # policy/v1 InsufficientPodsReason


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    """podutil.IsPodReady: the Ready condition is True."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def selects(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """getPodDisruptionBudgets: same namespace, and a nil or empty selector matches nothing."""
    if (pdb.get("metadata") or {}).get("namespace") != (pod.get("metadata") or {}).get("namespace"):
        return False
    selector_dict = (pdb.get("spec") or {}).get("selector")
    if not selector_dict:
        return False
    try:
        selector = selectors.label_selector_from_dict(selector_dict)
    except selectors.SelectorError:
        return False  # "This object has an invalid selector, it does not match the pod"
    return not selector.empty() and selector.matches((pod.get("metadata") or {}).get("labels") or {})


def _scaled(value: Any, expected: int, *, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent: minAvailable rounds up, maxUnavailable rounds up too."""
    if isinstance(value, str) and value.endswith("%"):
        share = int(value[:-1]) * expected / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value)


def desired_healthy(spec: Mapping[str, Any], expected: int) -> int:
    """getExpectedPodCount. The sim has no workload controllers, so every selected pod counts as
    expected (a bare pod's own scale is 1)."""
    if spec.get("maxUnavailable") is not None:
        return max(0, expected - _scaled(spec["maxUnavailable"], expected, round_up=True))
    if spec.get("minAvailable") is not None:
        return _scaled(spec["minAvailable"], expected, round_up=True)
    return expected  # neither set: the API defaults minAvailable to 1 on v1beta1 only; v1 wants one of them


def compute_status(pdb: Obj, pods: Iterable[Obj], *, now: str) -> dict[str, Any]:
    """updatePdbStatus: healthy pods are Ready and not being deleted; disrupted pods don't count."""
    status = dict(pdb.get("status") or {})
    disrupted = dict(status.get("disruptedPods") or {})
    selected = [p for p in pods if selects(pdb, p)]
    alive = {p["metadata"]["name"] for p in selected if not p["metadata"].get("deletionTimestamp")}
    disrupted = {name: stamp for name, stamp in disrupted.items() if name in alive}
    healthy = sum(
        1
        for p in selected
        if is_pod_ready(p)
        and not p["metadata"].get("deletionTimestamp")
        and p["metadata"]["name"] not in disrupted
    )
    expected = len(selected)
    desired = desired_healthy(pdb.get("spec") or {}, expected)
    allowed = max(0, healthy - desired)
    out: dict[str, Any] = {
        "observedGeneration": pdb["metadata"].get("generation", 1),
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": [_condition(status, allowed, now)],
    }
    if disrupted:
        out["disruptedPods"] = disrupted
    return out


def _condition(status: Mapping[str, Any], allowed: int, now: str) -> dict[str, Any]:
    """pdbhelper.UpdateDisruptionAllowedCondition: the transition time moves only with the status."""
    wanted = "True" if allowed > 0 else "False"
    reason = SUFFICIENT_PODS if allowed > 0 else INSUFFICIENT_PODS
    for old in status.get("conditions") or []:
        if old.get("type") == DISRUPTION_ALLOWED and old.get("status") == wanted:
            return {**old, "reason": reason}
    return {
        "type": DISRUPTION_ALLOWED,
        "status": wanted,
        "reason": reason,
        "message": "",
        "lastTransitionTime": now,
    }


def set_status(status: dict[str, Any], pdb: Obj) -> None:
    pdb["status"] = status


class DisruptionController:
    """Recomputes the budgets of a namespace soon after any pod or budget there changes."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._dirty: set[str] = set()
        store.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        if change.resource not in ("pods", "poddisruptionbudgets"):
            return
        namespace = change.obj["metadata"].get("namespace", "")
        if not self._dirty:
            self.store.clock.call_soon(self.sync)
        self._dirty.add(namespace)

    def sync(self) -> None:
        namespaces, self._dirty = self._dirty, set()
        for namespace in sorted(namespaces):
            budgets = self.store.items("poddisruptionbudgets", namespace)
            if not budgets:
                continue  # most namespaces have none: spare copying their pods on every pod change
            pods = self.store.items("pods", namespace)
            for pdb in budgets:
                status = compute_status(pdb, pods, now=rfc3339(self.store.clock))
                name = pdb["metadata"]["name"]
                self.store.mutate(
                    "poddisruptionbudgets", namespace, name, functools.partial(set_status, status)
                )
