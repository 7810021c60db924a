"""Decodes write bodies as the apiserver's JSON decoder does, against the official client's models.

The server is expected to run, on the body it received: `type_errors` (400, first one wins, as Go's decoder
keeps only the first), then `unknown_fields` (400 under Strict, `Warning` headers under Warn, the default),
then `drop_unknown_fields` + `normalize`, then semantic validation, and last `check_client_model` (422), so
nothing is stored that `kubernetes` would refuse to deserialize in a later list. `decode` does the first
three steps for one resource.
"""

from __future__ import annotations

import datetime
import functools
import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import ROUND_UP, Decimal, InvalidOperation, localcontext
from typing import Any

import kubernetes.client
from kubernetes.client import models

from sim.cluster import errors, messages
from sim.cluster.resources import Resource

logger = logging.getLogger(__name__)

FIELD_VALIDATIONS = ("Ignore", "Warn", "Strict")
DEFAULT_FIELD_VALIDATION = "Warn"  # apiserver default since 1.27 when the client sends none

# -- quantities: apimachinery pkg/api/resource/quantity.go --------------------------------------------
QUANTITY_FORMAT_WRONG = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
QUANTITY_SUFFIX_WRONG = "unable to parse quantity's suffix"
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_DECIMAL_EXPONENT = re.compile(r"^[eE]([-+]?[0-9]+)$")
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SUFFIX_FOR_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}

# Fields the client types as plain `str` / `Dict[str, str]` that Go decodes as resource.Quantity.
_QUANTITY_MAPS = {
    ("V1ResourceRequirements", "limits"),
    ("V1ResourceRequirements", "requests"),
    ("V1NodeStatus", "capacity"),
    ("V1NodeStatus", "allocatable"),
    ("V1PodSpec", "overhead"),
    ("V1ContainerStatus", "allocated_resources"),
}
_QUANTITY_SCALARS = {("V1EmptyDirVolumeSource", "size_limit"), ("V1ResourceFieldSelector", "divisor")}

# Go type names the client's type strings lose, for the decoder's `of type X` wording.
_INT64_KEYS = {
    "activeDeadlineSeconds",
    "terminationGracePeriodSeconds",
    "tolerationSeconds",
    "deletionGracePeriodSeconds",
    "generation",
    "observedGeneration",
    "runAsUser",
    "runAsGroup",
    "fsGroup",
    "supplementalGroups",
    "expirationSeconds",
    "sizeBytes",
}
_GO_STRING_TYPES = {
    ("V1Toleration", "operator"): "v1.TolerationOperator",
    ("V1Toleration", "effect"): "v1.TaintEffect",
    ("V1Taint", "effect"): "v1.TaintEffect",
    ("V1PodSpec", "restart_policy"): "v1.RestartPolicy",
    ("V1PodSpec", "dns_policy"): "v1.DNSPolicy",
    ("V1Container", "image_pull_policy"): "v1.PullPolicy",
    ("V1ContainerPort", "protocol"): "v1.Protocol",
    ("V1PodStatus", "phase"): "v1.PodPhase",
    ("V1NamespaceStatus", "phase"): "v1.NamespacePhase",
}


@dataclass(frozen=True)
class Quantity:
    value: Decimal
    binary: bool
    exponent_form: bool


def parse_quantity(text: str) -> Quantity | str:
    """A parsed quantity, or the decoder's error text for it (ErrFormatWrong / ErrSuffix)."""
    match = _QUANTITY.match(text.strip())
    if not match:
        return QUANTITY_FORMAT_WRONG
    number_text, suffix = match.groups()
    digits = number_text.lstrip("+-")
    if digits.count(".") > 1 or not digits.strip("."):
        return QUANTITY_FORMAT_WRONG
    with localcontext() as ctx:
        ctx.prec = 60
        try:
            number = Decimal(number_text)
        except InvalidOperation:
            return QUANTITY_FORMAT_WRONG
        if suffix in _BINARY_SUFFIXES[1:]:
            return Quantity(number * 1024 ** _BINARY_SUFFIXES.index(suffix), True, False)
        if suffix in _DECIMAL_SUFFIXES:
            return Quantity(number.scaleb(_DECIMAL_SUFFIXES[suffix]), False, False)
        exponent = _DECIMAL_EXPONENT.match(suffix)
        if exponent:
            return Quantity(number.scaleb(int(exponent.group(1))), False, True)
    return QUANTITY_SUFFIX_WRONG


def quantity_error(value: Any) -> str | None:
    """What Quantity.UnmarshalJSON says about a JSON value: strings and numbers parse, the rest don't."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return QUANTITY_FORMAT_WRONG
    parsed = parse_quantity(_number_text(value) if not isinstance(value, str) else value)
    return parsed if isinstance(parsed, str) else None


def canonical_quantity(text: str) -> str:
    """Quantity.String(): how the apiserver stores `0.5` (500m), `1000` (1k), `1024Mi` (1Gi)."""
    parsed = parse_quantity(text)
    if isinstance(parsed, str):
        return text
    with localcontext() as ctx:
        ctx.prec = 60
        value = parsed.value.quantize(Decimal("1e-9"), rounding=ROUND_UP)  # Go rounds up to nano
        if value == 0:
            return "0"
        sign, magnitude = ("-" if value < 0 else ""), abs(value)
        if parsed.binary and magnitude >= 1024 and magnitude == magnitude.to_integral_value():
            mantissa, power = int(magnitude), 0
            while power < len(_BINARY_SUFFIXES) - 1 and mantissa % 1024 == 0:
                mantissa, power = mantissa // 1024, power + 1
            return f"{sign}{mantissa}{_BINARY_SUFFIXES[power]}"
        mantissa, exponent = int(magnitude.scaleb(9)), -9
        while exponent < 18 and mantissa % 1000 == 0:
            mantissa, exponent = mantissa // 1000, exponent + 3
    if parsed.exponent_form:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{mantissa}{_SUFFIX_FOR_EXPONENT[exponent]}"


def _number_text(value: int | float) -> str:
    return json.dumps(value)


# -- the client's schema ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    attr: str
    key: str
    type: str


@functools.cache
def model_fields(model: str) -> dict[str, Field]:
    """JSON key → field of a client model, from its `openapi_types` and `attribute_map`."""
    cls = getattr(models, model)
    return {cls.attribute_map[a]: Field(a, cls.attribute_map[a], t) for a, t in cls.openapi_types.items()}


def _is_model(type_name: str) -> bool:
    return hasattr(models, type_name) and hasattr(getattr(models, type_name), "openapi_types")


def _inner(type_name: str, prefix: str) -> str:
    return type_name[len(prefix) : -1]


def _go_model_name(model: str) -> str:
    """`V1ContainerPort` → `ContainerPort`, `CoreV1Event` / `EventsV1Event` → `Event`."""
    return re.sub(r"^[A-Za-z]*?V[0-9]+(?:alpha[0-9]+|beta[0-9]+)?(?=[A-Z])", "", model)


def _is_quantity(model: str, attr: str) -> bool:
    return (model, attr) in _QUANTITY_SCALARS


def _is_quantity_map(model: str, attr: str) -> bool:
    return (model, attr) in _QUANTITY_MAPS


def unknown_fields(model: str, obj: Mapping[str, Any]) -> list[str]:
    """Paths of fields the schema doesn't know, spelled as strict decoding prints them."""
    return list(_unknown_in_model(model, obj, ""))


def _unknown_in_model(model: str, obj: Any, path: str) -> Iterator[str]:
    if not isinstance(obj, Mapping):
        return
    fields = model_fields(model)
    for key, value in obj.items():
        here = f"{path}.{key}" if path else key
        field = fields.get(key)
        if field is None:
            yield here
        else:
            yield from _unknown_in_value(field.type, value, here)


def _unknown_in_value(type_name: str, value: Any, path: str) -> Iterator[str]:
    if type_name.startswith("List[") and isinstance(value, list):
        for index, item in enumerate(value):
            yield from _unknown_in_value(_inner(type_name, "List["), item, f"{path}[{index}]")
    elif type_name.startswith("Dict[str, ") and isinstance(value, Mapping):
        for key, item in value.items():
            yield from _unknown_in_value(_inner(type_name, "Dict[str, "), item, f"{path}[{key}]")
    elif _is_model(type_name):
        yield from _unknown_in_model(type_name, value, path)


def drop_unknown_fields(model: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy without unknown fields: what Ignore and Warn store."""
    return _rebuild_model(model, obj, lambda field, value: value)


def _rebuild_model(model: str, obj: Mapping[str, Any], leaf: Callable[[Field, Any], Any]) -> dict[str, Any]:
    """A copy keeping only known keys, with `leaf(field, value)` applied to every non-model field."""
    fields = model_fields(model)
    out: dict[str, Any] = {}
    for key, value in obj.items():
        field = fields.get(key)
        if field is not None:
            out[key] = _rebuild_value(field, field.type, value, leaf)
    return out


def _rebuild_value(field: Field, type_name: str, value: Any, leaf: Callable[[Field, Any], Any]) -> Any:
    if type_name.startswith("List[") and isinstance(value, list):
        return [_rebuild_value(field, _inner(type_name, "List["), item, leaf) for item in value]
    if type_name.startswith("Dict[str, ") and isinstance(value, Mapping):
        inner = _inner(type_name, "Dict[str, ")
        return {k: _rebuild_value(field, inner, v, leaf) for k, v in value.items()}
    if _is_model(type_name):
        return _rebuild_model(type_name, value, leaf) if isinstance(value, Mapping) else value
    return leaf(field, value)


def unknown_field_warning(path: str) -> str:
    """The text kubectl prints after `Warning: ` under fieldValidation=Warn."""
    return f'unknown field "{path}"'


def warning_header(text: str) -> str:
    """A `Warning` response header value (RFC 7234 code 299, agent `-`), as the apiserver sends it."""
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# -- Go decoder type errors ------------------------------------------------------------------------


def type_errors(model: str, obj: Mapping[str, Any]) -> list[str]:
    """Values of the wrong JSON type, worded as Go's decoder (the apiserver keeps the first)."""
    return list(_type_errors_in_model(model, obj, ""))


def _type_errors_in_model(model: str, obj: Mapping[str, Any], path: str) -> Iterator[str]:
    fields = model_fields(model)
    for key, value in obj.items():
        field = fields.get(key)
        if field is not None:
            here = f"{path}.{key}" if path else key
            yield from _type_errors_in_value(model, field, field.type, value, here)


def _type_errors_in_value(owner: str, field: Field, type_name: str, value: Any, path: str) -> Iterator[str]:
    if value is None:
        return  # null decodes to the zero value
    if _is_quantity_map(owner, field.attr) and type_name.startswith("Dict["):
        if not isinstance(value, Mapping):
            yield _unmarshal_error(value, owner, path, "v1.ResourceList")
            return
        yield from (err for item in value.values() if (err := quantity_error(item)))
        return
    if _is_quantity(owner, field.attr):
        if err := quantity_error(value):
            yield err
        return
    if type_name.startswith("List["):
        inner = _inner(type_name, "List[")
        if not isinstance(value, list):
            yield _unmarshal_error(value, owner, path, "[]" + _go_type(owner, field, inner))
            return
        for item in value:
            yield from _type_errors_in_value(owner, field, inner, item, path)
    elif type_name.startswith("Dict[str, "):
        inner = _inner(type_name, "Dict[str, ")
        if not isinstance(value, Mapping):
            yield _unmarshal_error(value, owner, path, f"map[string]{_go_type(owner, field, inner)}")
            return
        for item in value.values():
            yield from _type_errors_in_value(owner, field, inner, item, path)
    elif _is_model(type_name):
        if not isinstance(value, Mapping):
            yield _unmarshal_error(value, owner, path, _go_type(owner, field, type_name))
            return
        yield from _type_errors_in_model(type_name, value, path)
    else:
        yield from _scalar_errors(owner, field, type_name, value, path)


def _scalar_errors(owner: str, field: Field, type_name: str, value: Any, path: str) -> Iterator[str]:
    go_type = _go_type(owner, field, type_name)
    if type_name in ("str", "bytes"):
        if not isinstance(value, str):
            yield _unmarshal_error(value, owner, path, go_type)
    elif type_name == "int":
        if isinstance(value, bool) or not isinstance(value, int | float):
            yield _unmarshal_error(value, owner, path, go_type)
        elif isinstance(value, float) or not _fits(value, go_type):
            yield _unmarshal_error(value, owner, path, go_type, number=_number_text(value))
    elif type_name == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            yield _unmarshal_error(value, owner, path, go_type)
    elif type_name == "bool":
        if not isinstance(value, bool):
            yield _unmarshal_error(value, owner, path, go_type)
    elif type_name == "datetime":
        yield from _time_errors(value)


def _fits(value: int, go_type: str) -> bool:
    bits = 64 if go_type == "int64" else 32
    return -(1 << (bits - 1)) <= value < 1 << (bits - 1)


def _time_errors(value: Any) -> Iterator[str]:
    """metav1.Time / MicroTime UnmarshalJSON: a JSON string in RFC 3339."""
    if not isinstance(value, str):
        yield f"json: cannot unmarshal {_json_kind(value)} into Go value of type string"
        return
    try:
        datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if "T" not in value or not re.search(r"(Z|[+-][0-9]{2}:[0-9]{2})$", value):
            raise ValueError(value)
    except ValueError:
        yield f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": cannot parse "{value}" as "2006"'


def _go_type(owner: str, field: Field, type_name: str) -> str:
    if type_name == "str":
        return _GO_STRING_TYPES.get((owner, field.attr), "string")
    if type_name == "int":
        return "int64" if field.key in _INT64_KEYS else "int32"
    if type_name.startswith("List["):
        return "[]" + _go_type(owner, field, _inner(type_name, "List["))
    if type_name.startswith("Dict[str, "):
        return "map[string]" + _go_type(owner, field, _inner(type_name, "Dict[str, "))
    simple = {"bool": "bool", "float": "float64", "bytes": "[]uint8", "datetime": "v1.Time", "object": "any"}
    if type_name in simple:
        return simple[type_name]
    return "v1." + _go_model_name(type_name)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _unmarshal_error(value: Any, owner: str, path: str, go_type: str, number: str = "") -> str:
    """encoding/json UnmarshalTypeError: the struct holding the field, then its path without indices."""
    kind = f"number {number}" if number else _json_kind(value)
    dotted = re.sub(r"\[[^\]]*\]", "", path)
    struct_field = f"{_go_model_name(owner)}.{dotted}"
    return f"json: cannot unmarshal {kind} into Go struct field {struct_field} of type {go_type}"


# -- lossless fixes --------------------------------------------------------------------------------


def normalize(model: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """Quantities as canonical strings (YAML `nvidia.com/gpu: 1` arrives as a number), integral floats
    as ints. Unknown fields are dropped too; run `type_errors` first, on the body as received."""
    return _normalize_model(model, obj)


def _normalize_model(model: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    fields = model_fields(model)
    out: dict[str, Any] = {}
    for key, value in obj.items():
        field = fields.get(key)
        if field is not None:
            out[key] = _normalize_value(model, field, field.type, value)
    return out


def _normalize_value(owner: str, field: Field, type_name: str, value: Any) -> Any:
    if _is_quantity_map(owner, field.attr) and isinstance(value, Mapping):
        return {k: _normalize_quantity(v) for k, v in value.items()}
    if _is_quantity(owner, field.attr):
        return _normalize_quantity(value)
    if type_name.startswith("List[") and isinstance(value, list):
        return [_normalize_value(owner, field, _inner(type_name, "List["), item) for item in value]
    if type_name.startswith("Dict[str, ") and isinstance(value, Mapping):
        inner = _inner(type_name, "Dict[str, ")
        return {k: _normalize_value(owner, field, inner, v) for k, v in value.items()}
    if _is_model(type_name):
        return _normalize_model(type_name, value) if isinstance(value, Mapping) else value
    if type_name == "int" and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _normalize_quantity(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return value
    text = value if isinstance(value, str) else _number_text(value)
    return canonical_quantity(text) if quantity_error(text) is None else value


# -- the client's own deserializer -----------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _api_client() -> kubernetes.client.ApiClient:
    return kubernetes.client.ApiClient()


def check_client_model(model: str, obj: Mapping[str, Any]) -> str | None:
    """The error `kubernetes` raises deserializing `obj` as `model` (as a get or list does), or None."""
    try:
        text = json.dumps(obj)
        _api_client().deserialize(text, model, "application/json")
    except Exception as exc:  # pydantic ValidationError, ValueError, ApiException: all mean "unreadable"
        logger.debug("client model %s refuses object: %s", model, exc)
        return f"{type(exc).__name__}: {exc}"
    return None


def required_fields(model: str) -> list[str]:
    """Paths the client's model requires (`[*]` for any list item or map value) wherever the parent is set."""
    return list(_required_in(model, "", frozenset()))


def _required_in(model: str, path: str, seen: frozenset[str]) -> Iterator[str]:
    if model in seen:
        return
    cls = getattr(models, model)
    by_key = {(info.serialization_alias or name): info for name, info in cls.model_fields.items()}
    for key, field in model_fields(model).items():
        here = f"{path}.{key}" if path else key
        if by_key[key].is_required():
            yield here
        type_name, suffix = field.type, ""
        while type_name.startswith(("List[", "Dict[str, ")):
            type_name = _inner(type_name, "List[" if type_name.startswith("List[") else "Dict[str, ")
            suffix += "[*]"
        if _is_model(type_name):
            yield from _required_in(type_name, here + suffix, seen | {model})


# -- one write, end to end -------------------------------------------------------------------------


@dataclass(frozen=True)
class Decoded:
    obj: dict[str, Any]
    warnings: tuple[str, ...]
    """Texts for `Warning` headers (wrap each with `warning_header`)."""


def decode(resource: Resource, body: Mapping[str, Any], field_validation: str | None = None) -> Decoded:
    """Type check, unknown-field policy and normalization for a create or update body.

    Raises 400 BadRequest worded as the apiserver's `cannot be handled as a <Kind>`."""
    policy = field_validation or DEFAULT_FIELD_VALIDATION
    if policy not in FIELD_VALIDATIONS:
        # ValidateFieldValidation rejects the options object itself (approximated as a create's).
        cause = errors.not_supported("fieldValidation", policy, list(FIELD_VALIDATIONS))
        raise errors.invalid("CreateOptions.meta.k8s.io", "", [cause])
    failures = type_errors(resource.model, body)
    if failures:
        raise errors.bad_request(messages.cannot_handle(resource.kind, resource.version, failures[0]))
    unknown = unknown_fields(resource.model, body)
    if unknown and policy == "Strict":
        detail = messages.strict_unknown_fields(unknown)
        raise errors.bad_request(messages.cannot_handle(resource.kind, resource.version, detail))
    warnings = tuple(unknown_field_warning(p) for p in unknown) if policy == "Warn" else ()
    return Decoded(normalize(resource.model, body), warnings)
