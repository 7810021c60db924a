"""Server-side Table replies, so `kubectl get` prints the same columns it shows against a real apiserver.

kubectl asks for `as=Table;g=meta.k8s.io;v=v1` and prints whatever columns the server sends; without
them it falls back to NAME/AGE. The printers here port k8s.io/kubernetes pkg/printers/internalversion
(printPod, printNode, printEvent, ...) cell for cell. The apiserver always renders the wide cells and
kubectl hides `priority: 1` columns unless `-o wide`, so every printer returns all cells.
Events are printed from the stored core/v1 shape, as upstream prints the internal type for both groups.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

logger = logging.getLogger(__name__)

Obj = Mapping[str, Any]
Cell = str | int | None
"""None is a CRD column with no value: kubectl prints `<none>`."""
Printer = Callable[[Obj, datetime], list[Cell]]

INCLUDE_NONE = "None"
INCLUDE_METADATA = "Metadata"
INCLUDE_OBJECT = "Object"

NODE_ROLE_PREFIX = "node-role.kubernetes.io/"
NODE_ROLE_LABEL = "kubernetes.io/role"
NODE_UNREACHABLE_POD_REASON = "NodeLost"  # k8s.io/kubernetes pkg/util/node


@dataclass(frozen=True)
class Column:
    name: str
    description: str
    priority: int = 0
    type: str = "string"
    format: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


def _columns(*specs: tuple[str, str], wide: tuple[str, ...] = ()) -> tuple[Column, ...]:
    """Columns in upstream order; `wide` ones get priority 1, and "Name" is the `format: name` column."""
    return tuple(
        Column(name, doc, priority=int(name in wide), format="name" if name == "Name" else "")
        for name, doc in specs
    )


# Descriptions are upstream's SwaggerDoc() texts, cut to their first sentence: kubectl never prints them.
_NAME = ("Name", "Name must be unique within a namespace.")
_AGE_DOC = "CreationTimestamp is a timestamp representing the server time when this object was created."
_AGE = ("Age", _AGE_DOC)
_ADDRESSES_DOC = "List of addresses reachable to the node."

POD_COLUMNS = _columns(
    _NAME,
    ("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    ("Status", "The aggregate status of the containers in this pod."),
    (
        "Restarts",
        "The number of times the containers in this pod have been restarted and when the last "
        "container in this pod has restarted.",
    ),
    _AGE,
    ("IP", "podIP address allocated to the pod."),
    ("Node", "NodeName indicates in which node this pod is scheduled."),
    (
        "Nominated Node",
        "nominatedNodeName is set only when this pod preempts other pods on the node, but it "
        "cannot be scheduled right away as preemption victims receive their graceful termination periods.",
    ),
    ("Readiness Gates", "If specified, all readiness gates will be evaluated for pod readiness."),
    wide=("IP", "Node", "Nominated Node", "Readiness Gates"),
)
NODE_COLUMNS = _columns(
    _NAME,
    ("Status", "The status of the node"),
    ("Roles", "The roles of the node"),
    _AGE,
    ("Version", "Kubelet Version reported by the node."),
    ("Internal-IP", _ADDRESSES_DOC),
    ("External-IP", _ADDRESSES_DOC),
    ("OS-Image", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
    ("Kernel-Version", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
    ("Container-Runtime", "ContainerRuntime Version reported by the node through runtime remote API."),
    wide=("Internal-IP", "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"),
)
EVENT_COLUMNS = _columns(
    ("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
    ("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
    (
        "Reason",
        "This should be a short, machine understandable string that gives the reason for the "
        "transition into the object's current status.",
    ),
    ("Object", "The object that this event is about."),
    (
        "Subobject",
        "If referring to a piece of an object instead of an entire object, this string should "
        "contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].",
    ),
    ("Source", "The component reporting this event. Should be a short, machine understandable string."),
    ("Message", "A human-readable description of the status of this operation."),
    (
        "First Seen",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
    ),
    ("Count", "The number of times this event has occurred."),
    _NAME,
    wide=("Subobject", "Source", "First Seen", "Count", "Name"),
)
NAMESPACE_COLUMNS = _columns(_NAME, ("Status", "The status of the namespace"), _AGE)
CONFIGMAP_COLUMNS = _columns(_NAME, ("Data", "Data contains the configuration data."), _AGE)
LEASE_COLUMNS = _columns(
    _NAME, ("Holder", "holderIdentity contains the identity of the holder of a current lease."), _AGE
)
# rest.NewDefaultTableConvertor: what the apiserver sends for a type without printers.
# podDisruptionBudgetColumnDefinitions, pkg/printers/internalversion/printers.go (v1.32.4).
PDB_COLUMNS = (
    *_columns(
        _NAME,
        ("Min Available", "The minimum number of pods that must be available."),
        ("Max Unavailable", "The maximum number of pods that may be unavailable."),
    ),
    Column(
        "Allowed Disruptions", "Calculated number of pods that may be disrupted at this time.", type="integer"
    ),
    *_columns(_AGE),
)
DEFAULT_COLUMNS = (*_columns(_NAME), Column("Created At", _AGE_DOC, type="date"))

# Row conditions printPod sets for finished pods (metav1.RowCompleted).
POD_FINISHED_MESSAGES = {"Succeeded": "The pod has completed successfully.", "Failed": "The pod failed."}


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration: about 2-3 significant figures."""
    whole = int(seconds)  # Go's int(d.Seconds()) truncates toward zero
    if whole < -1:
        return "<invalid>"  # more than a second of clock skew into the future
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        return _two_units(minutes, "m", whole % 60, "s")
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        return _two_units(hours, "h", minutes % 60, "m")
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return _two_units(hours // 24, "d", hours % 24, "h")
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        return _two_units(hours // 24 // 365, "y", (hours // 24) % 365, "d")
    return f"{hours // 24 // 365}y"


def _two_units(big: int, big_unit: str, small: int, small_unit: str) -> str:
    return f"{big}{big_unit}" if small == 0 else f"{big}{big_unit}{small}{small_unit}"


def parse_time(value: Any) -> datetime | None:
    """An RFC3339 Time or MicroTime as stored, or None for the zero/absent time."""
    if not isinstance(value, str) or not value:
        return None
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        logger.debug("unparseable timestamp %s", value)
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)  # Kubernetes times are UTC


def since(value: Any, now: datetime) -> str:
    """translateTimestampSince over a stored timestamp string."""
    return elapsed(parse_time(value), now)


def elapsed(stamp: datetime | None, now: datetime) -> str:
    """The human age of `stamp` at `now`, or "<unknown>" for a zero timestamp."""
    if stamp is None:
        return "<unknown>"
    return human_duration((now - stamp).total_seconds())


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def _age(obj: Obj, now: datetime) -> str:
    return since(_meta(obj).get("creationTimestamp"), now)


@dataclass
class _PodTally:
    """What printPod accumulates while it walks the container statuses."""

    reason: str
    ready: int = 0
    restarts: int = 0
    last_restart: datetime | None = None

    def count_restarts(self, status: Mapping[str, Any]) -> None:
        self.restarts += int(status.get("restartCount") or 0)
        self.last_restart = _later(self.last_restart, _last_termination(status))


def _last_termination(status: Mapping[str, Any]) -> datetime | None:
    terminated = (status.get("lastState") or {}).get("terminated")
    return parse_time(terminated.get("finishedAt")) if terminated is not None else None


def _later(current: datetime | None, candidate: datetime | None) -> datetime | None:
    if candidate is None or (current is not None and current >= candidate):
        return current
    return candidate


def _has_condition(pod: Obj, kind: str) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _pod_reason(pod: Obj) -> str:
    status = pod.get("status") or {}
    reason = str(status.get("reason") or status.get("phase") or "")
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    return reason


def _walk_init_containers(pod: Obj, tally: _PodTally, sidecars: set[str]) -> tuple[bool, _PodTally]:
    """The init-container loop of printPod; returns whether the pod is still initializing."""
    sidecar_tally = _PodTally(tally.reason)
    init_specs = (pod.get("spec") or {}).get("initContainers") or []
    for index, status in enumerate((pod.get("status") or {}).get("initContainerStatuses") or []):
        tally.count_restarts(status)
        is_sidecar = status.get("name") in sidecars
        if is_sidecar:
            sidecar_tally.count_restarts(status)
        state = status.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and int(terminated.get("exitCode") or 0) == 0:
            continue
        if is_sidecar and status.get("started"):
            tally.ready += 1 if status.get("ready") else 0
            continue
        if terminated is not None:
            tally.reason = "Init:" + _terminated_reason(terminated)
        elif waiting is not None and waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            tally.reason = "Init:" + str(waiting["reason"])
        else:
            tally.reason = f"Init:{index}/{len(init_specs)}"
        return True, sidecar_tally
    return False, sidecar_tally


def _terminated_reason(terminated: Mapping[str, Any]) -> str:
    if terminated.get("reason"):
        return str(terminated["reason"])
    if terminated.get("signal"):
        return f"Signal:{terminated['signal']}"
    return f"ExitCode:{int(terminated.get('exitCode') or 0)}"


def _walk_containers(pod: Obj, tally: _PodTally) -> None:
    """The app-container loop of printPod: the last container with a waiting/terminated reason wins."""
    has_running = False
    for status in reversed((pod.get("status") or {}).get("containerStatuses") or []):
        tally.count_restarts(status)
        state = status.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting is not None and waiting.get("reason"):
            tally.reason = str(waiting["reason"])
        elif terminated is not None:
            tally.reason = _terminated_reason(terminated)
        elif status.get("ready") and state.get("running") is not None:
            has_running = True
            tally.ready += 1
    if tally.reason == "Completed" and has_running:
        tally.reason = "Running" if _has_condition(pod, "Ready") else "NotReady"


def print_pod(pod: Obj, now: datetime) -> list[Cell]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    sidecars = {c.get("name") for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"}
    total = len(spec.get("containers") or []) + len(sidecars)
    tally = _PodTally(_pod_reason(pod))
    initializing, sidecar_tally = _walk_init_containers(pod, tally, sidecars)
    if not initializing or _has_condition(pod, "Initialized"):
        # Once initialized, only sidecar restarts count alongside the app containers.
        tally.restarts, tally.last_restart = sidecar_tally.restarts, sidecar_tally.last_restart
        _walk_containers(pod, tally)
    deleting = bool(_meta(pod).get("deletionTimestamp"))
    if deleting and status.get("reason") == NODE_UNREACHABLE_POD_REASON:
        tally.reason = "Unknown"
    elif deleting and status.get("phase") not in ("Succeeded", "Failed"):
        tally.reason = "Terminating"
    restarts = str(tally.restarts)
    if tally.restarts and tally.last_restart is not None:
        restarts = f"{tally.restarts} ({elapsed(tally.last_restart, now)} ago)"
    return [
        _meta(pod).get("name", ""),
        f"{tally.ready}/{total}",
        tally.reason,
        restarts,
        _age(pod, now),
        _pod_ip(status) or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        _readiness_gates(pod),
    ]


def _pod_ip(status: Mapping[str, Any]) -> str:
    # v1→internal conversion makes podIP authoritative and fills podIPs from it.
    ips = status.get("podIPs") or [{}]
    return str(status.get("podIP") or ips[0].get("ip") or "")


def _readiness_gates(pod: Obj) -> str:
    gates = (pod.get("spec") or {}).get("readinessGates") or []
    if not gates:
        return "<none>"
    conditions = {
        c.get("type"): c.get("status") for c in reversed((pod.get("status") or {}).get("conditions") or [])
    }
    true_count = sum(1 for gate in gates if conditions.get(gate.get("conditionType")) == "True")
    return f"{true_count}/{len(gates)}"


def print_node(node: Obj, now: datetime) -> list[Cell]:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    ready = {c.get("type"): c.get("status") for c in status.get("conditions") or []}.get("Ready")
    states = ["Unknown" if ready is None else "Ready" if ready == "True" else "NotReady"]
    if spec.get("unschedulable"):
        states.append("SchedulingDisabled")
    info = status.get("nodeInfo") or {}
    return [
        _meta(node).get("name", ""),
        ",".join(states),
        ",".join(_node_roles(node)) or "<none>",
        _age(node, now),
        info.get("kubeletVersion", ""),
        _node_address(status, "InternalIP"),
        _node_address(status, "ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _node_roles(node: Obj) -> list[str]:
    roles: set[str] = set()
    for key, value in (_meta(node).get("labels") or {}).items():
        if key.startswith(NODE_ROLE_PREFIX) and key[len(NODE_ROLE_PREFIX) :]:
            roles.add(key[len(NODE_ROLE_PREFIX) :])
        elif key == NODE_ROLE_LABEL and value:
            roles.add(value)
    return sorted(roles)


def _node_address(status: Mapping[str, Any], kind: str) -> str:
    return next((a["address"] for a in status.get("addresses") or [] if a.get("type") == kind), "<none>")


def print_event(event: Obj, now: datetime) -> list[Cell]:
    first_seen = since(event.get("firstTimestamp"), now)
    if parse_time(event.get("firstTimestamp")) is None:
        first_seen = since(event.get("eventTime"), now)
    last_seen = since(event.get("lastTimestamp"), now)
    if parse_time(event.get("lastTimestamp")) is None:
        last_seen = first_seen
    count = int(event.get("count") or 0)
    series = event.get("series")
    if series is not None:
        last_seen, count = since(series.get("lastObservedTime"), now), int(series.get("count") or 0)
    elif count == 0:
        count = 1  # singleton events carry no count in the new API
    involved = event.get("involvedObject") or {}
    target = str(involved.get("kind", "")).lower()
    if involved.get("name"):
        target = f"{target}/{involved['name']}"
    return [
        last_seen,
        event.get("type", ""),
        event.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        _event_source(event),
        str(event.get("message", "")).strip(),
        first_seen,
        count,
        _meta(event).get("name", ""),
    ]


def _event_source(event: Obj) -> str:
    """formatEventSource: "component, host", falling back to the reporting controller and instance."""
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    host = source.get("host") or event.get("reportingInstance") or ""
    return f"{component}, {host}" if host else str(component)


def print_namespace(namespace: Obj, now: datetime) -> list[Cell]:
    phase = (namespace.get("status") or {}).get("phase", "")
    return [_meta(namespace).get("name", ""), phase, _age(namespace, now)]


def print_configmap(configmap: Obj, now: datetime) -> list[Cell]:
    keys = len(configmap.get("data") or {}) + len(configmap.get("binaryData") or {})
    return [_meta(configmap).get("name", ""), keys, _age(configmap, now)]


def print_lease(lease: Obj, now: datetime) -> list[Cell]:
    holder = (lease.get("spec") or {}).get("holderIdentity") or ""
    return [_meta(lease).get("name", ""), holder, _age(lease, now)]


def print_pdb(pdb: Obj, now: datetime) -> list[Cell]:
    """printPodDisruptionBudget: an unset bound prints N/A."""
    spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
    bounds = [
        str(spec[key]) if spec.get(key) is not None else "N/A" for key in ("minAvailable", "maxUnavailable")
    ]
    return [_meta(pdb).get("name", ""), *bounds, int(status.get("disruptionsAllowed", 0)), _age(pdb, now)]


def print_default(obj: Obj, now: datetime) -> list[Cell]:
    created = parse_time(_meta(obj).get("creationTimestamp"))
    # Go formats the zero time too, as RFC3339 in UTC.
    stamp = created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if created else "0001-01-01T00:00:00Z"
    return [_meta(obj).get("name", ""), stamp]


PRINTERS: dict[str, tuple[tuple[Column, ...], Printer]] = {
    "pods": (POD_COLUMNS, print_pod),
    "nodes": (NODE_COLUMNS, print_node),
    "events": (EVENT_COLUMNS, print_event),
    "namespaces": (NAMESPACE_COLUMNS, print_namespace),
    "configmaps": (CONFIGMAP_COLUMNS, print_configmap),
    "leases": (LEASE_COLUMNS, print_lease),
    "poddisruptionbudgets": (PDB_COLUMNS, print_pdb),
}


def columns(plural: str) -> tuple[Column, ...]:
    return PRINTERS.get(plural, (DEFAULT_COLUMNS, print_default))[0]


def table(
    plural: str,
    objects: Sequence[Obj],
    *,
    now: datetime,
    resource_version: str,
    include_object: str = INCLUDE_METADATA,
    continue_token: str = "",
) -> dict[str, Any]:
    """A meta.k8s.io/v1 Table of `objects`, as the apiserver answers a list (or get) asking for one."""
    metadata: dict[str, Any] = {}
    if resource_version:  # ListMeta fields are omitempty
        metadata["resourceVersion"] = resource_version
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": [column.to_wire() for column in columns(plural)],
        "rows": [_row(plural, obj, now, include_object) for obj in objects],
    }


def row(plural: str, obj: Obj, now: datetime, include_object: str = INCLUDE_METADATA) -> dict[str, Any]:
    """The one-row Table a watch event carries, stamped with the object's resourceVersion as upstream does."""
    version = str(_meta(obj).get("resourceVersion", ""))
    return table(plural, [obj], now=now, resource_version=version, include_object=include_object)


def _row(plural: str, obj: Obj, now: datetime, include_object: str) -> dict[str, Any]:
    printer = PRINTERS.get(plural, (DEFAULT_COLUMNS, print_default))[1]
    out: dict[str, Any] = {"cells": printer(obj, now)}
    phase = (obj.get("status") or {}).get("phase", "")
    if plural == "pods" and phase in POD_FINISHED_MESSAGES:
        out["conditions"] = [
            {"type": "Completed", "status": "True", "reason": phase, "message": POD_FINISHED_MESSAGES[phase]}
        ]
    embedded = _embedded_object(obj, include_object)
    if embedded is not None:
        out["object"] = embedded
    return out


def _embedded_object(obj: Obj, include_object: str) -> dict[str, Any] | None:
    """The row's `object` per `includeObject`; an empty value means Metadata, kubectl's default."""
    if include_object == INCLUDE_NONE:
        return None
    if include_object == INCLUDE_OBJECT:
        return copy.deepcopy(dict(obj))
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": copy.deepcopy(dict(_meta(obj))),
    }
