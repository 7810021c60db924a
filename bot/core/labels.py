"""Every label, annotation and taint key gpubot writes or reads, in one place, plus Kubernetes' naming rules.

Kubernetes is the source of truth: after a restart the bot rebuilds its view from these keys alone, so
they are part of the on-cluster contract and must never be renamed casually.
"""

from __future__ import annotations

import hashlib
import re

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "gpubot"
MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
"""The label selector every list and watch of gpubot's pods uses."""

COMPONENT_LABEL = "app.kubernetes.io/component"
COMPONENT_VALUE = "gpu-workload"
OWNER_LABEL = "gpubot.dev/owner"
"""Label-safe Slack user id of the owner (e.g. U01ABC), so `owner=U01ABC` selects one user's pods."""
PROFILE_LABEL = "gpubot.dev/profile"

CHANNEL_ANNOTATION = "gpubot.dev/channel"
THREAD_TS_ANNOTATION = "gpubot.dev/thread-ts"
REQUESTER_ANNOTATION = "gpubot.dev/requester"
"""The exact Slack user id (and name) of who asked, unsanitised, for display and owner checks."""
REQUESTER_NAME_ANNOTATION = "gpubot.dev/requester-name"
TEAM_ANNOTATION = "gpubot.dev/team"
REQUESTED_AT_ANNOTATION = "gpubot.dev/requested-at"
LEASE_END_ANNOTATION = "gpubot.dev/lease-end"
"""RFC 3339 UTC time after which the reaper may delete the pod."""
LEASE_HOURS_ANNOTATION = "gpubot.dev/lease-hours"
COMMAND_ANNOTATION = "gpubot.dev/command"
"""The original slash command text, as typed."""
AUDIT_ANNOTATION = "gpubot.dev/audit"
"""A JSON list of {action, actor, at, detail} records: who did what to this workload, and when."""
REMINDED_FOR_ANNOTATION = "gpubot.dev/reminded-for"
"""The lease end (RFC 3339) the expiry reminder was sent for; a new lease end re-arms the reminder."""
NUDGED_FOR_ANNOTATION = "gpubot.dev/nudged-for"
IDLE_WARNED_AT_ANNOTATION = "gpubot.dev/idle-warned-at"
"""When the owner was told the GPU is idle; cleared once it is busy again."""
IDLE_EVIDENCE_ANNOTATION = "gpubot.dev/idle-evidence"
"""What the idle warning was judged on (`notebooks.mark`): the GPU alone, or with the notebook's Jupyter."""
KEPT_UNTIL_ANNOTATION = "gpubot.dev/kept-until"
"""The owner pressed Keep on an idle warning: no idle release before this time."""
TELLING_SINCE_ANNOTATION = "gpubot.dev/telling-since"
"""A replica claimed a reaper act and is posting its message; empty once posted. Older than the policy's
`telling_timeout`, the claim is void (its replica died mid-act) and the act is decided again."""
REQUEST_ANNOTATION = "gpubot.dev/slack-request"
"""A digest of the Slack request (trigger id) that asked for the pod: a redelivery finds it and stops."""

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""The LocalQueue a pod is submitted to: Kueue gates such a pod until its Workload is admitted
(kubernetes-sigs/kueue v0.19.2 pkg/controller/constants/constants.go, `QueueLabel`)."""

KUEUE_GATE = "kueue.x-k8s.io/admission"
"""The scheduling gate Kueue puts on a queued pod and lifts once its Workload is admitted
(kubernetes-sigs/kueue v0.19.2 pkg/controller/jobs/pod/constants/constants.go, `SchedulingGateName`)."""

GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT_KEY = "nvidia.com/gpu"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
EKS_ACCELERATOR_LABEL = "k8s.amazonaws.com/accelerator"
GKE_NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
EKS_NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
POOL_LABELS = (GKE_NODEPOOL_LABEL, EKS_NODEGROUP_LABEL)
"""Node labels naming the pool a node belongs to, in the order they are trusted."""

LABEL_VALUE_MAX = 63
DNS1123_LABEL_MAX = 63
ANNOTATION_TEXT_MAX = 4096
"""Annotations may total 256 KiB per object; one free-text value is kept far below that."""

_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_DNS1123_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?")
_NOT_LABEL_CHAR = re.compile(r"[^-A-Za-z0-9_.]+")
_NOT_DNS_CHAR = re.compile(r"[^-a-z0-9]+")


QUALIFIED_NAME_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character"
)
LABEL_VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character"
)
"""apimachinery's qualifiedNameErrMsg and labelValueErrMsg (k8s.io/apimachinery
pkg/util/validation/validation.go)."""
_QUALIFIED_NAME = re.compile(
    r"(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)


def is_qualified_name(text: str) -> bool:
    """Kubernetes' `[prefix/]name` rule for label keys, taint keys and resource names."""
    prefix, _, _ = text.rpartition("/")
    return len(prefix) <= 253 and _QUALIFIED_NAME.fullmatch(text) is not None


def is_label_value(text: str) -> bool:
    """Kubernetes' label value rule: empty, or ≤ 63 alphanumerics with `-_.` inside."""
    return len(text) <= LABEL_VALUE_MAX and _LABEL_VALUE.fullmatch(text) is not None


def is_dns1123_label(text: str) -> bool:
    """Kubernetes' DNS-1123 label rule (pod names we generate, and --name)."""
    return len(text) <= DNS1123_LABEL_MAX and _DNS1123_LABEL.fullmatch(text) is not None


def _digest(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def to_label_value(text: str) -> str:
    """Make any user-supplied text label-safe; valid values pass through unchanged.

    Lossy values get a short hash suffix so two different inputs do not collapse onto one label.
    """
    if is_label_value(text):
        return text
    cleaned = _NOT_LABEL_CHAR.sub("-", text).strip("-_.")
    suffix = _digest(text, 8)
    head = cleaned[: LABEL_VALUE_MAX - len(suffix) - 1].rstrip("-_.")
    return f"{head}-{suffix}" if head else suffix


def to_dns1123_fragment(text: str, *, max_length: int) -> str:
    """Lower-case text squeezed into a DNS-1123 fragment (may be empty), for use inside generated names."""
    cleaned = _NOT_DNS_CHAR.sub("-", text.lower()).strip("-")
    return cleaned[:max_length].strip("-")


def is_gpu_resource(name: str) -> bool:
    """`nvidia.com/gpu`, and other vendors' `<domain>/gpu` extended resources."""
    return name == GPU_RESOURCE or name.endswith("/gpu")
