"""Defaulting and the admission plugins a GKE apiserver runs on a pod before validation."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

GPU_RESOURCE_PREFIXES = ("nvidia.com/",)


def default_pod(pod: Obj, *, extended_resource_toleration: bool) -> None:
    """Fill what the apiserver's defaulters fill, so objects read back as on a real cluster."""
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    for container in spec.get("containers") or []:
        if isinstance(container, dict):
            _default_container(container)
    for container in spec.get("initContainers") or []:
        if isinstance(container, dict):
            _default_container(container)
    tolerations = spec.setdefault("tolerations", [])
    if extended_resource_toleration:
        _add_extended_resource_tolerations(spec, tolerations)
    _add_default_toleration_seconds(tolerations)
    status = pod.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", qos_class(spec))


def _default_container(container: Obj) -> None:
    image = str(container.get("image", ""))
    tag = image.rsplit("/", 1)[-1]
    untagged_or_latest = "@" not in image and (":" not in tag or tag.endswith(":latest"))
    container.setdefault("imagePullPolicy", "Always" if untagged_or_latest else "IfNotPresent")
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    resources = container.setdefault("resources", {})
    limits = resources.get("limits") or {}
    if limits:
        # Requests default to limits (core/v1 defaults.go SetDefaults_ResourceRequirements).
        requests = resources.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)


def _add_extended_resource_tolerations(spec: Obj, tolerations: list[Obj]) -> None:
    """ExtendedResourceToleration (enabled on GKE): tolerate the taint named after each extended resource."""
    wanted: set[str] = set()
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        if not isinstance(container, dict):
            continue
        for name in (container.get("resources") or {}).get("requests") or {}:
            if name.startswith(GPU_RESOURCE_PREFIXES):
                wanted.add(name)
    for name in sorted(wanted):
        toleration = {"key": name, "operator": "Exists", "effect": "NoSchedule"}
        if toleration not in tolerations:
            tolerations.append(toleration)


def _add_default_toleration_seconds(tolerations: list[Obj]) -> None:
    """DefaultTolerationSeconds: 300 s for not-ready and unreachable NoExecute taints."""
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(isinstance(t, dict) and t.get("key") == key for t in tolerations):
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            )


def qos_class(spec: Obj) -> str:
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    requests_any = limits_all = False
    limits_all = bool(containers)
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        requests_any = requests_any or bool(requests) or bool(limits)
        guaranteed = all(
            limits.get(r) is not None and requests.get(r, limits.get(r)) == limits.get(r)
            for r in ("cpu", "memory")
        )
        limits_all = limits_all and guaranteed
    if limits_all:
        return "Guaranteed"
    return "Burstable" if requests_any else "BestEffort"


def default_node(node: Obj) -> None:
    node.setdefault("spec", {})
    node.setdefault("status", {})


def default_namespace(namespace: Obj) -> None:
    namespace.setdefault("spec", {"finalizers": ["kubernetes"]})
    namespace.setdefault("status", {"phase": "Active"})
    labels = namespace["metadata"].setdefault("labels", {})
    labels.setdefault("kubernetes.io/metadata.name", namespace["metadata"]["name"])
