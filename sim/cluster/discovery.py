"""Discovery and the OpenAPI v3 stub: just enough for kubectl to find resources and trust the server.

kubectl sends `fieldValidation=Strict` only when the OpenAPI v3 document lists that parameter on
each kind's PATCH operation; without it `create`/`apply` fall back to downloading OpenAPI v2 and fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiohttp import web

from sim.cluster import messages, resources
from sim.cluster.resources import Resource

VERSION = {
    "major": "1",
    "minor": messages.MINOR,
    "gitVersion": messages.GIT_VERSION,
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": messages.GO_VERSION,
    "compiler": "gc",
    "platform": "linux/amd64",
}


Served = Sequence[Resource]
"""The resources one world serves: the built-in ones, and Kueue's when it is installed."""

SUBRESOURCE_KINDS = {
    "binding": "Binding",
    "eviction": "Eviction",
    "token": "TokenRequest",
    "exec": "PodExecOptions",
    "attach": "PodAttachOptions",
    "portforward": "PodPortForwardOptions",
    "proxy": "PodProxyOptions",
    "pendingworkloads": "PendingWorkloadsSummary",
}
SUBRESOURCE_VERBS = {
    "binding": ["create"],
    "eviction": ["create"],
    "log": ["get"],
    "token": ["create"],
    **{sub: ["create", "get"] for sub in ("exec", "attach", "portforward")},
    "proxy": ["create", "delete", "get", "patch", "update"],
    "pendingworkloads": ["get"],
}
"""As `kubectl get --raw /api/v1` lists them; connect subresources take GET (WebSocket) and POST (SPDY)."""


def _resource_entries(res: Resource) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": res.plural,
        "singularName": res.singular,
        "namespaced": res.namespaced,
        "kind": res.kind,
        "verbs": _verbs(res),
    }
    if res.short_names:
        main["shortNames"] = list(res.short_names)
    out = [main]
    for sub in res.subresources:
        kind = SUBRESOURCE_KINDS.get(sub, res.kind)
        verbs = SUBRESOURCE_VERBS.get(sub, ["get", "patch", "update"])
        entry: dict[str, Any] = {
            "name": f"{res.plural}/{sub}",
            "singularName": "",
            "namespaced": res.namespaced,
            "kind": kind,
            "verbs": verbs,
        }
        if sub == "eviction":
            # kubectl drain (k8s.io/kubectl/pkg/drain CheckEvictionSupport) evicts only when pods/eviction
            # names its group and version; without them it falls back to DELETE.
            entry.update(group="policy", version="v1")
        if sub == "token":  # TokenRequest lives in another group than the ServiceAccount it is made for
            entry |= {"group": "authentication.k8s.io", "version": "v1"}
        out.append(entry)
    return out


def _verbs(res: Resource) -> list[str]:
    if res.group == resources.VISIBILITY_GROUP:
        return []  # Kueue's CqREST and LqREST are only Storage and Scoper: the queue answers no verb itself
    if res.plural == "namespaces":
        return [v for v in resources.VERBS if v != "deletecollection"]
    return resources.VERBS


def version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' version order (apimachinery/pkg/version CompareKubeAwareVersionStrings): GA, beta, then
    alpha, each newest first; the first is a group's preferredVersion (kueue.x-k8s.io prefers v1beta2)."""
    major, _, rest = version.removeprefix("v").partition("beta" if "beta" in version else "alpha")
    stage = (
        2
        if not rest and "alpha" not in version and "beta" not in version
        else (1 if "beta" in version else 0)
    )
    return (stage, int(major or 0), int(rest or 0))


def _resource_list_body(group_version: str, served: Served) -> dict[str, Any]:
    entries = [e for r in resources.group_versions(served)[group_version] for e in _resource_entries(r)]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }


def _groups(served: Served) -> list[str]:
    return sorted({r.group for r in served if r.group})


def _group_body(group: str, served: Served) -> dict[str, Any]:
    versions = sorted({r.version for r in served if r.group == group}, key=version_priority, reverse=True)
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": entries,
        "preferredVersion": entries[0],
    }


async def api_versions(request: web.Request) -> web.Response:
    return web.json_response(
        {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}],
        }
    )


async def api_groups(request: web.Request, served: Served = resources.ALL) -> web.Response:
    groups = []
    for name in _groups(served):
        body = _group_body(name, served)
        del body["kind"], body["apiVersion"]
        groups.append(body)
    return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})


async def resource_list(request: web.Request) -> web.Response:
    return web.json_response(_resource_list_body("v1", resources.BUILT_IN))


def group_resource_list(group: str, version: str, served: Served = resources.ALL) -> web.Response:
    gv = f"{group}/{version}"
    if gv not in resources.group_versions(served):
        return _not_found()
    return web.json_response(_resource_list_body(gv, served))


def group(name: str, served: Served = resources.ALL) -> web.Response:
    if name not in _groups(served):
        return _not_found()
    return web.json_response(_group_body(name, served))


def _not_found() -> web.Response:
    return web.json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "the server could not find the requested resource",
            "reason": "NotFound",
            "details": {},
            "code": 404,
        },
        status=404,
    )


def _openapi_key(group_version: str) -> str:
    return "api/v1" if group_version == "v1" else f"apis/{group_version}"


async def openapi_index(request: web.Request, served: Served = resources.ALL) -> web.Response:
    paths = {
        _openapi_key(gv): {"serverRelativeURL": f"/openapi/v3/{_openapi_key(gv)}?hash=0"}
        for gv in resources.group_versions(served)
    }
    return web.json_response({"paths": paths})


async def openapi_document(request: web.Request, served: Served = resources.ALL) -> web.Response:
    key = request.match_info["path"]
    for gv, kinds in resources.group_versions(served).items():
        if _openapi_key(gv) == key:
            return web.json_response(_openapi_doc(gv, kinds))
    return _not_found()


def _openapi_doc(group_version: str, served: list[Resource]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for res in served:
        prefix = "/api/v1" if not res.group else f"/apis/{group_version}"
        scope = "/namespaces/{namespace}" if res.namespaced else ""
        gvk = {"group": res.group, "version": res.version, "kind": res.kind}
        operation = {
            "operationId": f"patch{res.kind}",
            "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}],
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
            "responses": {"200": {"description": "OK"}},
        }
        paths[f"{prefix}{scope}/{res.plural}/{{name}}"] = {"patch": operation}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {}},
    }
