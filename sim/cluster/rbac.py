"""The RBAC authorizer: stored bindings → roles → rules, asked about one request's attributes.

Follows kubernetes/kubernetes at v1.32.4: plugin/pkg/auth/authorizer/rbac/rbac.go (RuleAllows),
pkg/apis/rbac/v1/evaluation_helpers.go (VerbMatches, ResourceMatches, ...) and
pkg/registry/rbac/validation/rule.go (VisitRulesFor, appliesTo, the describers): ClusterRoleBindings, then
the RoleBindings of the request's namespace; a ClusterRole bound by a RoleBinding grants only in that
namespace; `*` matches any verb, group or resource, `*/SUB` any resource's subresource SUB; resourceNames
limit a rule to named objects (so never to a create or a list without a name); nonResourceURLs match
exactly or by a trailing `*`. Members of `system:masters` pass without RBAC, as the API server's
privileged-group authorizer lets them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sim.cluster.store import Obj, Store

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""


ADMIN = User("kubernetes-admin", (MASTERS, AUTHENTICATED))
"""The admin kubeconfig's identity (and, in the sim, a request without credentials)."""


@dataclass(frozen=True)
class Attributes:
    """authorizer.Attributes: what one request (or one SelfSubjectAccessReview) asks to do."""

    user: User
    verb: str
    resource_request: bool = True
    namespace: str = ""
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""
    """`RBAC: allowed by ...` when allowed; when not, the bindings that could not be resolved, if any."""


def authorize(store: Store, attributes: Attributes) -> Decision:
    if MASTERS in attributes.user.groups:
        return Decision(True)
    problems: list[str] = []
    for source, rules in visit_rules(store, attributes.user, attributes.namespace, problems):
        if any(rule_allows(attributes, rule) for rule in rules):
            return Decision(True, f"RBAC: allowed by {source}")
    if not problems:
        return Decision(False)
    # utilerrors.NewAggregate: one error alone, several in brackets
    shown = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
    return Decision(False, f"RBAC: {shown}")


def visit_rules(
    store: Store, user: User, namespace: str, problems: list[str]
) -> Iterator[tuple[str, list[Mapping[str, Any]]]]:
    """(describer, rules) of every binding that applies to `user` in `namespace` (empty: cluster scope);
    a binding whose role is missing adds `clusterroles... "x" not found` to `problems`."""
    for binding in store.items("clusterrolebindings"):
        subject = applying_subject(binding, user, "")
        if subject is not None:
            rules = role_rules(store, binding, "", problems)
            yield _describe("ClusterRoleBinding", binding["metadata"]["name"], binding, subject, ""), rules
    if not namespace:
        return
    for binding in store.items("rolebindings", namespace):
        subject = applying_subject(binding, user, namespace)
        if subject is not None:
            rules = role_rules(store, binding, namespace, problems)
            name = f"{binding['metadata']['name']}/{namespace}"
            yield _describe("RoleBinding", name, binding, subject, namespace), rules


def role_rules(store: Store, binding: Obj, namespace: str, problems: list[str]) -> list[Mapping[str, Any]]:
    ref = binding.get("roleRef") or {}
    kind, name = ref.get("kind", ""), ref.get("name", "")
    if kind == "Role":
        role = store.get("roles", namespace, name) if namespace else None
        plural = "roles"
    else:
        role, plural = store.get("clusterroles", "", name), "clusterroles"
    if role is None:
        problems.append(f'{plural}.rbac.authorization.k8s.io "{name}" not found')
        return []
    return [r for r in role.get("rules") or [] if isinstance(r, Mapping)]


def applying_subject(binding: Obj, user: User, namespace: str) -> Mapping[str, Any] | None:
    for subject in binding.get("subjects") or []:
        if isinstance(subject, Mapping) and applies_to(subject, user, namespace):
            return subject
    return None


def applies_to(subject: Mapping[str, Any], user: User, namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name", "")
    if kind == "User":
        return bool(user.name == name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        # A RoleBinding's subject may leave out its own namespace.
        sa_namespace = subject.get("namespace") or namespace
        return bool(sa_namespace) and user.name == service_account_user(sa_namespace, name)
    return False


def service_account_user(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")


def _describe(kind: str, name: str, binding: Obj, subject: Mapping[str, Any], namespace: str) -> str:
    """rule.go's clusterRoleBindingDescriber / roleBindingDescriber, for the `allowed by` reason."""
    ref = binding.get("roleRef") or {}
    if subject.get("kind") == "ServiceAccount":
        who = f'ServiceAccount "{subject.get("name", "")}/{subject.get("namespace") or namespace}"'
    else:
        who = f'{subject.get("kind")} "{subject.get("name", "")}"'
    return f'{kind} "{name}" of {ref.get("kind", "")} "{ref.get("name", "")}" to {who}'


# -- rule matching (policy_comparator / rbac.RuleAllows) --------------------------------------------------


def rule_allows(attributes: Attributes, rule: Mapping[str, Any]) -> bool:
    if not _has(rule.get("verbs"), attributes.verb):
        return False
    if not attributes.resource_request:
        return non_resource_url_matches(rule, attributes.path)
    combined = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource else "")
    return (
        _has(rule.get("apiGroups"), attributes.group)
        and resource_matches(rule, combined, attributes.subresource)
        and resource_name_matches(rule, attributes.name)
    )


def _has(values: Any, wanted: str) -> bool:
    return isinstance(values, list) and ("*" in values or wanted in values)


def resource_matches(rule: Mapping[str, Any], combined: str, subresource: str) -> bool:
    for resource in rule.get("resources") or []:
        if resource in ("*", combined):
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def resource_name_matches(rule: Mapping[str, Any], name: str) -> bool:
    names = rule.get("resourceNames") or []
    return not names or name in names


def non_resource_url_matches(rule: Mapping[str, Any], path: str) -> bool:
    for url in rule.get("nonResourceURLs") or []:
        if url in ("*", path) or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def rules_for(store: Store, user: User, namespace: str) -> tuple[list[Mapping[str, Any]], list[str]]:
    """Every rule that applies to `user` in `namespace`, for SelfSubjectRulesReview; and the problems."""
    problems: list[str] = []
    rules = [rule for _, found in visit_rules(store, user, namespace, problems) for rule in found]
    return rules, problems
