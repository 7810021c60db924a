"""Kueue's visibility API (visibility.kueue.x-k8s.io, v1beta2 and v1beta1 from one storage at v0.19.2): the
pending workloads of a ClusterQueue or a LocalQueue, numbered in queue order.

Upstream (kubernetes-sigs/kueue v0.19.2): pkg/visibility/storage/pending_workloads_{cq,lq}.go (Get),
pkg/visibility/storage/utils.go (boundedLimitOffset, newPendingWorkload), apis/visibility/v1beta2 (types,
SetDefaults_PendingWorkloadOptions), pkg/constants/constants.go (the limits).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from sim.cluster import bodies, errors, kueue
from sim.cluster.resources import VISIBILITY_GROUP, Resource
from sim.cluster.store import Obj, Store

DEFAULT_LIMIT = 1000  # constants.DefaultPendingWorkloadsLimit
MAX_LIMIT = 100_000  # constants.MaxPendingWorkloadsLimit


def serve(
    request: web.Request, store: Store, res: Resource, namespace: str, name: str, sub: str
) -> web.Response:
    if not name or sub != "pendingworkloads":
        # The queues themselves have no verb: CqREST and LqREST are only Storage and Scoper.
        raise errors.method_not_allowed()
    if request.method != "GET":
        raise errors.method_not_allowed()
    limit = bodies.query_int(request.query.get("limit") or 0) or DEFAULT_LIMIT
    limit, offset = min(max(limit, 0), MAX_LIMIT), max(bodies.query_int(request.query.get("offset") or 0), 0)
    if res.plural == "clusterqueues":
        items = in_cluster_queue(store, name, limit, offset)
    else:
        items = in_local_queue(store, namespace, name, limit, offset)
    return web.json_response(
        {
            "kind": "PendingWorkloadsSummary",
            "apiVersion": res.api_version,
            "metadata": {"creationTimestamp": None},
            "items": items,
        }
    )


def in_cluster_queue(store: Store, name: str, limit: int, offset: int) -> list[dict[str, Any]]:
    if store.get(kueue.CLUSTER_QUEUES, "", name) is None:
        raise errors.not_found(errors.ResourceRef(VISIBILITY_GROUP, "clusterqueue", "ClusterQueue", name))
    pending = kueue.pending_in(store, name)
    positions: dict[tuple[str, str], int] = {}
    out = []
    for index, wl in enumerate(pending[: offset + limit]):
        key = (wl["metadata"]["namespace"], wl["spec"].get("queueName", ""))
        in_local = positions.get(key, 0)
        positions[key] = in_local + 1
        if index >= offset:
            out.append(pending_workload(wl, in_local, index))
    return out


def in_local_queue(store: Store, namespace: str, name: str, limit: int, offset: int) -> list[dict[str, Any]]:
    lq = store.get(kueue.LOCAL_QUEUES, namespace, name)
    if lq is None:
        raise errors.not_found(errors.ResourceRef(VISIBILITY_GROUP, "localqueue", "LocalQueue", name))
    out: list[dict[str, Any]] = []
    skipped = 0
    for index, wl in enumerate(kueue.pending_in(store, str(lq["spec"].get("clusterQueue", "")))):
        if len(out) >= limit:
            break
        if (wl["metadata"]["namespace"], wl["spec"].get("queueName")) == (namespace, name):
            if skipped < offset:
                skipped += 1
            else:
                out.append(pending_workload(wl, len(out) + offset, index))
    return out


def pending_workload(wl: Obj, in_local: int, in_cluster: int) -> dict[str, Any]:
    meta = wl["metadata"]
    owners = [
        {k: ref[k] for k in ("apiVersion", "kind", "name", "uid")}
        for ref in meta.get("ownerReferences") or []
    ]
    shown: dict[str, Any] = {
        "name": meta["name"],
        "namespace": meta["namespace"],
        "creationTimestamp": meta["creationTimestamp"],
    }
    if owners:
        shown["ownerReferences"] = owners
    return {
        "metadata": shown,
        "priority": kueue.priority(wl),
        "localQueueName": wl["spec"].get("queueName", ""),
        "positionInClusterQueue": in_cluster,
        "positionInLocalQueue": in_local,
    }
