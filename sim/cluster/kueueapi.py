"""Kueue's API as Kueue v0.19.2 serves it (kubernetes-sigs/kueue, tag v0.19.2): the four kinds gpubot reads,
their two served versions, the conversion between them, and kubectl's columns.

config/components/crd/bases/kueue.x-k8s.io_*.yaml at v0.19.2: v1beta2 is the storage version, v1beta1 is still
served with `deprecationWarning: This version is deprecated. Use v1beta2 instead.` Objects are stored as
v1beta2 and converted on the way in and out (apis/kueue/v1beta1/*_conversion.go: only renamed fields
differ here).
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from sim.cluster import errors, resources, tables, validation
from sim.cluster.resources import Resource

GROUP = resources.KUEUE_GROUP
STORAGE_VERSION = "v1beta2"
DEPRECATED_VERSION = "v1beta1"
DEPRECATION_WARNING = "This version is deprecated. Use v1beta2 instead."

Obj = dict[str, Any]


STORED = tuple(r for r in resources.KUEUE if r.version == STORAGE_VERSION)
RESOURCE_FLAVORS, CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS = STORED


def is_kueue(res: Resource) -> bool:
    return res.group == GROUP


def deprecation(res: Resource) -> str:
    return DEPRECATION_WARNING if is_kueue(res) and res.version == DEPRECATED_VERSION else ""


# -- conversion (apis/kueue/v1beta1/{workload,clusterqueue,localqueue}_conversion.go) ------------------------
POD_PRIORITY_GROUP, POD_PRIORITY_KIND = "scheduling.k8s.io", "PriorityClass"
WORKLOAD_PRIORITY_KIND = "WorkloadPriorityClass"
SOURCES = {
    "kueue.x-k8s.io/workloadpriorityclass": (GROUP, WORKLOAD_PRIORITY_KIND),
    "scheduling.k8s.io/priorityclass": (POD_PRIORITY_GROUP, POD_PRIORITY_KIND),
}
"""v1beta1 priorityClassSource values ↔ v1beta2 priorityClassRef group and kind
(apis/kueue/v1beta1/constants.go)."""


RENAMED: dict[str, tuple[tuple[str, str, str], ...]] = {
    "workloads": (("status", "accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds"),),
    "clusterqueues": (("spec", "cohort", "cohortName"),),
    "localqueues": (("status", "flavorUsage", "flavorsUsage"),),
}
"""Fields v1beta2 renamed, per kind: (section, v1beta1 name, v1beta2 name)."""


def to_storage(res: Resource, obj: Obj) -> Obj:
    """A v1beta1 body as the v1beta2 object it converts to."""
    if res.version != DEPRECATED_VERSION:
        return obj
    out = _renamed(res, obj, STORAGE_VERSION)
    spec = out.get("spec") or {}
    if res.plural == "workloads":
        source, name = spec.pop("priorityClassSource", ""), spec.pop("priorityClassName", "")
        if source in SOURCES and name:
            group, kind = SOURCES[source]
            spec["priorityClassRef"] = {"group": group, "kind": kind, "name": name}
    return out


def from_storage(res: Resource, obj: Obj) -> Obj:
    """The stored v1beta2 object as `res`'s version shows it."""
    if res.version != DEPRECATED_VERSION:
        return obj
    out = _renamed(res, obj, DEPRECATED_VERSION)
    spec = out.get("spec") or {}
    if res.plural == "workloads":
        ref = spec.pop("priorityClassRef", None)
        for source, (group, kind) in SOURCES.items():
            if ref and (ref.get("group"), ref.get("kind")) == (group, kind):
                spec["priorityClassSource"], spec["priorityClassName"] = source, ref.get("name", "")
    return out


def _renamed(res: Resource, obj: Obj, version: str) -> Obj:
    """A copy of `obj` at `version`, with the kind's renamed fields under that version's names."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = f"{GROUP}/{version}"
    for section, old, new in RENAMED.get(res.plural, ()):
        fields = out.get(section) or {}
        was, now = (old, new) if version == STORAGE_VERSION else (new, old)
        if was in fields:
            fields[now] = fields.pop(was)
    return out


# -- validation -------------------------------------------------------------------------------------------
def validate(res: Resource, obj: Obj, old: Obj | None) -> list[errors.Cause]:
    """The apiextensions server's checks that matter here: object metadata, and the structural schema's
    required fields (`spec` everywhere, the podSets of a Workload, the ClusterQueue of a LocalQueue). Kueue's
    own webhooks (pkg/webhooks) are not simulated beyond this."""
    meta = obj.get("metadata")
    causes = validation.validate_object_meta(
        meta, namespaced=res.namespaced, name_check=validation.is_dns1123_subdomain
    )
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        causes.append(errors.required("spec"))
    elif res.plural == "workloads" and not spec.get("podSets"):
        causes.append(errors.required("spec.podSets"))
    elif res.plural == "localqueues" and not spec.get("clusterQueue"):
        causes.append(errors.required("spec.clusterQueue"))
    if old is not None:
        causes += validation.validate_object_meta_update(meta, old.get("metadata"))
    return causes


# -- kubectl columns: each CRD's additionalPrinterColumns (v1beta2) ------------------------------------------
def condition_status(obj: tables.Obj, kind: str) -> str | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return str(condition.get("status", ""))
    return None


def _column(name: str, doc: str, kind: str = "string", priority: int = 0) -> tables.Column:
    return tables.Column(name, doc, priority=priority, type=kind)


CREATED_DOC = "CreationTimestamp is a timestamp representing the server time when this object was created."
_NAME = tables.Column("Name", "Name must be unique within a namespace.", format="name")
_AGE = _column("Age", "Time this workload was created", "date")


def _age(obj: tables.Obj, now: datetime) -> str:
    return tables.since(obj["metadata"].get("creationTimestamp"), now)


def _print_workload(wl: tables.Obj, now: datetime) -> list[tables.Cell]:
    admission = (wl.get("status") or {}).get("admission") or {}
    return [
        wl["metadata"]["name"],
        (wl.get("spec") or {}).get("queueName"),
        admission.get("clusterQueue"),
        condition_status(wl, "Admitted"),
        condition_status(wl, "Finished"),
        _age(wl, now),
    ]


def _print_cluster_queue(cq: tables.Obj, now: datetime) -> list[tables.Cell]:
    spec, status = cq.get("spec") or {}, cq.get("status") or {}
    return [
        cq["metadata"]["name"],
        spec.get("cohortName"),
        spec.get("queueingStrategy"),
        status.get("pendingWorkloads"),
        status.get("admittedWorkloads"),
    ]


def _print_local_queue(lq: tables.Obj, now: datetime) -> list[tables.Cell]:
    status = lq.get("status") or {}
    return [
        lq["metadata"]["name"],
        (lq.get("spec") or {}).get("clusterQueue"),
        status.get("pendingWorkloads"),
        status.get("admittedWorkloads"),
    ]


def _print_flavor(rf: tables.Obj, now: datetime) -> list[tables.Cell]:
    return [rf["metadata"]["name"], _age(rf, now)]


PRINTERS: dict[str, tuple[tuple[tables.Column, ...], tables.Printer]] = {
    "workloads": (
        (
            _NAME,
            _column("Queue", "Name of the queue this workload was submitted to"),
            _column("Reserved in", "Name of the ClusterQueue where the workload is reserving quota"),
            _column("Admitted", "Admission status"),
            _column("Finished", "Workload finished"),
            _AGE,
        ),
        _print_workload,
    ),
    "clusterqueues": (
        (
            _NAME,
            _column("Cohort", "Cohort that this ClusterQueue belongs to"),
            _column("Strategy", "The queueing strategy used to prioritize workloads", priority=1),
            _column("Pending Workloads", "Number of pending workloads", "integer"),
            _column(
                "Admitted Workloads", "Number of admitted workloads that haven't finished yet", "integer", 1
            ),
        ),
        _print_cluster_queue,
    ),
    "localqueues": (
        (
            _NAME,
            _column("ClusterQueue", "Backing ClusterQueue"),
            _column("Pending Workloads", "Number of pending workloads", "integer"),
            _column(
                "Admitted Workloads", "Number of admitted workloads that haven't finished yet.", "integer"
            ),
        ),
        _print_local_queue,
    ),
    # No additionalPrinterColumns: the apiextensions server's default, Name and Age.
    "resourceflavors": ((_NAME, _column("Age", tables._AGE_DOC, "date")), _print_flavor),
}


tables.PRINTERS.update(PRINTERS)  # tables cannot import this module (it imports tables); it registers itself
