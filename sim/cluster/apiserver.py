"""The Kubernetes REST API over aiohttp: routing, list/watch, writes and their validation.

Behaviour copies the real apiserver where clients can tell the difference: Status bodies, 410 on
expired watches, strict decoding, Table output for kubectl, graceful pod deletion.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
import functools
import json
import logging
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from kubernetes.client import models as k8s_models

from sim.cluster import (
    admission,
    apply,
    bodies,
    discovery,
    ephemeral,
    errors,
    events,
    eviction,
    faults,
    gates,
    jupyter,
    kueue,
    kueueapi,
    logs,
    messages,
    metadata,
    patches,
    podlogs,
    podproxy,
    podsecurity,
    protobuf,
    rbacvalidation,
    resources,
    schema,
    selectors,
    streaming,
    tables,
    traffic,
    validation,
    visibility,
    watchlist,
)
from sim.cluster.resources import Resource
from sim.cluster.store import ADDED, DELETED, MODIFIED, Change, Obj, Store, rfc3339

logger = logging.getLogger(__name__)

DEFAULT_WATCH_TIMEOUT_TEXT = "1800"
"""Seconds; the apiserver's --min-request-timeout, after which it ends a watch that asked for none."""

PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    apply.CONTENT_TYPE: "apply",  # applied as a strategic merge, see sim/cluster/apply.py
}


Filter = Callable[[Obj], bool]


@dataclass(frozen=True)
class Target:
    resource: Resource
    namespace: str
    name: str
    subresource: str


@dataclass
class Options:
    extended_resource_toleration: bool = True
    """GKE enables the ExtendedResourceToleration admission plugin; EKS does not."""
    kueue: bool = False
    """Kueue is installed: its pod webhook labels and gates pods that name a queue."""


class ApiServer:
    def __init__(
        self, store: Store, options: Options | None = None, *, kept: logs.LogStore | None = None
    ) -> None:
        self.store = store
        self.options = options or Options()
        self.logs = kept or logs.LogStore()
        self.traffic = traffic.Traffic()
        self.faults = faults.ApiFaults(store)
        self.notebooks = jupyter.Servers(store)
        self.served = resources.ALL if self.options.kueue else resources.BUILT_IN

    # -- wiring ----------------------------------------------------------------------------
    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/version", self.version),
            web.get("/healthz", self.ok),
            web.get("/livez", self.ok),
            web.get("/readyz", self.ok),
            web.get("/api", discovery.api_versions),
            web.get("/apis", functools.partial(discovery.api_groups, served=self.served)),
            web.get("/openapi/v3", functools.partial(discovery.openapi_index, served=self.served)),
            web.get(
                "/openapi/v3/{path:.*}", functools.partial(discovery.openapi_document, served=self.served)
            ),
            web.route("*", "/api/v1", discovery.resource_list),
            web.route("*", "/api/{tail:.+}", self.dispatch),
            web.route("*", "/apis/{tail:.+}", self.dispatch),
        ]

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response(discovery.VERSION)

    async def ok(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._dispatch(request)
        except errors.PathNotFound:
            return web.Response(status=404, text=errors.PAGE_NOT_FOUND)
        except errors.ApiError as err:
            return web.json_response(err.status(), status=err.code, headers=err.headers)
        except Exception:
            # A bug in the sim must look like a server fault to clients, never like a Python error.
            logger.exception("API request %s %s failed", request.method, request.path)
            failure = errors.internal_error()
            return web.json_response(failure.status(), status=failure.code)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if parts[0] == "apis" and len(parts) == 3:
            return discovery.group_resource_list(parts[1], parts[2], self.served)
        if parts[0] == "apis" and len(parts) == 2:
            return discovery.group(parts[1], self.served)
        if (
            request.method == "POST"
            and len(parts) == 5
            and parts[:3] == ["api", "v1", "namespaces"]
            and (parts[4] == "bindings")
        ):
            self.traffic.count(user_agent(request), "create", "bindings")
            return self.bind_named(parts[3], await bodies.read(request))
        target = parse_target(parts, self.served)
        watching = request.query.get("watch") in ("1", "true")
        shown = target.resource.plural + (f"/{target.subresource}" if target.subresource else "")
        verb = traffic.verb_of(request.method, collection=not target.name, watch=watching)
        self.traffic.count(user_agent(request), verb, shown)
        return await self.faults.serve(verb, shown, functools.partial(self._route, request, target, watching))

    async def _route(self, request: web.Request, target: Target, watching: bool) -> web.StreamResponse:
        if target.resource.group == resources.VISIBILITY_GROUP:
            return visibility.serve(
                request, self.store, target.resource, target.namespace, target.name, target.subresource
            )
        response = await self._route_resource(request, target, watching)
        warning = kueueapi.deprecation(target.resource)
        if warning and not response.prepared:  # a CRD version's deprecationWarning, on every answer
            shown = schema.warning_header(warning)
            existing = response.headers.get("Warning")
            response.headers["Warning"] = f"{existing}, {shown}" if existing else shown
        return response

    async def _route_resource(
        self, request: web.Request, target: Target, watching: bool
    ) -> web.StreamResponse:
        method = request.method
        is_collection = not target.name
        if target.subresource in streaming.SUBRESOURCES:
            return streaming.serve(request, self.store, target.subresource, target.namespace, target.name)
        if target.subresource == "proxy":
            return podproxy.serve(request, self.store, self.notebooks, target.namespace, target.name)
        if target.subresource == "log":
            if method != "GET":
                raise errors.method_not_allowed()
            return await podlogs.serve(request, self.store, self.logs, target.namespace, target.name)
        if method == "GET" and is_collection:
            if watching:
                with self.traffic.watching(user_agent(request), target.resource.plural):
                    return await self.watch(request, target)
            watchlist.sends_initial_events(request.query, watching=False)
            return self.list_collection(request, target)
        if method == "GET":
            return self.respond(request, target.resource, self.read(target))
        if method == "POST" and target.subresource == "binding":
            return self.bind(target, await bodies.read(request))
        if method == "POST" and target.subresource == "eviction":
            return self.evict(request, target, await bodies.read(request))
        if target.subresource == "eviction":
            raise errors.method_not_allowed()
        if method == "POST" and is_collection:
            decoder = protobuf.OBJECT_DECODERS.get(target.resource.plural)
            return self.create(request, target, await bodies.read(request, from_protobuf=decoder))
        if method == "PUT" and not is_collection:
            return self.put(request, target, await bodies.read(request))
        if method == "PATCH" and not is_collection:
            return await self.patch(request, target)
        if method == "DELETE" and is_collection:
            return self.delete_collection(request, target)
        if method == "DELETE":
            body = await bodies.read(request, optional=True, from_protobuf=protobuf.decode_delete_options)
            return self.delete(request, target, body)
        raise errors.method_not_allowed()

    # -- reads -----------------------------------------------------------------------------
    def read(self, target: Target) -> Obj:
        obj = self.store.get(target.resource.key, target.namespace, target.name)
        if obj is None:
            raise errors.not_found(ref(target))
        return obj

    def list_collection(self, request: web.Request, target: Target) -> web.Response:
        res = target.resource
        matches = make_filter(res, request)
        objs = [o for o in self.store.items(res.key, target.namespace) if matches(o)]
        rv = str(self.store.resource_version)
        objs, token = paginate(objs, request.query)
        if wants_table(request):
            body = tables.table(
                res.plural,
                objs,
                now=self.store.clock.datetime(),
                resource_version=rv,
                include_object=request.query.get("includeObject", "Metadata"),
                continue_token=token,
            )
            return web.json_response(body)
        if wants_metadata(request):
            return web.json_response(metadata.partial_list(objs, resource_version=rv, continue_token=token))
        meta: dict[str, Any] = {"resourceVersion": rv}
        if token:
            meta["continue"] = token
        body = {
            "kind": res.list_kind,
            "apiVersion": res.api_version,
            "metadata": meta,
            "items": [present(res, o) for o in objs],
        }
        return web.json_response(body)

    async def watch(self, request: web.Request, target: Target) -> web.StreamResponse:
        res = target.resource
        matches = make_filter(res, request)
        since = request.query.get("resourceVersion", "")
        table = wants_table(request)
        timeout = float(bodies.query_int(request.query.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT_TEXT))
        initial = watchlist.sends_initial_events(request.query, watching=True)
        if initial:
            since = ""  # NotOlderThan: the whole current state, whatever version was named
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        # Snapshot and subscription happen in one synchronous step, so no change falls between them.
        try:
            backlog = self._backlog(target, since, matches)
        except errors.ApiError as err:
            await write_event(response, {"type": "ERROR", "object": err.status()})
            return response
        watcher = self.store.watch(res.key, target.namespace)
        self.faults.opened(watcher)
        # The version this stream has fully covered: a closing bookmark may promise no more than this.
        delivered = self.store.resource_version
        timer = self.store.clock.call_later(timeout, lambda: watcher.queue.put_nowait(None))
        try:
            for kind, obj in backlog:
                await write_event(response, self._event(request, res, kind, obj, table))
            if initial and request.query.get("allowWatchBookmarks") in ("1", "true"):
                await write_event(response, watchlist.initial_events_end(res, delivered))
            while True:
                change = await watcher.queue.get()
                if change is None:
                    break
                kind = visible_type(change, matches)
                if kind:
                    await write_event(response, self._event(request, res, kind, change.obj, table))
                delivered = change.rv
            ending = self.faults.closed(watcher)
            if ending is not None:
                await self.faults.end_stream(request, response, ending, delivered)
                return response
            if request.query.get("allowWatchBookmarks") in ("1", "true"):
                bookmark = {
                    "kind": res.kind,
                    "apiVersion": res.api_version,
                    "metadata": {"resourceVersion": str(delivered)},
                }
                await write_event(response, {"type": "BOOKMARK", "object": bookmark})
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            timer.cancel()
            self.faults.closed(watcher)
            self.store.unwatch(watcher)
        return response

    def _backlog(self, target: Target, since: str, matches: Filter) -> list[tuple[str, Obj]]:
        res = target.resource
        if since in ("", "0"):
            return [(ADDED, o) for o in self.store.items(res.key, target.namespace) if matches(o)]
        try:
            rv = int(since)
        except ValueError:
            raise errors.bad_request(f'invalid resource version "{since}"') from None
        out = []
        for change in self.store.changes_after(rv):
            ns = change.obj["metadata"].get("namespace", "")
            if change.resource != res.key or (target.namespace and ns != target.namespace):
                continue
            kind = visible_type(change, matches)
            if kind:
                out.append((kind, change.obj))
        return out

    def _event(self, request: web.Request, res: Resource, kind: str, obj: Obj, table: bool) -> dict[str, Any]:
        shown = metadata.partial(obj) if wants_metadata(request) else present(res, obj)
        if table:
            shown = tables.table(
                res.plural,
                [obj],
                now=self.store.clock.datetime(),
                resource_version=obj["metadata"]["resourceVersion"],
                include_object=request.query.get("includeObject", "Metadata"),
            )
        return {"type": kind, "object": shown}

    def respond(
        self,
        request: web.Request,
        res: Resource,
        obj: Obj,
        status: int = 200,
        warnings: list[str] | None = None,
    ) -> web.Response:
        headers = {"Warning": ", ".join(schema.warning_header(w) for w in warnings)} if warnings else None
        if wants_table(request):
            body = tables.table(
                res.plural,
                [obj],
                now=self.store.clock.datetime(),
                resource_version=obj["metadata"]["resourceVersion"],
            )
            return web.json_response(body, status=status, headers=headers)
        shown = metadata.partial(obj) if wants_metadata(request) else present(res, obj)
        return web.json_response(shown, status=status, headers=headers)

    # -- writes ----------------------------------------------------------------------------
    def create(self, request: web.Request, target: Target, body: Any) -> web.Response:
        res = target.resource
        if res.plural == "namespaces" and target.namespace:
            raise errors.method_not_allowed()
        obj, warnings = self.decode(request, res, body, verb="create")
        meta = obj.setdefault("metadata", {})
        if res.namespaced:
            if meta.get("namespace") and meta["namespace"] != target.namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = target.namespace
            if self.store.get("namespaces", "", target.namespace) is None:
                raise errors.not_found(errors.ResourceRef("", "namespaces", "Namespace", target.namespace))
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        for server_owned in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
            meta.pop(server_owned, None)
        self.admit(res, obj)
        self.validate(res, obj, None)
        if res.plural == "pods":  # a validating admission plugin: after the object's own validation
            podsecurity.admit_pod(obj, self.store.get("namespaces", "", target.namespace))
        if self.store.get(res.key, meta.get("namespace", ""), meta.get("name", "")) is not None:
            raise errors.already_exists(errors.ResourceRef(res.group, res.plural, res.kind, meta["name"]))
        if is_dry_run(request):
            # What BeforeCreate fills before the registry would write; nothing is stored, no version given.
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=rfc3339(self.store.clock))
            return self.respond(request, res, obj, status=201, warnings=warnings)
        stored = self.store.create(res.key, obj)
        return self.respond(request, res, stored, status=201, warnings=warnings)

    def put(self, request: web.Request, target: Target, body: Any) -> web.Response:
        res = target.resource
        current = self.read(target)
        obj, warnings = self.decode(request, res, body, verb="update")
        meta = obj.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != target.name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({target.name})"
            )
        meta["name"] = target.name
        if res.namespaced:
            meta["namespace"] = target.namespace
        # rest.BeforeUpdate: an update's creationTimestamp is ignored, a missing uid carried over.
        meta["creationTimestamp"] = current["metadata"]["creationTimestamp"]
        meta.setdefault("uid", current["metadata"]["uid"])
        wanted_rv = meta.get("resourceVersion")
        if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(ref(target))
        updated = self.split_subresource(target, current, obj)
        stored = self.commit_update(res, current, updated, dry_run=is_dry_run(request), target=target)
        return self.respond(request, res, stored, warnings=warnings)

    async def patch(self, request: web.Request, target: Target) -> web.Response:
        res = target.resource
        content_type = request.content_type
        kind = PATCH_TYPES.get(content_type)
        if kind is None:
            raise errors.unsupported_media()
        manager = apply.field_manager(request.query) if kind == "apply" else ""
        patch = await bodies.read(request)
        if kind == "apply":
            patch = apply.check_applied(patch, kind=res.kind, api_version=res.api_version, name=target.name)
            if target.subresource == "" and self.store.get(res.key, target.namespace, target.name) is None:
                return self.apply_create(request, target, patch, manager)
        current = self.read(target)
        shown = present(res, current)  # a patch is written against the version the client speaks
        try:
            if kind == "merge":
                patched = patches.merge_patch(shown, patch)
            elif kind == "json":
                patched = patches.json_patch(shown, patch)
            else:
                patched = patches.strategic_merge_patch(shown, patch)
        except patches.PatchError as err:
            raise patch_error(kind, err) from None
        if kind == "apply":
            apply.record_manager(patched, patch, manager=manager, now=rfc3339(self.store.clock))
        obj, warnings = self.decode(request, res, patched, verb="patch")
        for fixed in ("name", "namespace", "uid", "creationTimestamp"):
            if fixed in current["metadata"]:
                obj["metadata"][fixed] = current["metadata"][fixed]
        rv = obj["metadata"].get("resourceVersion")
        if rv and rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(ref(target))
        updated = self.split_subresource(target, current, obj)
        stored = self.commit_update(res, current, updated, dry_run=is_dry_run(request), target=target)
        return self.respond(request, res, stored, warnings=warnings)

    def apply_create(self, request: web.Request, target: Target, applied: Obj, manager: str) -> web.Response:
        """Server-side apply of an object that does not exist yet creates it, owned by its manager."""
        obj = copy.deepcopy(applied)
        apply.record_manager(obj, applied, manager=manager, now=rfc3339(self.store.clock))
        collection = Target(target.resource, target.namespace, "", "")
        return self.create(request, collection, obj)

    def commit_update(
        self,
        res: Resource,
        current: Obj,
        updated: Obj,
        *,
        dry_run: bool = False,
        target: Target | None = None,
    ) -> Obj:
        if updated == current:
            return current
        if not (target and target.subresource == ephemeral.SUBRESOURCE):  # ephemeral.accept validated it
            self.validate(res, updated, current)
        if dry_run:
            updated["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            return updated
        return self.store.replace(res.key, updated)

    def split_subresource(self, target: Target, current: Obj, obj: Obj) -> Obj:
        """`/status` writes change only status; main writes keep the stored status."""
        if target.subresource == "status":
            merged = copy.deepcopy(current)
            merged["status"] = obj.get("status", {})
            return merged
        if target.subresource == ephemeral.SUBRESOURCE:
            return ephemeral.accept(current, obj)
        if target.subresource:
            raise errors.method_not_allowed()
        if "status" in current:
            obj["status"] = copy.deepcopy(current["status"])
        # Deletion is the server's to record: a client can neither set nor clear it.
        for owned in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            obj["metadata"].pop(owned, None)
            if current["metadata"].get(owned) is not None:
                obj["metadata"][owned] = current["metadata"][owned]
        return obj

    def bind_named(self, namespace: str, body: Any) -> web.Response:
        """`POST /api/v1/namespaces/NS/bindings`: the older form, naming the pod in the Binding's metadata."""
        name = ((body or {}).get("metadata") or {}).get("name", "") if isinstance(body, dict) else ""
        return self.bind(Target(resources.PODS, namespace, name, "binding"), body)

    def bind(self, target: Target, body: Any) -> web.Response:
        node = (((body if isinstance(body, dict) else {}).get("target")) or {}).get("name", "")
        if not node:
            raise errors.invalid("Binding", target.name, [errors.required("target.name")])
        pod = self.read(target)
        # BindingREST.setPodHostAndAnnotations answers these as Conflicts on pods/binding.
        binding_ref = errors.ResourceRef("", "pods/binding", "Binding", target.name)
        if pod["metadata"].get("deletionTimestamp"):
            reason = f"pod {target.name} is being deleted, cannot be assigned to a host"
            raise conflict_because(binding_ref, reason)
        if pod["spec"].get("nodeName"):
            reason = f'pod {target.name} is already assigned to node "{pod["spec"]["nodeName"]}"'
            raise conflict_because(binding_ref, reason)
        self.bind_pod(pod, node)
        return web.json_response(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
            status=201,
        )

    def bind_pod(self, pod: Obj, node: str) -> Obj:
        """Binding sets nodeName and PodScheduled=True, as the binding REST storage does."""
        pod = copy.deepcopy(pod)
        pod["spec"]["nodeName"] = node
        conditions = [c for c in pod["status"].get("conditions", []) if c.get("type") != "PodScheduled"]
        conditions.insert(
            0,
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": rfc3339(self.store.clock),
            },
        )
        pod["status"]["conditions"] = conditions
        return self.store.replace("pods", pod)

    def delete(self, request: web.Request, target: Target, body: Any) -> web.Response:
        res = target.resource
        options = bodies.delete_options(request, body)  # the handler checks options before it reads
        current = self.read(target)
        check_preconditions(target, current, options.get("preconditions") or {})
        if is_dry_run(request):
            return (
                self.respond(request, res, current)
                if res.plural == "pods"
                else web.json_response(success_status(res, current))
            )
        result = self.delete_object(res, current, options.get("gracePeriodSeconds"))
        if res.plural in ("pods", "nodes", "namespaces"):
            return self.respond(request, res, result)
        return web.json_response(success_status(res, current))

    def evict(self, request: web.Request, target: Target, body: Any) -> web.Response:
        pod = self.read(target)
        dry_run = is_dry_run(request)

        def delete(current: Obj, options: dict[str, Any]) -> None:
            bodies.validate_delete_options(options)
            check_preconditions(target, current, options.get("preconditions") or {})
            if not dry_run:
                grace = options.get("gracePeriodSeconds")
                self.delete_object(target.resource, current, None if grace is None else int(grace))

        status = eviction.evict(self.store, pod, body, delete=delete, dry_run=dry_run)
        return web.json_response(status, status=status["code"])

    def delete_object(self, res: Resource, current: Obj, grace: int | None) -> Obj:
        meta = current["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        if res.plural == "pods":
            if grace is None:
                grace = int(current["spec"].get("terminationGracePeriodSeconds", 30))
            if (
                current["spec"].get("nodeName")
                and grace > 0
                and current["status"].get("phase") not in ("Succeeded", "Failed")
            ):
                return self.mark_deleting(res, current, grace)
        if res.plural == "namespaces":
            for key in sorted({other.key for other in self.served if other.namespaced}):
                for obj in self.store.items(key, name):
                    self.store.remove(key, name, obj["metadata"]["name"])
        if meta.get("finalizers"):
            return self.mark_deleting(res, current, 0)
        return self.store.remove(res.key, ns, name)

    def mark_deleting(self, res: Resource, current: Obj, grace: int) -> Obj:
        if current["metadata"].get("deletionTimestamp"):
            return current
        current = copy.deepcopy(current)
        clock = self.store.clock
        current["metadata"]["deletionTimestamp"] = rfc3339(clock, clock.now() + grace)
        current["metadata"]["deletionGracePeriodSeconds"] = grace
        return self.store.replace(res.key, current)

    def delete_collection(self, request: web.Request, target: Target) -> web.Response:
        res = target.resource
        matches = make_filter(res, request)
        given = request.query.get("gracePeriodSeconds")
        grace = None if given is None else bodies.query_int(given)
        deleted = []
        for obj in self.store.items(res.key, target.namespace):
            if matches(obj) and is_dry_run(request):
                deleted.append(obj)
            elif matches(obj):
                deleted.append(self.delete_object(res, obj, grace))
        body = {
            "kind": res.list_kind,
            "apiVersion": res.api_version,
            "metadata": {"resourceVersion": str(self.store.resource_version)},
            "items": [present(res, o) for o in deleted],
        }
        return web.json_response(body)

    # -- decoding, admission, validation ---------------------------------------------------
    def decode(self, request: web.Request, res: Resource, body: Any, *, verb: str) -> tuple[Obj, list[str]]:
        if not isinstance(body, dict):
            raise errors.bad_request(
                f"the body of the request was in an unknown format: {type(body).__name__}"
            )
        kind, api_version = body.get("kind"), body.get("apiVersion")
        if verb != "patch" and kind and api_version and (kind, api_version) != (res.kind, res.api_version):
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({res.api_version})"
                if api_version != res.api_version
                else f"the kind in the data ({kind}) does not match the expected kind ({res.kind})"
            )
        if not res.model:  # a Kueue CRD: stored as its storage version, checked by kueueapi.validate
            obj = kueueapi.to_storage(res, copy.deepcopy(body))
            omit_empty_metadata(obj)
            obj["kind"], obj["apiVersion"] = res.kind, f"{res.group}/{kueueapi.STORAGE_VERSION}"
            return obj, []
        problems = schema.type_errors(res.model, body)
        if problems:
            raise errors.bad_request(schema_message(res, verb, problems[0]))
        unknown = schema.unknown_fields(res.model, body)
        warnings: list[str] = []
        mode = request.query.get("fieldValidation", "Warn")
        if unknown and mode == "Strict":
            raise errors.bad_request(schema_message(res, verb, messages.strict_unknown_fields(unknown)))
        if unknown:
            body = schema.drop_unknown_fields(res.model, body)
            if mode != "Ignore":
                warnings = [f'unknown field "{p}"' for p in unknown]
        obj = schema.normalize(res.model, copy.deepcopy(body))
        canonical_times(res.model, obj)
        omit_empty_metadata(obj)
        if res.group == "events.k8s.io":
            obj = events.from_events_v1(obj)
        obj["kind"], obj["apiVersion"] = (
            ("Event", "v1") if res.key == "events" else (res.kind, res.api_version)
        )
        return obj, warnings

    def admit(self, res: Resource, obj: Obj) -> None:
        if res.plural == "pods":
            admission.default_pod(obj, extended_resource_toleration=self.options.extended_resource_toleration)
            if self.options.kueue:  # a mutating webhook runs after the built-in defaulting
                kueue.default_pod(obj)
            if gates.is_gated(obj):  # applySchedulingGatedCondition, in the pod strategy's PrepareForCreate
                obj["status"]["conditions"] = [gates.gated_condition(rfc3339(self.store.clock))]
        elif res.plural == "nodes":
            admission.default_node(obj)
        elif res.plural == "namespaces":
            admission.default_namespace(obj)

    def validate(self, res: Resource, obj: Obj, old: Obj | None) -> None:
        name = obj.get("metadata", {}).get("name", "")
        if kueueapi.is_kueue(res):
            causes = kueueapi.validate(res, obj, old)
        elif res.group == "events.k8s.io":
            # events.k8s.io/v1 writes get the strict ValidateEventCreate, worded in v1 field names.
            causes = validation.validate(
                "events.events.k8s.io", events.to_events_v1(obj, fill=False), old=old
            )
        elif res.plural in rbacvalidation.PLURALS:
            causes = rbacvalidation.validate(res.plural, obj, old=old)
        else:
            causes = validation.validate(res.plural, obj, old=old)
        if res.plural == "namespaces" and not causes:
            causes = podsecurity.namespace_causes(obj, old)
        if causes:
            qualify = res.plural in rbacvalidation.PLURALS or kueueapi.is_kueue(
                res
            )  # the older kinds here keep their tested wording
            raise errors.invalid(res.kind, name, causes, group=res.group, qualify=qualify)
        model = "CoreV1Event" if res.key == "events" else res.model
        if not model:
            return
        failure = schema.check_client_model(model, obj)
        if failure:
            raise errors.invalid(
                res.kind, name, [errors.Cause("FieldValueInvalid", "", failure)], group=res.group
            )


# -- helpers ---------------------------------------------------------------------------------


def user_agent(request: web.Request) -> str:
    return request.headers.get("User-Agent", "")


def parse_target(parts: list[str], served: discovery.Served = resources.ALL) -> Target:
    """`/api/v1[/namespaces/NS]/PLURAL[/NAME[/SUB]]` and the `/apis/G/V/...` equivalent."""
    if parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    else:
        group, version, rest = parts[1], parts[2], parts[3:]
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest:
        raise errors.PathNotFound()
    res = resources.lookup(group, version, rest[0], served)
    if res is None or (namespace and not res.namespaced):
        raise errors.PathNotFound()
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and sub not in res.subresources:
        raise errors.PathNotFound()
    return Target(res, namespace, name, sub)


MICRO_TIMES = {
    ("V1LeaseSpec", "acquire_time"),
    ("V1LeaseSpec", "renew_time"),
    ("CoreV1Event", "event_time"),
    ("CoreV1EventSeries", "last_observed_time"),
    ("EventsV1Event", "event_time"),
    ("EventsV1EventSeries", "last_observed_time"),
}
"""metav1.MicroTime fields; every other date-time is a metav1.Time, kept to the second."""


def canonical_times(model: str, obj: Obj) -> None:
    """Re-render timestamps as Go marshals them: the Python client sends `isoformat()`
    (`...+00:00`, microseconds), the apiserver stores and returns UTC `Z` times."""
    for key, field in schema.model_fields(model).items():
        value = obj.get(key)
        if value is None:
            continue
        inner = field.type.removeprefix("List[").removesuffix("]")
        items = value if field.type.startswith("List[") and isinstance(value, list) else [value]
        if field.type == "datetime" and isinstance(value, str):
            obj[key] = go_time(value, micro=(model, field.attr) in MICRO_TIMES)
        elif hasattr(k8s_models, inner) and inner != "object":
            for item in items:
                if isinstance(item, dict):
                    canonical_times(inner, item)


def go_time(text: str, *, micro: bool) -> str:
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text  # type_errors has already refused what Go cannot parse
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    moment = moment.astimezone(datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


OMITEMPTY_METADATA = ("labels", "annotations", "finalizers", "ownerReferences", "managedFields")


def omit_empty_metadata(obj: Obj) -> None:
    """Go serialises these `omitempty` fields not at all when empty: `kubectl label pod p app-` on the
    last label leaves no `labels` key, as on a real cluster."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for key in OMITEMPTY_METADATA:
            if key in meta and not meta[key]:
                del meta[key]


def ref(target: Target) -> errors.ResourceRef:
    res = target.resource
    return errors.ResourceRef(res.group, res.plural, res.kind, target.name)


def present(res: Resource, obj: Obj) -> Obj:
    if res.group == "events.k8s.io":
        return events.to_events_v1(obj)
    if kueueapi.is_kueue(res):
        return kueueapi.from_storage(res, obj)
    return obj


def make_filter(res: Resource, request: web.Request) -> Filter:
    try:
        labels = selectors.parse_label_selector(request.query.get("labelSelector", ""))
        fields = selectors.parse_field_selector(request.query.get("fieldSelector", ""))
        if res.group == "events.k8s.io":
            fields = selectors.events_v1_to_core(fields)
        else:
            selectors.check_supported(res.plural, fields)
    except selectors.SelectorError as err:
        raise errors.bad_request(str(err)) from None

    def matches(obj: Obj) -> bool:
        return bool(labels.matches(obj["metadata"].get("labels") or {}) and fields.matches(obj))

    return matches


def visible_type(change: Change, matches: Filter) -> str:
    """What a filtered watch sees: objects entering or leaving the selection appear ADDED or DELETED."""
    now_in = change.type != DELETED and matches(change.obj)
    was_in = change.old is not None and matches(change.old)
    if change.type == DELETED:
        return DELETED if was_in or matches(change.obj) else ""
    if now_in and was_in:
        return MODIFIED
    if now_in:
        return ADDED
    return DELETED if was_in else ""


def paginate(objs: list[Obj], query: Any) -> tuple[list[Obj], str]:
    start = 0
    token = query.get("continue", "")
    if token:
        try:
            start = int(base64.urlsafe_b64decode(token.encode()).decode())
        except ValueError:
            raise errors.bad_request("continue key is not valid") from None
    limit = bodies.query_int(query.get("limit") or 0)
    if limit <= 0:
        return objs[start:], ""
    page = objs[start : start + limit]
    more = start + limit < len(objs)
    return page, base64.urlsafe_b64encode(str(start + limit).encode()).decode() if more else ""


def is_dry_run(request: web.Request) -> bool:
    """`dryRun=All` (kubectl --dry-run=server): admit and validate everything, store nothing."""
    values = request.query.getall("dryRun", [])
    if any(v != "All" for v in values):
        options = {"POST": "Create", "PUT": "Update", "PATCH": "Patch"}.get(request.method, "Delete")
        shown = "[]string{" + ", ".join(errors.go_repr(v) for v in values) + "}"
        cause = errors.Cause(
            "FieldValueNotSupported", "dryRun", f'Unsupported value: {shown}: supported values: "All"'
        )
        raise errors.invalid(f"{options}Options.meta.k8s.io", "", [cause])
    return bool(values)


def wants_table(request: web.Request) -> bool:
    return metadata.requested_form(request.headers.get("Accept", "")) == metadata.TABLE


def wants_metadata(request: web.Request) -> bool:
    """`as=PartialObjectMetadataList` (or the single form): metadata only, for lists, gets and watches."""
    form = metadata.requested_form(request.headers.get("Accept", ""))
    return form in (metadata.PARTIAL, metadata.PARTIAL_LIST)


async def write_event(response: web.StreamResponse, event: dict[str, Any]) -> None:
    await response.write(json.dumps(event, separators=(",", ":")).encode() + b"\n")


def schema_message(res: Resource, verb: str, detail: str) -> str:
    if verb == "patch":
        return detail
    return messages.cannot_handle(res.kind, res.version, detail)


def check_preconditions(target: Target, current: Obj, preconditions: dict[str, Any]) -> None:
    """DeleteOptions.preconditions as a real API server checks them first, in `rest.BeforeDelete`
    (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go, read at commit
    02a7741; `Store.Delete` in registry/generic/registry/store.go calls it on the object it just read,
    before the storage layer's own `Preconditions.Check`). Its Conflict names a GroupResource made of the
    *kind* (`Resource: gvk.Kind`), so the message says `on Pod "x"` where other conflicts say `pods`."""
    meta = current["metadata"]
    res = target.resource
    on = errors.ResourceRef(res.group, res.kind, res.kind, target.name)
    uid, version = preconditions.get("uid"), preconditions.get("resourceVersion")
    if uid and uid != meta.get("uid"):
        raise conflict_because(
            on,
            f"the UID in the precondition ({uid}) does not match the UID in record ({meta.get('uid', '')}). "
            "The object might have been deleted and then recreated",
        )
    if version and version != meta.get("resourceVersion"):
        raise conflict_because(
            on,
            f"the ResourceVersion in the precondition ({version}) does not match the ResourceVersion in "
            f"record ({meta.get('resourceVersion', '')}). The object might have been modified",
        )


def conflict_because(ref: errors.ResourceRef, reason: str) -> errors.ApiError:
    """errors.NewConflict with its own cause, as registries raise it (not the stale-version wording)."""
    return errors.ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {ref.qualified()} "{ref.name}": {reason}',
        ref.details(),
    )


def patch_error(kind: str, err: patches.PatchError) -> errors.ApiError:
    """A JSON patch that does not apply is NewGenericServerResponse(422): a stock message, the cause apart."""
    if kind == "json" and err.code == 422:
        rejected = "the server rejected our request due to an error in our request"
        cause = {"reason": "UnexpectedServerResponse", "message": err.message}
        return errors.ApiError(422, "Invalid", rejected, {"causes": [cause]})
    return errors.ApiError(err.code, "BadRequest" if err.code == 400 else "Invalid", err.message)


def success_status(res: Resource, obj: Obj) -> dict[str, Any]:
    details: dict[str, Any] = {
        "name": obj["metadata"]["name"],
        "kind": res.plural,
        "uid": obj["metadata"].get("uid", ""),
    }
    if res.group:
        details["group"] = res.group
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
