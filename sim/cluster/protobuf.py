"""Just enough protobuf to read the few small messages kubectl sends only as protobuf (reviews, TokenRequest).

A body is a runtime.Unknown envelope: magic, then {1: typeMeta, 2: raw object, 3: encoding, 4: content type};
the object's field 2 is its spec in every message read here.
"""

from __future__ import annotations

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"


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


def spec_fields(raw: bytes) -> dict[int, bytes | int]:
    """The fields of the spec of the object in a protobuf envelope; ValueError if it is none."""
    if not raw.startswith(MAGIC):
        raise ValueError("no protobuf envelope")
    found = fields(raw[len(MAGIC) :]).get(2, b"")
    spec = fields(found).get(2, b"") if isinstance(found, bytes) else b""
    return fields(spec) if isinstance(spec, bytes) else {}
