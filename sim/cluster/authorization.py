"""authorization.k8s.io/v1 SelfSubjectAccessReview and SelfSubjectRulesReview: "may I?" answered as the
API server answers it, from the stored RBAC for the requesting (or impersonated) identity.

On top of RBAC a test may deny a verb on a resource to everyone, the admin included
(`POST /simctl/v1/faults {"access": {...}, "kind": "deny"}`); that denial shows only in reviews, for
tests of what a client does with a "no". `kubectl auth can-i` posts the review as protobuf, so that one
message is read in protobuf too; the answer is JSON, which client-go decodes by the response's
Content-Type.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from sim.cluster import authentication, errors, protobuf, rbac
from sim.cluster.store import Store

GROUP_VERSION = "authorization.k8s.io/v1"
PATH = f"/apis/{GROUP_VERSION}/selfsubjectaccessreviews"
RULES_PATH = f"/apis/{GROUP_VERSION}/selfsubjectrulesreviews"

DENIED_REASON = "no RBAC rule allows it (simulated denial)"
RESOURCE_FIELDS = {
    1: "namespace",
    2: "verb",
    3: "group",
    4: "version",
    5: "resource",
    6: "subresource",
    7: "name",
}
NON_RESOURCE_FIELDS = {1: "path", 2: "verb"}


@dataclass(frozen=True)
class Rule:
    """A verb on a resource; an empty namespace matches every namespace and cluster scope."""

    verb: str
    resource: str
    group: str = ""
    namespace: str = ""

    def matches(self, attributes: dict[str, Any]) -> bool:
        return (
            attributes.get("verb") in (self.verb, "*")
            and attributes.get("resource") in (self.resource, "*")
            and (attributes.get("group") or "") == self.group
            and (not self.namespace or attributes.get("namespace") == self.namespace)
        )


@dataclass
class AccessReviews:
    store: Store
    denied: set[Rule] = field(default_factory=set)

    def routes(self) -> list[web.RouteDef]:
        """Registered before the API server's catch-all `/apis/...` route, which would 404 it."""
        return [web.post(PATH, self.review), web.post(RULES_PATH, self.review_rules)]

    def set_fault(self, raw: Any, kind: str | None) -> Rule:
        """`deny` adds a denial, None lifts it; `raw` names verb, resource and optionally group, namespace."""
        if not isinstance(raw, dict) or not raw.get("verb") or not raw.get("resource"):
            raise ValueError('"access" needs at least "verb" and "resource"')
        if kind not in ("deny", None):
            raise ValueError(f'access faults are "deny" or null, not {kind!r}')
        rule = Rule(
            verb=str(raw["verb"]),
            resource=str(raw["resource"]),
            group=str(raw.get("group") or ""),
            namespace=str(raw.get("namespace") or ""),
        )
        if kind == "deny":
            self.denied.add(rule)
        else:
            self.denied.discard(rule)
        return rule

    def allowed(self, attributes: dict[str, Any]) -> bool:
        return not any(rule.matches(attributes) for rule in self.denied)

    async def review(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = from_protobuf(raw) if request.content_type == protobuf.CONTENT_TYPE else json.loads(raw)
        except (ValueError, IndexError):
            return _status(errors.bad_request("the request body is not a SelfSubjectAccessReview"))
        spec = body.get("spec") if isinstance(body, dict) else None
        spec = spec if isinstance(spec, dict) else {}
        resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if (resource is None) == (non_resource is None):
            cause = errors.invalid_value(
                "spec.resourceAttributes",
                "null" if resource is None else "{...}",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )
            return _status(errors.invalid("SelfSubjectAccessReview", "", [cause], "authorization.k8s.io"))
        user = request.get(authentication.USER_KEY, rbac.ADMIN)
        asked = resource if isinstance(resource, dict) else {}
        decision = rbac.authorize(self.store, review_attributes(user, asked, non_resource))
        answer: dict[str, Any] = {"allowed": decision.allowed}
        if decision.allowed and non_resource is None and not self.allowed(asked):
            answer = {"allowed": False, "reason": DENIED_REASON}
        elif decision.reason:
            answer["reason"] = decision.reason
        return web.json_response(
            {
                "kind": "SelfSubjectAccessReview",
                "apiVersion": GROUP_VERSION,
                "metadata": {"creationTimestamp": None},
                "spec": spec,
                "status": answer,
            },
            status=201,
        )

    async def review_rules(self, request: web.Request) -> web.Response:
        """SelfSubjectRulesReview (`kubectl auth can-i --list`): every rule bound to the user there."""
        raw = await request.read()
        try:
            namespace = (
                rules_namespace(raw) if request.content_type == protobuf.CONTENT_TYPE else json_namespace(raw)
            )
        except (ValueError, IndexError, AttributeError):
            return _status(errors.bad_request("the request body is not a SelfSubjectRulesReview"))
        user = request.get(authentication.USER_KEY, rbac.ADMIN)
        found, problems = rbac.rules_for(self.store, user, namespace)
        if rbac.MASTERS in user.groups:
            found = [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]
        resource_rules = [
            {k: r[k] for k in ("verbs", "apiGroups", "resources", "resourceNames") if r.get(k)}
            for r in found
            if not r.get("nonResourceURLs")
        ]
        non_resource = [
            {"verbs": r["verbs"], "nonResourceURLs": r["nonResourceURLs"]}
            for r in found
            if r.get("nonResourceURLs")
        ]
        status: dict[str, Any] = {
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource,
            "incomplete": bool(problems),
        }
        if problems:
            status["evaluationError"] = ", ".join(problems)
        body = {
            "kind": "SelfSubjectRulesReview",
            "apiVersion": GROUP_VERSION,
            "metadata": {"creationTimestamp": None},
            "spec": {"namespace": namespace} if namespace else {},
            "status": status,
        }
        return web.json_response(body, status=201)


def review_attributes(user: rbac.User, resource: dict[str, Any], non_resource: Any) -> rbac.Attributes:
    """ResourceAttributesFrom / NonResourceAttributesFrom of the review's spec."""
    if non_resource is not None:
        spec = non_resource if isinstance(non_resource, dict) else {}
        return rbac.Attributes(
            user, str(spec.get("verb") or ""), resource_request=False, path=str(spec.get("path") or "")
        )
    return rbac.Attributes(
        user,
        str(resource.get("verb") or ""),
        namespace=str(resource.get("namespace") or ""),
        group=str(resource.get("group") or ""),
        version=str(resource.get("version") or ""),
        resource=str(resource.get("resource") or ""),
        subresource=str(resource.get("subresource") or ""),
        name=str(resource.get("name") or ""),
    )


def json_namespace(raw: bytes) -> str:
    spec = json.loads(raw).get("spec") or {}
    return str(spec.get("namespace") or "")


def rules_namespace(raw: bytes) -> str:
    """SelfSubjectRulesReview{spec=2}; SelfSubjectRulesReviewSpec{namespace=1}."""
    namespace = protobuf.spec_fields(raw).get(1, b"")
    return namespace.decode() if isinstance(namespace, bytes) else ""


def _status(error: errors.ApiError) -> web.Response:
    return web.json_response(error.status(), status=error.code)


# -- protobuf, just enough for the reviews -----------------------------------------------------------


def _strings(data: bytes | int, names: dict[int, str]) -> dict[str, str]:
    found = protobuf.fields(data) if isinstance(data, bytes) else {}
    out = {}
    for number, name in names.items():
        value = found.get(number)
        if isinstance(value, bytes):
            out[name] = value.decode()
    return out


def from_protobuf(raw: bytes) -> dict[str, Any]:
    """A protobuf SelfSubjectAccessReview in its JSON shape, as far as the review needs it."""
    spec = protobuf.spec_fields(raw)
    out: dict[str, Any] = {}
    if 1 in spec:
        out["resourceAttributes"] = _strings(spec[1], RESOURCE_FIELDS)
    if 2 in spec:
        out["nonResourceAttributes"] = _strings(spec[2], NON_RESOURCE_FIELDS)
    return {"apiVersion": GROUP_VERSION, "kind": "SelfSubjectAccessReview", "spec": out}
