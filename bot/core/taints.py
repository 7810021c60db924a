"""Core: taints and the scheduler's toleration rules, to tell in advance whether a pod may land on a pool.

`tolerates` is upstream's `Toleration.ToleratesTaint` (k8s.io/api/core/v1/toleration.go) line for line;
only NoSchedule and NoExecute taints keep a pod off a node (the TaintToleration filter ignores
PreferNoSchedule), which is what `blocks` says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.core import labels, models

BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
TRANSIENT_PREFIXES = (
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "startup-taint.cluster-autoscaler.kubernetes.io/",
    "status-taint.cluster-autoscaler.kubernetes.io/",
)
"""Taints the node lifecycle, the cloud controller and the autoscaler put on and take off by themselves."""
TRANSIENT_KEYS = frozenset({"ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler"})
TOLERATION_FIELDS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        """`key=value:Effect`, as `kubectl taint` and `gcloud --node-taints` write it."""
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


EXPECTED_GPU_TAINT = Taint(labels.GPU_TAINT_KEY, "present", "NoSchedule")
"""The seed's taint, and GKE's: keeps every pod that does not ask for a GPU off the expensive nodes."""


def tolerates(toleration: models.Toleration, taint: Taint) -> bool:
    """Upstream's ToleratesTaint: empty effect matches every effect, empty key every key (with Exists)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def blocks(taint: Taint) -> bool:
    return taint.effect in BLOCKING_EFFECTS


def untolerated(tolerations: Iterable[models.Toleration], found: Iterable[Taint]) -> list[Taint]:
    """The taints that keep a pod with these tolerations off the node, in the order given."""
    tolerations = tuple(tolerations)
    return [t for t in found if blocks(t) and not any(tolerates(x, t) for x in tolerations)]


def is_transient(taint: Taint) -> bool:
    """A taint no operator configures: not-ready, uninitialized, the autoscaler's own on a node it removes."""
    return taint.key in TRANSIENT_KEYS or taint.key.startswith(TRANSIENT_PREFIXES)


def is_gpu_taint(taint: Taint) -> bool:
    """The GPU taint in any value (`present` on GKE, often `true` on EKS), with an effect that blocks."""
    return taint.key == labels.GPU_TAINT_KEY and blocks(taint)


def from_node(node: Mapping[str, Any]) -> tuple[Taint, ...]:
    spec = node.get("spec")
    raw = spec.get("taints") if isinstance(spec, Mapping) else None
    return tuple(
        Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect", "")))
        for t in (raw if isinstance(raw, list) else [])
        if isinstance(t, Mapping)
    )


def render(found: Iterable[Taint]) -> str:
    return ", ".join(str(t) for t in found) or "none"


def toleration_problems(entry: Mapping[str, Any], path: str) -> list[str]:
    """What API-server validation says of a toleration once unknown fields are gone: ValidateTolerations
    (kubernetes/kubernetes pkg/apis/core/validation/validation.go, v1.32), its key and value rules cut
    short of the regex that apimachinery's RegexError appends."""
    key, operator = str(entry.get("key") or ""), str(entry.get("operator") or "")
    value, effect = str(entry.get("value") or ""), str(entry.get("effect") or "")
    problems = []
    if key and not labels.is_qualified_name(key):
        problems.append(f'{path}.key: Invalid value: "{key}": name part {labels.QUALIFIED_NAME_RULE}')
    if operator in ("", "Equal") and not labels.is_label_value(value):
        problems.append(f'{path}.operator: Invalid value: "{value}": {labels.LABEL_VALUE_RULE}')
    if operator and operator not in TOLERATION_OPERATORS:
        problems.append(
            f'{path}.operator: Unsupported value: "{operator}": supported values: "Equal", "Exists"'
        )
    elif not key and operator != "Exists":
        problems.append(
            f'{path}.operator: Invalid value: "{operator}": operator must be Exists when `key` is empty, '
            'which means "match all values and all keys"'
        )
    if operator == "Exists" and value:
        problems.append(
            f"{path}.operator: Invalid value: \"{value}\": value must be empty when `operator` is 'Exists'"
        )
    if effect and effect not in TAINT_EFFECTS:
        problems.append(
            f'{path}.effect: Unsupported value: "{effect}": supported values: '
            + ", ".join(f'"{e}"' for e in TAINT_EFFECTS)
        )
    if entry.get("tolerationSeconds") is not None and effect != "NoExecute":
        problems.append(
            f'{path}.effect: Invalid value: "{effect}": '
            "effect must be 'NoExecute' when `tolerationSeconds` is set"
        )
    return problems


def read_toleration(entry: Mapping[str, Any]) -> models.Toleration:
    """A toleration as the API server keeps it (check `toleration_problems` first): absent fields empty."""
    return models.Toleration(
        key=str(entry.get("key") or ""),
        operator=str(entry.get("operator") or "Equal"),
        value=str(entry.get("value") or ""),
        effect=str(entry.get("effect") or ""),
    )
