"""The forms a client may ask a read to come back in, through `Accept: application/json;as=...`.

kubectl asks for Table; metadata-only clients (client-go's metadata informers, `kubectl get
--show-kind` in some paths, garbage collectors) ask for PartialObjectMetadata(List): each object's
metadata alone, under kind PartialObjectMetadata in meta.k8s.io/v1 (staging/src/k8s.io/apiserver/
pkg/endpoints/handlers/response.go, v1.32.4).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from sim.cluster.store import Obj

TABLE = "Table"
PARTIAL = "PartialObjectMetadata"
PARTIAL_LIST = "PartialObjectMetadataList"
META_GROUP_VERSION = "meta.k8s.io/v1"


def requested_form(accept: str) -> str:
    """The `as=` of the first JSON entry of Accept, or "" for the object itself.

    Entries the sim cannot encode (protobuf) are skipped, as the apiserver's negotiation would pick the
    next acceptable one."""
    for entry in accept.split(","):
        media, *params = [part.strip() for part in entry.split(";")]
        if media not in ("application/json", "*/*", "application/*"):
            continue
        options = dict(p.split("=", 1) for p in params if "=" in p)
        form = options.get("as", "")
        if form in (TABLE, PARTIAL, PARTIAL_LIST) and options.get("g", "meta.k8s.io") != "meta.k8s.io":
            return ""
        return form
    return ""


def partial(obj: Obj) -> dict[str, Any]:
    return {
        "kind": PARTIAL,
        "apiVersion": META_GROUP_VERSION,
        "metadata": copy.deepcopy(obj.get("metadata") or {}),
    }


def partial_list(objs: Iterable[Obj], *, resource_version: str, continue_token: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
    return {
        "kind": PARTIAL_LIST,
        "apiVersion": META_GROUP_VERSION,
        "metadata": meta,
        "items": [partial(o) for o in objs],
    }
