"""What an HTTP request asks to do, in the authorizer's terms: apiserver's RequestInfoFactory, ported.

staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go (kubernetes/kubernetes v1.32.4):
`/api/v1/...` and `/apis/G/V/...` with at least a resource are resource requests, everything else
(`/version`, `/api`, `/apis/G/V`, `/openapi/v3`) a non-resource one whose verb is the lowercased method.
A GET without a name is a list or, with `watch=true`, a watch; a list or watch whose field selector
pins `metadata.name` carries that name, so a rule with resourceNames can allow an informer over one
object; a DELETE without a name is a deletecollection.
"""

from __future__ import annotations

from collections.abc import Mapping

from sim.cluster import rbac

METHOD_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


def attributes(user: rbac.User, method: str, path: str, query: Mapping[str, str]) -> rbac.Attributes:
    parts = [p for p in path.split("/") if p]
    non_resource = rbac.Attributes(user=user, verb=method.lower(), resource_request=False, path=path)
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return non_resource
    group, rest = ("", parts[1:]) if parts[0] == "api" else (parts[1], parts[2:])
    if parts[0] == "apis" and len(rest) < 2:
        return non_resource
    version, rest = rest[0], rest[1:]
    verb = METHOD_VERBS.get(method, "")
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not name and verb == "get":
        verb = "watch" if query.get("watch") in ("1", "true") else "list"
        name = selected_name(query.get("fieldSelector", ""))
    if not name and verb == "delete":
        verb = "deletecollection"
    return rbac.Attributes(
        user=user,
        verb=verb,
        namespace=namespace,
        group=group,
        version=version,
        resource=resource,
        subresource=subresource,
        name=name,
        path=path,
    )


def selected_name(field_selector: str) -> str:
    """fields.Selector.RequiresExactMatch("metadata.name"), kept only if it is a valid path segment."""
    for term in field_selector.split(","):
        key, op, value = term.partition("==") if "==" in term else term.partition("=")
        if op and not key.endswith("!") and key.strip() == "metadata.name":
            value = value.strip()
            return value if value not in ("", ".", "..") and not set("/%") & set(value) else ""
    return ""
