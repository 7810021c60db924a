"""The Pod manifest for a `/gpu run`: the seed's hand-written pod, done right, as a pure function.

Right means: the profile's tolerations with Kubernetes' real field names, GPU limits equal to requests,
the node selector, CPU/memory requests, no shell, a securityContext that meets Pod Security "restricted"
(unless the profile needs root: `podsecurity.decide`), and labels and
annotations that let a restarted bot rebuild everything from the cluster alone.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.core import labels, models, podsecurity, quantities

CONTAINER_NAME = "workload"
NAME_PREFIX = "gpu"
OWNER_FRAGMENT_MAX = 24
SUFFIX_LENGTH = 6
TERMINATION_GRACE_SECONDS = 30
AUDIT_RECORDS_KEPT = 20
"""Audit records one pod keeps (the newest); every record is also in the audit log, so none is lost."""

Manifest = dict[str, Any]


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC, whole seconds (`2024-05-01T12:00:00Z`), as Kubernetes writes timestamps."""
    if moment.tzinfo is None:
        raise ValueError("times must be timezone-aware; the core never guesses a zone")
    return moment.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime | None:
    """The inverse of format_time (also accepts offsets and fractions); None for anything else."""
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def pod_name(request: models.RunRequest, owner: models.Owner, *, channel: str, thread_ts: str | None) -> str:
    """`--name` if given, else `gpu-<owner>-<suffix>`.

    The suffix is derived from the Slack thread, not random: a create retried for the same thread (a
    Slack retry, or a restart mid-request) collides with 409 Conflict instead of making a second pod.
    """
    if request.name:
        return request.name
    owner_part = labels.to_dns1123_fragment(owner.user_id, max_length=OWNER_FRAGMENT_MAX) or "user"
    seed = "\x00".join((owner.user_id, channel, thread_ts or "", request.text, request.image))
    return f"{NAME_PREFIX}-{owner_part}-{hashlib.sha256(seed.encode()).hexdigest()[:SUFFIX_LENGTH]}"


def toleration_manifest(toleration: models.Toleration) -> Manifest:
    out: Manifest = {"key": toleration.key, "operator": toleration.operator}
    if toleration.operator == "Equal":
        out["value"] = toleration.value
    if toleration.effect:
        out["effect"] = toleration.effect
    if toleration.toleration_seconds is not None:
        out["tolerationSeconds"] = toleration.toleration_seconds
    return out


def resources_manifest(request: models.RunRequest, profile: models.GpuProfile) -> Manifest:
    """GPU limits = requests (extended resources require it); memory is limited, CPU is not (no throttle)."""
    cpu = quantities.format_cpu(request.cpu_millis or profile.default_cpu_millis)
    memory = quantities.format_memory(request.memory_bytes or profile.default_memory_bytes)
    gpus = str(request.gpus)
    return {
        "requests": {"cpu": cpu, "memory": memory, profile.resource_name: gpus},
        "limits": {"memory": memory, profile.resource_name: gpus},
    }


def container_manifest(
    request: models.RunRequest, profile: models.GpuProfile, security: models.PodSecurity
) -> Manifest:
    """One container; the command after `--` is the argv itself (like `kubectl run --command`), no shell."""
    decision = podsecurity.decide(security, profile.security)
    container: Manifest = {
        "name": CONTAINER_NAME,
        "image": request.image,
        "imagePullPolicy": "IfNotPresent",
        "resources": resources_manifest(request, profile),
        "securityContext": podsecurity.container_context(decision),
    }
    if request.ports:
        container["ports"] = [{"containerPort": port, "protocol": "TCP"} for port in request.ports]
    if request.command:
        container["command"] = list(request.command)
    return container


def spec_manifest(
    request: models.RunRequest, profile: models.GpuProfile, security: models.PodSecurity
) -> Manifest:
    spec: Manifest = {
        "containers": [container_manifest(request, profile, security)],
        "restartPolicy": "Never",
        "tolerations": [toleration_manifest(t) for t in profile.tolerations],
        "nodeSelector": profile.node_selector_map,
        "securityContext": podsecurity.pod_context(podsecurity.decide(security, profile.security)),
        "automountServiceAccountToken": security.automount_service_account_token,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
    }
    if security.service_account_name:
        spec["serviceAccountName"] = security.service_account_name
    if security.priority_class_name:
        spec["priorityClassName"] = security.priority_class_name
    if security.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in security.image_pull_secrets]
    return spec


def pod_labels(owner: models.Owner, profile: models.GpuProfile) -> dict[str, str]:
    found = {
        labels.MANAGED_BY_LABEL: labels.MANAGED_BY_VALUE,
        labels.COMPONENT_LABEL: labels.COMPONENT_VALUE,
        labels.OWNER_LABEL: labels.to_label_value(owner.user_id),
        labels.PROFILE_LABEL: labels.to_label_value(profile.name),
    }
    if profile.queue:
        found[labels.KUEUE_QUEUE_LABEL] = profile.queue
    return found


def _clip(text: str) -> str:
    return text if len(text) <= labels.ANNOTATION_TEXT_MAX else text[: labels.ANNOTATION_TEXT_MAX - 1] + "…"


def audit_json(entries: list[models.AuditEntry]) -> str:
    return json.dumps([audit_fields(entry) for entry in entries], separators=(",", ":"), ensure_ascii=False)


def audit_fields(entry: models.AuditEntry) -> dict[str, str]:
    """Flat who/what/when fields: the audit annotation's records, and the structured log line's extras."""
    return {"action": entry.action, "actor": entry.actor, "at": format_time(entry.at), **dict(entry.detail)}


DELETING_ACTIONS = frozenset({"release", "reap"})
"""Audit actions that are followed by the pod's delete."""


def recorded_delete(audit: str | None) -> dict[str, Any] | None:
    """The newest audit record when it is a release or a reap (the pod was to be deleted after it)."""
    try:
        records = json.loads(audit) if audit else []
    except ValueError:
        return None
    newest = records[-1] if isinstance(records, list) and records else None
    return newest if isinstance(newest, dict) and newest.get("action") in DELETING_ACTIONS else None


def delete_recorded(audit: str | None) -> bool:
    return recorded_delete(audit) is not None


def request_key(trigger_id: str) -> str:
    """What a pod records of the Slack request that asked for it: a digest, as the trigger id opens modals."""
    return hashlib.sha256(trigger_id.encode()).hexdigest()[:20] if trigger_id else ""


def append_audit(existing: str | None, entry: models.AuditEntry, *, keep: int = AUDIT_RECORDS_KEPT) -> str:
    """Add one record to an audit annotation's JSON list, keeping the newest `keep`.

    The bound keeps a long-lived pod under the API's 256 KiB annotation limit; an unreadable old value
    is kept (clipped) rather than lost.
    """
    try:
        records = json.loads(existing) if existing else []
    except ValueError:
        records = None
    if not isinstance(records, list):
        records = [{"unparsed": _clip(existing or "")}]
    records.append(audit_fields(entry))
    return json.dumps(records[-keep:], separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Placement:
    """Where the workload's conversation lives and how long it may run: build_pod's inputs besides the ask."""

    now: datetime
    lease: timedelta
    channel: str
    thread_ts: str | None
    request: str = ""
    """`request_key` of the Slack request, so a redelivery of it finds this pod."""


def run_audit_entry(
    request: models.RunRequest, owner: models.Owner, profile: models.GpuProfile, now: datetime
) -> models.AuditEntry:
    detail = (("image", request.image), ("gpus", str(request.gpus)), ("profile", profile.name))
    return models.AuditEntry(action="run", actor=owner.user_id, at=now, detail=detail)


def release_audit_entry(actor: str, *, owner_id: str, now: datetime) -> models.AuditEntry:
    """A `/gpu release` (or the Release button): who, when, and whether as the owner or as an admin."""
    by = "owner" if actor == owner_id else "admin"
    return models.AuditEntry(action="release", actor=actor, at=now, detail=(("by", by),))


def extension_audit_entry(
    actor: str, *, hours: float, lease_end: datetime, now: datetime
) -> models.AuditEntry:
    """A `/gpu extend` (or the Extend button): who, when, by how much, and the lease end it set."""
    detail = (("hours", f"{hours:g}"), ("lease_end", format_time(lease_end)))
    return models.AuditEntry(action="extend", actor=actor, at=now, detail=detail)


def keep_audit_entry(actor: str, *, kept_until: datetime, now: datetime) -> models.AuditEntry:
    """The Keep button on an idle warning: who vouched that the GPU is in use, and until when."""
    return models.AuditEntry(
        action="keep", actor=actor, at=now, detail=(("kept_until", format_time(kept_until)),)
    )


def lease_annotations(*, requested_at: datetime, lease_end: datetime) -> dict[str, str]:
    """The lease end and the lease's whole length (first request to end), as the pod records them."""
    hours = round((lease_end - requested_at).total_seconds() / 3600, 2)
    return {labels.LEASE_END_ANNOTATION: format_time(lease_end), labels.LEASE_HOURS_ANNOTATION: f"{hours:g}"}


def pod_annotations(
    request: models.RunRequest, owner: models.Owner, profile: models.GpuProfile, placement: Placement
) -> dict[str, str]:
    hours = placement.lease.total_seconds() / 3600
    annotations = {
        labels.CHANNEL_ANNOTATION: placement.channel,
        labels.REQUESTER_ANNOTATION: owner.user_id,
        labels.REQUESTED_AT_ANNOTATION: format_time(placement.now),
        labels.LEASE_END_ANNOTATION: format_time(placement.now + placement.lease),
        labels.LEASE_HOURS_ANNOTATION: f"{hours:g}",
        labels.COMMAND_ANNOTATION: _clip(f"/gpu {request.text}".rstrip()),
        labels.AUDIT_ANNOTATION: audit_json([run_audit_entry(request, owner, profile, placement.now)]),
    }
    if placement.thread_ts:
        annotations[labels.THREAD_TS_ANNOTATION] = placement.thread_ts
    if placement.request:
        annotations[labels.REQUEST_ANNOTATION] = placement.request
    if owner.user_name:
        annotations[labels.REQUESTER_NAME_ANNOTATION] = _clip(owner.user_name)
    if owner.team_id:
        annotations[labels.TEAM_ANNOTATION] = owner.team_id
    return annotations


def build_pod(
    request: models.RunRequest,
    profile: models.GpuProfile,
    owner: models.Owner,
    *,
    now: datetime,
    lease: timedelta,
    channel: str,
    thread_ts: str | None,
    namespace: str,
    security: models.PodSecurity | None = None,
    request_key: str = "",
) -> Manifest:
    """The complete v1 Pod for one accepted request; the caller creates it, nothing here does I/O."""
    placement = Placement(now=now, lease=lease, channel=channel, thread_ts=thread_ts, request=request_key)
    name = pod_name(request, owner, channel=channel, thread_ts=thread_ts)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": pod_labels(owner, profile),
            "annotations": pod_annotations(request, owner, profile, placement),
        },
        "spec": spec_manifest(request, profile, security or models.PodSecurity()),
    }
