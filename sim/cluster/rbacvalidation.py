"""Validation of ServiceAccounts, Roles, ClusterRoles and their bindings, worded as pkg/apis/rbac/validation.

Only what a client can trip over when writing RBAC by hand: a rule without verbs, apiGroups or resources,
a binding to a kind of role it cannot bind, a subject without a name, and a roleRef changed on update
(the real API server refuses that, so `kubectl apply` of a changed roleRef fails the same way here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.cluster import validation
from sim.cluster.errors import Cause, not_supported, required

RBAC_GROUP = "rbac.authorization.k8s.io"
PLURALS = frozenset({"serviceaccounts", "roles", "clusterroles", "rolebindings", "clusterrolebindings"})
NAMESPACED = {"serviceaccounts": True, "roles": True, "clusterroles": False, "rolebindings": True}
SUBJECT_KINDS = ["ServiceAccount", "User", "Group"]


def is_path_segment_name(value: str) -> list[str]:
    """path.IsValidPathSegmentName: RBAC names may hold `:` (`system:basic-user`), not `/` or `%`."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in "/%" if c in value]


def validate(plural: str, obj: Mapping[str, Any], *, old: Mapping[str, Any] | None = None) -> list[Cause]:
    name_check = validation.is_dns1123_subdomain if plural == "serviceaccounts" else is_path_segment_name
    causes = validation.validate_object_meta(
        obj.get("metadata"), namespaced=NAMESPACED.get(plural, False), name_check=name_check
    )
    if old is not None:
        causes += validation.validate_object_meta_update(obj.get("metadata"), old.get("metadata"))
    if plural in ("roles", "clusterroles"):
        for i, rule in enumerate(_list(obj.get("rules"))):
            causes += validate_rule(_map(rule), f"rules[{i}]", namespaced=plural == "roles")
    if plural in ("rolebindings", "clusterrolebindings"):
        causes += validate_binding(obj, cluster=plural == "clusterrolebindings")
        if old is not None and _map(obj.get("roleRef")) != _map(old.get("roleRef")):
            shown = _go_role_ref(_map(obj.get("roleRef")))
            causes.append(
                Cause("FieldValueInvalid", "roleRef", f"Invalid value: {shown}: cannot change roleRef")
            )
    return causes


def validate_rule(rule: Mapping[str, Any], path: str, *, namespaced: bool) -> list[Cause]:
    causes = []
    if not _list(rule.get("verbs")):
        causes.append(validation.required_detail(f"{path}.verbs", "verbs must contain at least one value"))
    if _list(rule.get("nonResourceURLs")):
        if namespaced:
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f"{path}.nonResourceURLs",
                    f"Invalid value: {_go_strings(rule['nonResourceURLs'])}: "
                    "namespaced rules cannot apply to non-resource URLs",
                )
            )
        return causes
    if not _list(rule.get("apiGroups")):
        causes.append(
            validation.required_detail(
                f"{path}.apiGroups", "resource rules must supply at least one api group"
            )
        )
    if not _list(rule.get("resources")):
        causes.append(
            validation.required_detail(
                f"{path}.resources", "resource rules must supply at least one resource"
            )
        )
    return causes


def validate_binding(obj: Mapping[str, Any], *, cluster: bool) -> list[Cause]:
    ref = _map(obj.get("roleRef"))
    causes = []
    if ref.get("apiGroup") != RBAC_GROUP:
        causes.append(not_supported("roleRef.apiGroup", ref.get("apiGroup", ""), [RBAC_GROUP]))
    kinds = ["ClusterRole"] if cluster else ["Role", "ClusterRole"]
    if ref.get("kind") not in kinds:
        causes.append(not_supported("roleRef.kind", ref.get("kind", ""), kinds))
    if not ref.get("name"):
        causes.append(required("roleRef.name"))
    for i, subject in enumerate(_list(obj.get("subjects"))):
        causes += validate_subject(_map(subject), f"subjects[{i}]", cluster=cluster)
    return causes


def validate_subject(subject: Mapping[str, Any], path: str, *, cluster: bool) -> list[Cause]:
    causes = []
    if not subject.get("name"):
        causes.append(required(f"{path}.name"))
    kind = subject.get("kind", "")
    if kind not in SUBJECT_KINDS:
        causes.append(not_supported(f"{path}.kind", kind, SUBJECT_KINDS))
    if kind == "ServiceAccount" and cluster and not subject.get("namespace"):
        causes.append(required(f"{path}.namespace"))
    if kind in ("User", "Group") and subject.get("apiGroup") != RBAC_GROUP:
        causes.append(not_supported(f"{path}.apiGroup", subject.get("apiGroup", ""), [RBAC_GROUP]))
    return causes


def _go_role_ref(ref: Mapping[str, Any]) -> str:
    """Go's %#v of the internal rbac.RoleRef, as field.Invalid prints a struct value."""
    group, kind, name = (ref.get(k, "") for k in ("apiGroup", "kind", "name"))
    return f'rbac.RoleRef{{APIGroup:"{group}", Kind:"{kind}", Name:"{name}"}}'


def _go_strings(values: Any) -> str:
    return "[]string{" + ", ".join(f'"{v}"' for v in _list(values)) + "}"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
