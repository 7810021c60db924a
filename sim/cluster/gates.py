"""Pod scheduling gates (`spec.schedulingGates`) as the API server and the scheduler treat them.

Upstream, checked at kubernetes/kubernetes v1.32.1: pkg/apis/core/validation/validation.go
(validateSchedulingGates, validateOnlyDeletedSchedulingGates, validateNodeSelectorMutation, the gated-pod
branch of ValidatePodUpdate and the nodeName rule of ValidatePodCreate), and
pkg/registry/core/pod/strategy.go (applySchedulingGatedCondition, which sets the PodScheduled condition at
create: the scheduler never sees a gated pod).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sim.cluster.errors import Cause, forbidden, invalid_value

REASON = "SchedulingGated"
"""v1.PodReasonSchedulingGated (staging/src/k8s.io/api/core/v1/types.go)."""
MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
"""applySchedulingGatedCondition's message (pkg/registry/core/pod/strategy.go)."""


def names(spec: Mapping[str, Any]) -> list[str]:
    gates = spec.get("schedulingGates")
    return (
        [str(g.get("name", "")) for g in gates if isinstance(g, Mapping)] if isinstance(gates, list) else []
    )


def is_gated(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec")
    return bool(names(spec)) if isinstance(spec, Mapping) else False


def spec_causes(spec: Mapping[str, Any], path: str, qualified_name_errors: Any) -> list[Cause]:
    """validateSchedulingGates: each name a qualified name, no name twice."""
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, name in enumerate(names(spec)):
        causes += [invalid_value(f"{path}[{i}]", name, msg) for msg in qualified_name_errors(name)]
        if name in seen:
            causes.append(Cause("FieldValueDuplicate", f"{path}[{i}]", f'Duplicate value: "{name}"'))
        seen.add(name)
    return causes


def create_causes(spec: Mapping[str, Any]) -> list[Cause]:
    """ValidatePodCreate: a pod naming its node skips the scheduler, so it may not also wait on gates."""
    if names(spec) and spec.get("nodeName"):
        return [forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared")]
    return []


def update_causes(spec: Mapping[str, Any], old_spec: Mapping[str, Any]) -> list[Cause]:
    """validateOnlyDeletedSchedulingGates and, while the old pod is gated, validateNodeSelectorMutation."""
    old = set(names(old_spec))
    # Upstream keeps the new names in a map, name to its last index: one error per name, at that index.
    added = {name: i for i, name in enumerate(names(spec)) if name not in old}
    causes = [
        forbidden(
            f"spec.schedulingGates[{i}].name",
            f"only deletion is allowed, but found new scheduling gate '{name}'",
        )
        for name, i in sorted(added.items(), key=lambda item: item[1])
    ]
    if old:
        selector, old_selector = _map(spec.get("nodeSelector")), _map(old_spec.get("nodeSelector"))
        if any(selector.get(k) != v for k, v in old_selector.items()):
            shown = _go_string_map(spec.get("nodeSelector"))
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    "spec.nodeSelector",
                    f"Invalid value: {shown}: only additions to spec.nodeSelector are allowed "
                    "(no mutations or deletions)",
                )
            )
    return causes


def munge(spec: Mapping[str, Any], old_spec: Mapping[str, Any], munged: dict[str, Any]) -> None:
    """What ValidatePodUpdate copies from the new spec before comparing the rest: the gates, and the
    nodeSelector of a pod that was gated (Kueue narrows placement in the same write that ungates)."""
    keys = ["schedulingGates"] + (["nodeSelector"] if names(old_spec) else [])
    for key in keys:
        if key in spec:
            munged[key] = spec[key]
        else:
            munged.pop(key, None)


def gated_condition(now: str) -> dict[str, Any]:
    return {
        "type": "PodScheduled",
        "status": "False",
        "reason": REASON,
        "message": MESSAGE,
        "lastProbeTime": None,
        "lastTransitionTime": now,
    }


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _go_string_map(value: Any) -> str:
    """A map[string]string as field.Invalid prints it at v1.32 (apimachinery v0.32 formats with Go's %#v,
    keys sorted; v0.34 moved to JSON): `map[string]string{"a":"z", "c":"d"}`, or `(nil)` when absent."""
    if not isinstance(value, Mapping):
        return "map[string]string(nil)"
    pairs = ", ".join(f"{json.dumps(str(k))}:{json.dumps(str(v))}" for k, v in sorted(value.items()))
    return f"map[string]string{{{pairs}}}"
