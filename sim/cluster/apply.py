"""Server-side apply (`PATCH` with `application/apply-patch+yaml`), in a reduced form.

What it does as the apiserver does: the applied configuration creates the object when it is missing
and is merged into it when it exists (strategic merge: lists of named items merge by name), and the
field manager's `Apply` entry in `metadata.managedFields` records the fields it set. What it does not:
conflicts between managers (every apply acts as if `force=true`) and removing a field a manager stops
applying; docs/sim.md says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sim.cluster import errors

CONTENT_TYPE = "application/apply-patch+yaml"  # types.ApplyYAMLPatchType
SKIPPED_TOP_LEVEL = ("apiVersion", "kind", "status")
SKIPPED_METADATA = ("name", "namespace", "managedFields", "resourceVersion", "uid", "creationTimestamp")


def field_manager(query: Mapping[str, str]) -> str:
    """ValidatePatchOptions (apimachinery/pkg/apis/meta/v1/validation/validation.go, v1.32.4)."""
    manager = query.get("fieldManager", "")
    if not manager:
        cause = errors.Cause(
            "FieldValueRequired", "fieldManager", "Required value: is required for apply patch"
        )
        raise errors.invalid("PatchOptions.meta.k8s.io", "", [cause])
    if len(manager) > 128:
        cause = errors.Cause("FieldValueTooLong", "fieldManager", "Too long: may not be more than 128 bytes")
        raise errors.invalid("PatchOptions.meta.k8s.io", "", [cause])
    return manager


def check_applied(applied: Any, *, kind: str, api_version: str, name: str) -> dict[str, Any]:
    """An applied configuration names its kind, apiVersion and the object the URL names."""
    if not isinstance(applied, dict):
        raise errors.bad_request("error decoding YAML: the applied configuration is not an object")
    if applied.get("kind") != kind or applied.get("apiVersion") != api_version:
        raise errors.bad_request(
            f"the API version in the data ({applied.get('apiVersion')}) does not match the expected "
            f"API version ({api_version})"
            if applied.get("apiVersion") != api_version
            else f"the kind in the data ({applied.get('kind')}) does not match the expected kind ({kind})"
        )
    meta = applied.get("metadata")
    given = meta.get("name", "") if isinstance(meta, dict) else ""
    if given != name:
        raise errors.bad_request(
            f"the name of the object ({given}) does not match the name on the URL ({name})"
        )
    return applied


def fields_v1(value: Any, *, top: bool = True) -> dict[str, Any]:
    """The FieldsV1 set of an applied configuration: `f:` per field, `k:{"name":…}` per named list item."""
    out: dict[str, Any] = {}
    if not isinstance(value, dict):
        return out
    for key, item in value.items():
        if top and key in SKIPPED_TOP_LEVEL:
            continue
        if top and key == "metadata" and isinstance(item, dict):
            kept = {k: v for k, v in item.items() if k not in SKIPPED_METADATA}
            if kept:
                out["f:metadata"] = fields_v1(kept, top=False)
            continue
        out[f"f:{key}"] = _field_set(item)
    return out


def _field_set(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return fields_v1(item, top=False)
    if isinstance(item, list) and item and all(isinstance(i, dict) and "name" in i for i in item):
        keyed: dict[str, Any] = {}
        for element in item:
            key = "k:" + json.dumps({"name": element["name"]}, separators=(",", ":"))
            keyed[key] = {".": {}, **fields_v1(element, top=False)}
        return keyed
    return {}


def record_manager(obj: dict[str, Any], applied: dict[str, Any], *, manager: str, now: str) -> None:
    """Replace this manager's Apply entry with the fields of this configuration."""
    meta = obj.setdefault("metadata", {})
    entries = [
        e
        for e in meta.get("managedFields") or []
        if not (e.get("manager") == manager and e.get("operation") == "Apply")
    ]
    entries.append(
        {
            "manager": manager,
            "operation": "Apply",
            "apiVersion": applied["apiVersion"],
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields_v1(applied),
        }
    )
    meta["managedFields"] = entries
