"""Core: a pod manifest read the way a strict API server reads it, before any API server sees it.

kubectl's default `--validate=strict` refuses unknown fields (`strict decoding error`); with validation off
they are dropped without a word. The seed's `important:` for `key:` is the classic: dropped, its toleration
has no key, the API server refuses it (or, on a lax path, the pod never lands on the tainted GPU pool).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from bot.core import models, taints

POD_SPEC_FIELDS = frozenset(
    {
        "activeDeadlineSeconds", "affinity", "automountServiceAccountToken", "containers", "dnsConfig",
        "dnsPolicy", "enableServiceLinks", "ephemeralContainers", "hostAliases", "hostIPC", "hostNetwork",
        "hostPID", "hostUsers", "hostname", "imagePullSecrets", "initContainers", "nodeName", "nodeSelector",
        "os", "overhead", "preemptionPolicy", "priority", "priorityClassName", "readinessGates",
        "resourceClaims", "resources", "restartPolicy", "runtimeClassName", "schedulerName",
        "schedulingGates", "securityContext", "serviceAccount", "serviceAccountName", "setHostnameAsFQDN",
        "shareProcessNamespace", "subdomain", "terminationGracePeriodSeconds", "tolerations",
        "topologySpreadConstraints", "volumes",
    }
)  # fmt: skip
"""core/v1 PodSpec's fields as of Kubernetes 1.32."""
CONTAINER_FIELDS = frozenset(
    {
        "args", "command", "env", "envFrom", "image", "imagePullPolicy", "lifecycle", "livenessProbe", "name",
        "ports", "readinessProbe", "resizePolicy", "resources", "restartPolicy", "securityContext",
        "startupProbe", "stdin", "stdinOnce", "terminationMessagePath", "terminationMessagePolicy", "tty",
        "volumeDevices", "volumeMounts", "workingDir",
    }
)  # fmt: skip
RESOURCES_FIELDS = frozenset({"claims", "limits", "requests"})
FIELD_HINTS = {"important": "key", "toleration": "tolerations", "limit": "limits", "request": "requests"}
"""Mistakes seen in the wild that a spelling distance would not guess (the seed's `important:` first)."""
POD_SPEC_PATHS: Mapping[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
"""Where each workload kind keeps the pod spec it creates pods from."""


@dataclass(frozen=True)
class PodSpec:
    """One pod spec found in a manifest."""

    owner: str
    """`Pod gpu-pod`, `Deployment trainer`: for messages when a file holds several."""
    path: str
    """`spec`, or `spec.template.spec` in a Deployment: the prefix of every field path."""
    spec: Mapping[str, Any]


@dataclass(frozen=True)
class Parsed:
    specs: tuple[PodSpec, ...] = ()
    error: str = ""


def parse(text: str) -> Parsed:
    """Every pod spec in a YAML file (several documents allowed), or why there is none."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        return Parsed(error=f"not valid YAML: {error}")
    specs: list[PodSpec] = []
    for document in documents:
        if not isinstance(document, Mapping):
            return Parsed(error="each YAML document must be a Kubernetes object (a mapping)")
        kind = str(document.get("kind", ""))
        where = POD_SPEC_PATHS.get(kind)
        if where is None:
            continue
        found: Any = document
        for step in where:
            found = found.get(step) if isinstance(found, Mapping) else None
        if not isinstance(found, Mapping):
            return Parsed(error=f"{kind} has no {'.'.join(where)} mapping")
        metadata = document.get("metadata")
        name = metadata.get("name", "") if isinstance(metadata, Mapping) else ""
        specs.append(PodSpec(owner=f"{kind} {name}".strip(), path=".".join(where), spec=found))
    if not specs:
        templates = ", ".join(sorted(k for k in POD_SPEC_PATHS if k != "Pod"))
        return Parsed(error=f"no Pod or pod template ({templates}) in it")
    return Parsed(specs=tuple(specs))


# -- field checks ---------------------------------------------------------------------------------


def unknown_fields(
    entry: Mapping[str, Any], allowed: frozenset[str], path: str, hints: Mapping[str, str] = FIELD_HINTS
) -> list[str]:
    """`path: unknown field "x"`, each with the field meant, or the known ones when no guess is close."""
    problems = []
    for name in sorted(str(k) for k in entry if k not in allowed):
        hinted = hints.get(name)
        close = [hinted] if hinted in allowed else difflib.get_close_matches(name, sorted(allowed), n=1)
        hint = f' — did you mean "{close[0]}"?' if close else f" — known: {', '.join(sorted(allowed))}"
        problems.append(f'{path}: unknown field "{name}"{hint}')
    return problems


def _list(spec: Mapping[str, Any], name: str) -> list[Any]:
    found = spec.get(name)
    return found if isinstance(found, list) else []


def _containers(pod: PodSpec) -> list[tuple[str, Mapping[str, Any]]]:
    return [
        (f"{pod.path}.{kind}[{i}]", c)
        for kind in ("initContainers", "containers")
        for i, c in enumerate(_list(pod.spec, kind))
        if isinstance(c, Mapping)
    ]


def field_problems(pod: PodSpec) -> list[str]:
    """Unknown fields in the spec, its containers and tolerations; then what validation says of those."""
    problems = unknown_fields(pod.spec, POD_SPEC_FIELDS, pod.path)
    for path, container in _containers(pod):
        problems += unknown_fields(container, CONTAINER_FIELDS, path)
        resources = container.get("resources")
        if isinstance(resources, Mapping):
            problems += unknown_fields(resources, RESOURCES_FIELDS, f"{path}.resources")
    raw = pod.spec.get("tolerations")
    if raw is not None and not isinstance(raw, list):
        problems.append(f"{pod.path}.tolerations: must be a list of tolerations")
    for i, entry in enumerate(_list(pod.spec, "tolerations")):
        path = f"{pod.path}.tolerations[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(f"{path}: must be a mapping with key, operator, value, effect")
            continue
        problems += unknown_fields(entry, taints.TOLERATION_FIELDS, path)
        problems += taints.toleration_problems(entry, path)
    selector = pod.spec.get("nodeSelector")
    if selector is not None and not (
        isinstance(selector, Mapping) and all(isinstance(v, str) for v in selector.values())
    ):
        problems.append(f"{pod.path}.nodeSelector: must map label keys to string values (quote numbers)")
    return problems


def tolerations(pod: PodSpec) -> tuple[models.Toleration, ...]:
    """The tolerations the API server would keep: unknown fields dropped, invalid entries left out."""
    return tuple(
        taints.read_toleration(entry)
        for entry in _list(pod.spec, "tolerations")
        if isinstance(entry, Mapping) and not taints.toleration_problems(entry, "")
    )


def invalid_tolerations(pod: PodSpec) -> tuple[str, ...]:
    """Paths of tolerations the API server would not keep as written, so they tolerate nothing."""
    return tuple(
        f"{pod.path}.tolerations[{i}]"
        for i, entry in enumerate(_list(pod.spec, "tolerations"))
        if not isinstance(entry, Mapping)
        or taints.toleration_problems(entry, "")
        or set(entry) - taints.TOLERATION_FIELDS
    )


def node_selector(pod: PodSpec) -> dict[str, str]:
    found = pod.spec.get("nodeSelector")
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, Mapping) else {}


@dataclass(frozen=True)
class GpuAsk:
    container: str
    resource: str
    limit: int
    request: int


def _amount(section: Any, resource: str) -> int:
    value = section.get(resource) if isinstance(section, Mapping) else None
    try:
        return int(str(value)) if value is not None else 0
    except ValueError:
        return 0


def gpu_asks(pod: PodSpec, resources: Iterable[str]) -> list[GpuAsk]:
    """Each container's GPU limit and request, for any of these resource names, where it names one."""
    asks = []
    for path, container in _containers(pod):
        wanted = container.get("resources")
        wanted = wanted if isinstance(wanted, Mapping) else {}
        for resource in resources:
            limit, request = (
                _amount(wanted.get("limits"), resource),
                _amount(wanted.get("requests"), resource),
            )
            if limit or request:
                asks.append(GpuAsk(str(container.get("name") or path), resource, limit, request))
    return asks
