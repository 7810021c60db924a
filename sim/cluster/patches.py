"""The three PATCH bodies the apiserver takes: merge (RFC 7386), JSON patch (RFC 6902), strategic merge."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import jsonpatch


class PatchError(ValueError):
    """A patch that cannot be applied; `code` is the status a real apiserver answers with (400 or 422)."""

    def __init__(self, message: str, *, code: int = 422) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _json_kind(value: Any) -> str:
    """The JSON type name encoding/json uses in an UnmarshalTypeError."""
    if isinstance(value, Mapping):
        return "object"
    kinds = {list: "array", str: "string", bool: "bool", int: "number", float: "number"}
    return kinds.get(type(value), "null")


def _not_an_object(value: Any) -> PatchError:
    """What json.Unmarshal into map[string]interface{} says about any other JSON value."""
    message = f"json: cannot unmarshal {_json_kind(value)} into Go value of type map[string]interface {{}}"
    return PatchError(message, code=400)


# -- application/merge-patch+json ------------------------------------------------------------------
def merge_patch(target: Mapping[str, Any], patch: Any) -> dict[str, Any]:
    """RFC 7386: null deletes, objects merge recursively, anything else replaces."""
    if not isinstance(patch, Mapping):
        raise _not_an_object(patch)
    return _merge_object(copy.deepcopy(dict(target)), patch)


def _merge_object(target: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping):
            current = target.get(key)
            target[key] = _merge_object(current if isinstance(current, dict) else {}, value)
        else:
            target[key] = copy.deepcopy(value)
    return target


# -- application/json-patch+json -------------------------------------------------------------------
def json_patch(target: Mapping[str, Any], ops: Any) -> dict[str, Any]:
    """RFC 6902, one operation at a time so a failure names the operation, as evanphx/json-patch does."""
    if not isinstance(ops, list):
        message = f"json: cannot unmarshal {_json_kind(ops)} into Go value of type jsonpatch.Patch"
        raise PatchError(message, code=400)
    document: Any = copy.deepcopy(dict(target))
    for op in ops:
        if not isinstance(op, Mapping):
            raise PatchError("json: cannot unmarshal into Go value of type jsonpatch.Operation", code=400)
        document = _apply_operation(document, op)
    if not isinstance(document, dict):
        raise _not_an_object(document)
    return document


def _apply_operation(document: Any, op: Mapping[str, Any]) -> Any:
    kind, path = op.get("op"), op.get("path")
    if kind not in ("add", "remove", "replace", "move", "copy", "test"):
        raise PatchError(f"Unexpected kind: {kind}")
    if not isinstance(path, str):
        raise PatchError(f"{kind} operation failed to decode path: operation missing path field")
    try:
        return jsonpatch.apply_patch(document, [dict(op)])
    except jsonpatch.JsonPatchTestFailed:
        raise PatchError(f"testing value {path} failed: test failed") from None
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
        detail = f'{kind} operation does not apply: doc is missing path: "{path}": missing value'
        if isinstance(err, jsonpatch.InvalidJsonPatch):
            detail = f"{kind} operation is invalid: {err}"
        raise PatchError(detail) from None


# -- application/strategic-merge-patch+json --------------------------------------------------------
# patchMergeKey tags of the types we serve: lists under these field names merge element-wise by this key.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "conditions": "type",
    "addresses": "type",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "podIPs": "ip",
    "hostIPs": "ip",
}
# patchStrategy=merge on a list of strings: the union, in order. Every other list is replaced atomically.
MERGE_PRIMITIVES = frozenset({"finalizers", "podCIDRs"})

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_SET_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVES = "$deleteFromPrimitiveList/"
_NO_KEY = object()


def strategic_merge_patch(target: Mapping[str, Any], patch: Any) -> dict[str, Any]:
    """Apply a strategic merge patch the way the apiserver does (MergeParallelList, IgnoreUnmatchedNulls)."""
    if not isinstance(patch, Mapping):
        raise _not_an_object(patch)
    return _merge_map(copy.deepcopy(dict(target)), copy.deepcopy(dict(patch)))


def _merge_map(original: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """strategicpatch.mergeMap; both arguments are private copies and are consumed."""
    if _DIRECTIVE in patch:
        return _map_directive(patch)
    _apply_retain_keys(original, patch)
    _merge_ordered_lists(original, patch)
    for key, value in patch.items():
        if key.startswith(_DELETE_PRIMITIVES):
            _delete_from_primitive_list(original, key.removeprefix(_DELETE_PRIMITIVES), value)
        elif value is None:
            original.pop(key, None)
        elif isinstance(original.get(key), dict) and isinstance(value, dict):
            original[key] = _merge_map(original[key], value)
        elif isinstance(original.get(key), list) and isinstance(value, list):
            original[key] = _merge_list(key, original[key], value)
        else:
            # Absent, a scalar, or a change of type: take the patch value, minus directives and nulls.
            kept, keep = _strip_directives(value)
            if keep:
                original[key] = kept
            else:
                original.pop(key, None)
    return original


def _map_directive(patch: dict[str, Any]) -> dict[str, Any]:
    directive = patch.pop(_DIRECTIVE)
    if directive == "replace":
        return dict(_strip_directives(patch)[0])
    if directive == "delete":
        return {}
    raise PatchError(f"unknown patch type: {directive} in map: {_go_map(patch)}")


def _strip_directives(value: Any) -> tuple[Any, bool]:
    """Drop `$` keys, nulls and `$patch: delete` elements from a value that has nothing to merge into."""
    if isinstance(value, dict):
        if value.get(_DIRECTIVE) == "delete":
            return None, False
        out = {}
        for key, item in value.items():
            if key.startswith("$") or item is None:
                continue
            kept, keep = _strip_directives(item)
            if keep:
                out[key] = kept
        return out, True
    if isinstance(value, list):
        items = [_strip_directives(item) for item in value if not _is_marker_only(item)]
        return [kept for kept, keep in items if keep], True
    return value, True


def _is_marker_only(item: Any) -> bool:
    """A `{"$patch": "replace"}` element carries no data of its own."""
    return isinstance(item, dict) and set(item) == {_DIRECTIVE}


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    """`$retainKeys`: drop every original key not listed; every key the patch sets must be listed."""
    if _RETAIN_KEYS not in patch:
        return
    retain = patch.pop(_RETAIN_KEYS) or []
    if not isinstance(retain, list):
        raise PatchError("invalid patch format of retainKeys", code=400)
    for key, value in patch.items():
        if value is not None and not key.startswith("$") and key not in retain:
            raise PatchError("invalid patch format of retainKeys", code=400)
    for key in [k for k in original if k not in retain]:
        del original[key]


def _delete_from_primitive_list(original: dict[str, Any], key: str, remove: Any) -> None:
    current = original.get(key)
    if not isinstance(current, list) or not isinstance(remove, list):
        return
    original[key] = [item for item in current if item not in remove]


def _merge_list(field: str, original: list[Any], patch: list[Any]) -> list[Any]:
    """mergeSliceHandler: merge-keyed lists by key, primitive merge lists as a set, the rest atomically."""
    if field not in MERGE_KEYS and field not in MERGE_PRIMITIVES:
        return [kept for kept, keep in map(_strip_directives, patch) if keep]
    if not original and not patch:
        return original
    if not all(isinstance(item, dict) for item in original + patch):
        merged = list(original)
        merged += [item for item in patch if item not in merged]
        return _normalize_order(merged, patch, original, "")
    if field not in MERGE_KEYS:
        raise PatchError(f"cannot merge lists without merge key for {field}")
    merge_key = MERGE_KEYS[field]
    original, patch = _apply_element_directives(original, patch, merge_key)
    merged = _merge_by_key(original, patch, merge_key)
    return _normalize_order(merged, patch, original, merge_key)


def _apply_element_directives(
    original: list[Any], patch: list[Any], merge_key: str
) -> tuple[list[Any], list[Any]]:
    """mergeSliceWithSpecialElements: `$patch: delete` removes by key, `$patch: replace` replaces the list."""
    plain, replace = [], False
    for item in patch:
        directive = item.get(_DIRECTIVE)
        if _DIRECTIVE not in item:
            plain.append(item)
        elif directive == "delete":
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            original = [kept for kept in original if kept.get(merge_key, _NO_KEY) != item[merge_key]]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchError("merging lists cannot yet be specified in the patch")
        else:
            raise PatchError(f"unknown patch type: {directive} in map: {_go_map(item)}")
    if replace:
        return [kept for kept, keep in map(_strip_directives, plain) if keep], []
    return original, plain


def _merge_by_key(original: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    merged = list(original)
    for item in patch:
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
        index = _index(merged, item, merge_key)
        if index >= 0:
            merged[index] = _merge_map(merged[index], item)
        else:
            merged.append(_merge_map({}, item))
    return merged


def _merge_ordered_lists(original: dict[str, Any], patch: dict[str, Any]) -> None:
    """mergePatchIntoOriginal: `$setElementOrder/<field>` merges that field and orders it as listed."""
    for directive in [key for key in patch if key.startswith(_SET_ORDER)]:
        order = patch.pop(directive)
        field = directive.removeprefix(_SET_ORDER)
        current, changes = original.get(field) or [], patch.pop(field, None) or []
        if not isinstance(order, list) or not isinstance(current, list) or not isinstance(changes, list):
            raise PatchError("invalid patch format of setElementOrder list", code=400)
        merge_key = MERGE_KEYS.get(field, "") if all(isinstance(i, dict) for i in current + order) else ""
        _check_order_covers_patch(changes, order, merge_key)
        if current and changes:
            merged = _merge_list(field, current, changes)
        else:
            merged = current or _merge_list(field, [], changes)
        if merged or field in original:
            original[field] = _normalize_order(merged, order, current, merge_key)


def _check_order_covers_patch(changes: list[Any], order: list[Any], merge_key: str) -> None:
    """validatePatchWithSetOrderList: the patch's own elements must appear in the order list, in order."""
    wanted = [item for item in changes if not (isinstance(item, dict) and _DIRECTIVE in item)]
    position = 0
    for entry in order:
        if position < len(wanted) and _same_element(wanted[position], entry, merge_key):
            position += 1
    if position < len(wanted):
        raise PatchError("invalid patch format of setElementOrder list", code=400)


def _normalize_order(
    merged: list[Any], patch_order: list[Any], server_order: list[Any], key: str
) -> list[Any]:
    """normalizeElementOrder: patched elements in patch order, server-only ones slotted in by live order."""
    in_patch = [item for item in merged if _index(patch_order, item, key) >= 0]
    server_only = [item for item in merged if _index(patch_order, item, key) < 0]
    in_patch = _sorted_by(in_patch, patch_order, key)
    server_only = _sorted_by(server_only, server_order, key)
    return _interleave(server_only, in_patch, server_order, key)


def _sorted_by(items: list[Any], order: list[Any], key: str) -> list[Any]:
    def rank(item: Any) -> int:
        found = _index(order, item, key)
        return found if found >= 0 else len(order)

    return sorted(items, key=rank)


def _interleave(left: list[Any], right: list[Any], server_order: list[Any], key: str) -> list[Any]:
    """mergeSortedSlice: take from `left` only when both heads are in the live list and left's is earlier."""
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if j >= len(right):
            out.append(left[i])
            i += 1
            continue
        if i < len(left):
            li, ri = _index(server_order, left[i], key), _index(server_order, right[j], key)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
                continue
        out.append(right[j])
        j += 1
    return out


def _index(items: list[Any], wanted: Any, key: str) -> int:
    for position, item in enumerate(items):
        if _same_element(item, wanted, key):
            return position
    return -1


def _same_element(a: Any, b: Any, key: str) -> bool:
    if not key:
        return bool(a == b)
    return isinstance(a, dict) and isinstance(b, dict) and a.get(key, _NO_KEY) == b.get(key, _NO_KEY)


def _no_merge_key(item: Mapping[str, Any], merge_key: str) -> PatchError:
    return PatchError(f"map: {_go_map(item)} does not contain declared merge key: {merge_key}")


def _go_map(value: Any) -> str:
    """Go's %v of a decoded JSON value: `map[image:nginx name:app]`, keys sorted."""
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{k}:{_go_map(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_map(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)
