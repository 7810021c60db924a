"""Ephemeral containers (`pods/NAME/ephemeralcontainers`), what `kubectl debug pod/NAME` writes.

Follows k8s v1.32.10 (the pinned messages.KUBERNETES_VERSION): pkg/registry/core/pod/strategy.go
ephemeralContainersStrategy takes only spec.ephemeralContainers from the new object, and
pkg/apis/core/validation/validation.go ValidatePodEphemeralContainersUpdate refuses removing or changing
one already there. The kubelet then starts the new ones (sim/cluster/kubelet.py); attaching to one needs
pods/attach, which the sim does not serve, so kubectl gets the apiserver's answer for a path it lacks.
"""

from __future__ import annotations

import copy

from sim.cluster import errors
from sim.cluster.store import Obj

SUBRESOURCE = "ephemeralcontainers"
_SPEC_PATH = "spec.ephemeralContainers"
# validation.go validateEphemeralContainers: what a debug container may not have
_NOT_ALLOWED = ("ports", "resources", "lifecycle", "livenessProbe", "readinessProbe", "startupProbe")


def accept(current: Obj, sent: Obj) -> Obj:
    """The stored pod with only the sent ephemeral containers taken; refusals as the apiserver's 422."""
    old = current["spec"].get("ephemeralContainers") or []
    new = (sent.get("spec") or {}).get("ephemeralContainers") or []
    causes = _causes(current, old, new)
    if causes:
        raise errors.invalid("Pod", current["metadata"]["name"], causes)
    merged = copy.deepcopy(current)
    merged["spec"]["ephemeralContainers"] = copy.deepcopy(new)
    return merged


def _causes(pod: Obj, old: list[Obj], new: list[Obj]) -> list[errors.Cause]:
    if "kubernetes.io/config.mirror" in (pod["metadata"].get("annotations") or {}):
        return [errors.forbidden("", "static pods do not support ephemeral containers")]
    causes: list[errors.Cause] = []
    by_name = {str(c.get("name", "")): c for c in new}
    for was in old:
        now = by_name.get(was["name"])
        if now is None:
            detail = f'existing ephemeral containers "{was["name"]}" may not be removed\n'
            causes.append(errors.forbidden(_SPEC_PATH, detail))
        elif now != was:
            detail = f'existing ephemeral containers "{was["name"]}" may not be changed\n'
            causes.append(errors.forbidden(_SPEC_PATH, detail))
    taken = {
        str(c.get("name", ""))
        for c in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", [])
    }
    for index, container in enumerate(new):
        causes += _container_causes(f"{_SPEC_PATH}[{index}]", container, taken)
        taken.add(str(container.get("name", "")))
    return causes


def _container_causes(path: str, container: Obj, taken: set[str]) -> list[errors.Cause]:
    name = str(container.get("name", ""))
    causes = []
    if not name:
        causes.append(errors.required(f"{path}.name"))
    elif name in taken:
        causes.append(errors.Cause("FieldValueDuplicate", f"{path}.name", f'Duplicate value: "{name}"'))
    if not container.get("image"):
        causes.append(errors.required(f"{path}.image"))
    for key in _NOT_ALLOWED:
        if container.get(key):
            causes.append(errors.forbidden(f"{path}.{key}", "cannot be set for an Ephemeral Container"))
    return causes


def unstarted(pod: Obj) -> list[Obj]:
    """Ephemeral containers the kubelet has not reported on yet."""
    reported = {s.get("name") for s in pod.get("status", {}).get("ephemeralContainerStatuses") or []}
    return [c for c in pod["spec"].get("ephemeralContainers") or [] if c.get("name") not in reported]
