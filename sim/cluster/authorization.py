"""authorization.k8s.io/v1 SelfSubjectAccessReview: "may I?" answered as the API server answers it.

The simulated cluster has one user, allowed everything, unless a test denies a verb on a resource
(`POST /simctl/v1/faults {"access": {...}, "kind": "deny"}`), as a missing RBAC rule would.
`kubectl auth can-i` posts the review as protobuf, so that one message is read in protobuf too;
the answer is JSON, which client-go decodes by the response's Content-Type.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from sim.cluster import errors

GROUP_VERSION = "authorization.k8s.io/v1"
PATH = f"/apis/{GROUP_VERSION}/selfsubjectaccessreviews"
DENIED_REASON = "no RBAC rule allows it (simulated denial)"
PROTOBUF = "application/vnd.kubernetes.protobuf"
PROTOBUF_MAGIC = b"k8s\x00"
"""runtime.Unknown envelope: magic, then {1: typeMeta, 2: raw object, 3: encoding, 4: content type}."""
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
    denied: set[Rule] = field(default_factory=set)

    def routes(self) -> list[web.RouteDef]:
        """Registered before the API server's catch-all `/apis/...` route, which would 404 it."""
        return [web.post(PATH, self.review)]

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
            body = from_protobuf(raw) if request.content_type == PROTOBUF else json.loads(raw)
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
        allowed = non_resource is not None or self.allowed(resource if isinstance(resource, dict) else {})
        answer: dict[str, Any] = {"allowed": allowed}
        if not allowed:
            answer["reason"] = DENIED_REASON
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


def _status(error: errors.ApiError) -> web.Response:
    return web.json_response(error.status(), status=error.code)


# -- protobuf, just enough for one message ------------------------------------------------------------


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def fields(data: bytes) -> dict[int, bytes | int]:
    """A message's fields by number (the last wins, as protobuf says); length-delimited ones as bytes."""
    out: dict[int, bytes | int] = {}
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            out[number], at = _varint(data, at)
        elif wire == 2:
            size, at = _varint(data, at)
            out[number], at = data[at : at + size], at + size
        else:
            raise ValueError(f"wire type {wire} is not used by SelfSubjectAccessReview")
    return out


def _strings(data: bytes | int, names: dict[int, str]) -> dict[str, str]:
    found = fields(data) if isinstance(data, bytes) else {}
    out = {}
    for number, name in names.items():
        value = found.get(number)
        if isinstance(value, bytes):
            out[name] = value.decode()
    return out


def from_protobuf(raw: bytes) -> dict[str, Any]:
    """A protobuf SelfSubjectAccessReview in its JSON shape, as far as the review needs it."""
    if not raw.startswith(PROTOBUF_MAGIC):
        raise ValueError("no protobuf envelope")
    review = fields(raw[len(PROTOBUF_MAGIC) :]).get(2, b"")
    spec_raw = fields(review).get(2, b"") if isinstance(review, bytes) else b""
    spec = fields(spec_raw) if isinstance(spec_raw, bytes) else {}
    out: dict[str, Any] = {}
    if 1 in spec:
        out["resourceAttributes"] = _strings(spec[1], RESOURCE_FIELDS)
    if 2 in spec:
        out["nonResourceAttributes"] = _strings(spec[2], NON_RESOURCE_FIELDS)
    return {"apiVersion": GROUP_VERSION, "kind": "SelfSubjectAccessReview", "spec": out}
