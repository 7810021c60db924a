"""The one protobuf body the sim reads: meta/v1 DeleteOptions, as `kubectl drain` sends it.

kubectl's typed client encodes DeleteOptions as protobuf when drain deletes pods (eviction missing, or
`--disable-eviction`), and on a 415 client-go v1.32.4 does not retry in JSON: it falls back only from
CBOR (checked with kubectl v1.32.4 against the sim). So this message is read, into its JSON shape;
every other protobuf body is refused with the apiserver's 415.
"""

from __future__ import annotations

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
