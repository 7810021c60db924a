"""core/v1 Pod create bodies in protobuf, as `kubectl debug node/NAME` sends them.

kubectl's typed client posts the node-debugging pod as protobuf. The field numbers are those of
staging/src/k8s.io/api/core/v1/generated.proto at k8s v1.32.10 (the pinned messages.KUBERNETES_VERSION).
Only the fields a debugging pod carries are read; a body with any other field is refused as
undecodable rather than stored with parts silently missing.
"""

from __future__ import annotations

from typing import Any

from sim.cluster import protobuf

# Per message: field number -> (JSON name, kind, message name for "msg"/"msgs")
Schema = dict[int, tuple[str, str, str]]
SCHEMAS: dict[str, Schema] = {
    "PodSpec": {
        1: ("volumes", "msgs", "Volume"),
        2: ("containers", "msgs", "Container"),
        3: ("restartPolicy", "str", ""),
        4: ("terminationGracePeriodSeconds", "int", ""),
        6: ("dnsPolicy", "str", ""),
        7: ("nodeSelector", "map", ""),
        10: ("nodeName", "str", ""),
        11: ("hostNetwork", "bool", ""),
        12: ("hostPID", "bool", ""),
        13: ("hostIPC", "bool", ""),
        22: ("tolerations", "msgs", "Toleration"),
    },
    "Container": {
        1: ("name", "str", ""),
        2: ("image", "str", ""),
        3: ("command", "strs", ""),
        4: ("args", "strs", ""),
        5: ("workingDir", "str", ""),
        7: ("env", "msgs", "EnvVar"),
        9: ("volumeMounts", "msgs", "VolumeMount"),
        13: ("terminationMessagePath", "str", ""),
        14: ("imagePullPolicy", "str", ""),
        15: ("securityContext", "msg", "SecurityContext"),
        16: ("stdin", "bool", ""),
        17: ("stdinOnce", "bool", ""),
        18: ("tty", "bool", ""),
        20: ("terminationMessagePolicy", "str", ""),
    },
    "SecurityContext": {1: ("capabilities", "msg", "Capabilities"), 2: ("privileged", "bool", "")},
    "Capabilities": {1: ("add", "strs", ""), 2: ("drop", "strs", "")},
    "EnvVar": {1: ("name", "str", ""), 2: ("value", "str", "")},
    "VolumeMount": {1: ("name", "str", ""), 2: ("readOnly", "bool", ""), 3: ("mountPath", "str", "")},
    "Volume": {1: ("name", "str", ""), 2: ("", "inline", "VolumeSource")},
    "VolumeSource": {1: ("hostPath", "msg", "HostPathVolumeSource")},
    "HostPathVolumeSource": {1: ("path", "str", ""), 2: ("type", "str", "")},
    "Toleration": {
        1: ("key", "str", ""),
        2: ("operator", "str", ""),
        3: ("value", "str", ""),
        4: ("effect", "str", ""),
        5: ("tolerationSeconds", "int", ""),
    },
}


def decode_pod(raw: bytes) -> dict[str, Any]:
    """A Pod envelope into its JSON shape: metadata, and the spec fields above."""
    type_meta, body = protobuf.unwrap(raw)
    found = protobuf.read_fields(body)
    meta = found.get(1, [b""])[-1]
    spec = found.get(2, [b""])[-1]
    if set(found) - {1, 2, 3} or not isinstance(meta, bytes) or not isinstance(spec, bytes):
        raise protobuf.ProtobufError("not a Pod a debugging session sends")
    return {
        **type_meta,
        "metadata": protobuf.object_meta(protobuf.read_fields(meta)),
        "spec": decode(spec, "PodSpec"),
    }


def decode(data: bytes, message: str) -> dict[str, Any]:
    schema = SCHEMAS[message]
    out: dict[str, Any] = {}
    for number, values in protobuf.read_fields(data).items():
        if number not in schema:
            if any(values_set(v) for v in values):
                raise protobuf.ProtobufError(f"{message} field {number} is not read here")
            continue  # gogo-protobuf writes every non-pointer field, empty ones included
        name, kind, sub = schema[number]
        if kind == "inline":
            out.update(decode(_bytes(values[-1]), sub))
        elif kind == "msg":
            out[name] = decode(_bytes(values[-1]), sub)
        elif kind == "msgs":
            out[name] = [decode(_bytes(v), sub) for v in values]
        elif kind == "strs":
            out[name] = [_bytes(v).decode() for v in values]
        elif kind == "map":
            out[name] = {_text(e, 1): _text(e, 2) for e in (protobuf.read_fields(_bytes(v)) for v in values)}
        else:
            out[name] = _scalar(values[-1], kind)
    return {key: value for key, value in out.items() if value not in ("", False, [], {})}  # JSON omitempty


def values_set(value: bytes | int) -> bool:
    """Whether a field holds more than its zero value (an empty message counts as zero)."""
    if isinstance(value, int):
        return value != 0
    return any(values_set(v) for vs in _fields_or_none(value).values() for v in vs) if value else False


def _fields_or_none(value: bytes) -> protobuf.Fields:
    try:
        return protobuf.read_fields(value)
    except protobuf.ProtobufError:
        return {0: [1]}  # not a message: a non-empty string or bytes


def _bytes(value: bytes | int) -> bytes:
    if not isinstance(value, bytes):
        raise protobuf.ProtobufError("a message field holds a number")
    return value


def _text(found: protobuf.Fields, number: int) -> str:
    return _bytes(found.get(number, [b""])[-1]).decode()


def _scalar(value: bytes | int, kind: str) -> Any:
    if kind == "str":
        return _bytes(value).decode()
    if not isinstance(value, int):
        raise protobuf.ProtobufError("a number field holds bytes")
    return bool(value) if kind == "bool" else value - (1 << 64) if value >= 1 << 63 else value
