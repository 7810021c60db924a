"""The protobuf bodies the sim reads: reviews and TokenRequest (their specs, for authorization and
authentication), DeleteOptions, and what kubectl's generators create.

kubectl's typed client encodes these as protobuf: DeleteOptions when drain deletes pods (eviction
missing, or `--disable-eviction`), and the Namespace, ConfigMap or PodDisruptionBudget of `kubectl create
namespace|configmap|pdb NAME`. On a 415, client-go v1.32.4 does not retry in JSON (it falls back only
from CBOR; checked with kubectl v1.32.4 against the sim), so these messages are read into their JSON
shape, as far as their writers fill them; every other protobuf body gets the apiserver's 415.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
"""runtime.Unknown envelope: magic, then {1: typeMeta, 2: raw, 3: contentEncoding, 4: contentType}."""

Fields = dict[int, list[bytes | int]]


class ProtobufError(ValueError):
    """The bytes are not the protobuf message the endpoint expects."""


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def read_fields(data: bytes) -> Fields:
    """Every occurrence of every field, by number (repeated fields keep their order)."""
    out: Fields = {}
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            out.setdefault(number, []).append(value)
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ProtobufError("truncated field")
            out.setdefault(number, []).append(data[at : at + size])
            at += size
        else:
            raise ProtobufError(f"wire type {wire} is not used by these messages")
    return out


def fields(data: bytes) -> dict[int, bytes | int]:
    """A message's fields by number, the last occurrence winning, as protobuf says for a singular field."""
    return {number: values[-1] for number, values in read_fields(data).items()}


def spec_fields(raw: bytes) -> dict[int, bytes | int]:
    """The fields of the spec (field 2) of the object in a protobuf envelope; ValueError if it is none."""
    _, body = unwrap(raw)
    spec = fields(body).get(2, b"")
    return fields(spec) if isinstance(spec, bytes) else {}


def _last(found: Fields, number: int) -> bytes | int | None:
    values = found.get(number)
    return values[-1] if values else None


def _text(found: Fields, number: int) -> str | None:
    value = _last(found, number)
    return value.decode() if isinstance(value, bytes) else None


def _message(found: Fields, number: int) -> Fields | None:
    value = _last(found, number)
    return read_fields(value) if isinstance(value, bytes) else None


def unwrap(raw: bytes) -> tuple[dict[str, str], bytes]:
    """The envelope's TypeMeta (apiVersion, kind) and the object's bytes."""
    if not raw.startswith(MAGIC):
        raise ProtobufError("no protobuf envelope")
    envelope = read_fields(raw[len(MAGIC) :])
    type_meta = _message(envelope, 1) or {}
    shown = {"apiVersion": _text(type_meta, 1) or "", "kind": _text(type_meta, 2) or ""}
    body = _last(envelope, 2)
    return shown, body if isinstance(body, bytes) else b""


def _to_int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def delete_options(found: Fields) -> dict[str, Any]:
    """meta/v1 DeleteOptions (k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto, v1.32.4):
    1 gracePeriodSeconds, 2 preconditions {1 uid, 2 resourceVersion}, 3 orphanDependents,
    4 propagationPolicy, 5 dryRun (repeated)."""
    out: dict[str, Any] = {}
    grace = _last(found, 1)
    if isinstance(grace, int):
        out["gracePeriodSeconds"] = _to_int64(grace)
    preconditions = _message(found, 2)
    if preconditions is not None:
        out["preconditions"] = {
            key: value
            for key, value in (("uid", _text(preconditions, 1)), ("resourceVersion", _text(preconditions, 2)))
            if value is not None
        }
    orphan = _last(found, 3)
    if isinstance(orphan, int):
        out["orphanDependents"] = bool(orphan)
    policy = _text(found, 4)
    if policy is not None:
        out["propagationPolicy"] = policy
    dry_run = [v.decode() for v in found.get(5, []) if isinstance(v, bytes)]
    if dry_run:
        out["dryRun"] = dry_run
    return out


def decode_delete_options(raw: bytes) -> dict[str, Any]:
    type_meta, body = unwrap(raw)
    return {**type_meta, **delete_options(read_fields(body))}


# -- objects kubectl's generators create (`kubectl create namespace|configmap|pdb NAME`) ---------------


def _string_map(found: Fields, number: int) -> dict[str, str]:
    """A map<string, string> field: repeated entries {1 key, 2 value}."""
    out: dict[str, str] = {}
    for entry in found.get(number, []):
        if isinstance(entry, bytes):
            pair = read_fields(entry)
            out[_text(pair, 1) or ""] = _text(pair, 2) or ""
    return out


def _strings(found: Fields, number: int) -> list[str]:
    return [v.decode() for v in found.get(number, []) if isinstance(v, bytes)]


def object_meta(found: Fields) -> dict[str, Any]:
    """ObjectMeta as a create sends it: 1 name, 2 generateName, 3 namespace, 11 labels, 12 annotations."""
    out: dict[str, Any] = {}
    for key, number in (("name", 1), ("generateName", 2), ("namespace", 3)):
        value = _text(found, number)
        if value:
            out[key] = value
    for key, number in (("labels", 11), ("annotations", 12)):
        values = _string_map(found, number)
        if values:
            out[key] = values
    return out


def _object(raw: bytes, build: Callable[[Fields], dict[str, Any]]) -> dict[str, Any]:
    type_meta, body = unwrap(raw)
    found = read_fields(body)
    return {**type_meta, "metadata": object_meta(_message(found, 1) or {}), **build(found)}


def _namespace(found: Fields) -> dict[str, Any]:
    """core/v1 Namespace: 2 spec {1 finalizers}."""
    spec = _message(found, 2) or {}
    finalizers = _strings(spec, 1)
    return {"spec": {"finalizers": finalizers} if finalizers else {}}


def _configmap(found: Fields) -> dict[str, Any]:
    """core/v1 ConfigMap: 2 data, 3 binaryData (map<string, bytes>), 4 immutable."""
    out: dict[str, Any] = {}
    data = _string_map(found, 2)
    if data:
        out["data"] = data
    binary: dict[str, str] = {}
    for entry in found.get(3, []):
        if isinstance(entry, bytes):
            pair = read_fields(entry)
            value = _last(pair, 2)
            binary[_text(pair, 1) or ""] = base64.b64encode(
                value if isinstance(value, bytes) else b""
            ).decode()
    if binary:
        out["binaryData"] = binary
    immutable = _last(found, 4)
    if isinstance(immutable, int):
        out["immutable"] = bool(immutable)
    return out


def _int_or_string(found: Fields) -> int | str:
    """intstr.IntOrString: 1 type (0 int, 1 string), 2 intVal, 3 strVal."""
    if _last(found, 1) == 1:
        return _text(found, 3) or ""
    value = _last(found, 2)
    return value if isinstance(value, int) else 0


def _label_selector(found: Fields) -> dict[str, Any]:
    """LabelSelector: 1 matchLabels, 2 matchExpressions {1 key, 2 operator, 3 values}."""
    out: dict[str, Any] = {}
    labels = _string_map(found, 1)
    if labels:
        out["matchLabels"] = labels
    expressions = []
    for raw in found.get(2, []):
        if isinstance(raw, bytes):
            item = read_fields(raw)
            expression: dict[str, Any] = {"key": _text(item, 1) or "", "operator": _text(item, 2) or ""}
            if item.get(3):
                expression["values"] = _strings(item, 3)
            expressions.append(expression)
    if expressions:
        out["matchExpressions"] = expressions
    return out


def _pdb(found: Fields) -> dict[str, Any]:
    """policy/v1 PodDisruptionBudget: 2 spec {1 minAvailable, 2 selector, 3 maxUnavailable,
    4 unhealthyPodEvictionPolicy}."""
    spec_fields = _message(found, 2) or {}
    spec: dict[str, Any] = {}
    for key, number in (("minAvailable", 1), ("maxUnavailable", 3)):
        bound = _message(spec_fields, number)
        if bound is not None:
            spec[key] = _int_or_string(bound)
    selector = _message(spec_fields, 2)
    if selector is not None:
        spec["selector"] = _label_selector(selector)
    policy = _text(spec_fields, 4)
    if policy:
        spec["unhealthyPodEvictionPolicy"] = policy
    return {"spec": spec}


def _pod(raw: bytes) -> dict[str, Any]:
    from sim.cluster import podproto  # it builds on this module's readers

    return podproto.decode_pod(raw)


OBJECT_DECODERS: dict[str, Callable[[bytes], dict[str, Any]]] = {
    "pods": _pod,
    "namespaces": lambda raw: _object(raw, _namespace),
    "configmaps": lambda raw: _object(raw, _configmap),
    "poddisruptionbudgets": lambda raw: _object(raw, _pdb),
}
"""Create bodies read from protobuf, by resource (generated.proto of k8s.io/api core/v1 and policy/v1,
v1.32.4)."""
