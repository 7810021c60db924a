"""Semantic validation of writes, with upstream's field paths and messages (pkg/apis/core/validation).

Runs on a decoded, normalized body (see `schema`), after the server has filled `metadata.namespace` from
the URL and generated a name from `generateName`. Each function returns causes; the server wraps them in
`errors.invalid(kind, name, causes)`. Go iterates maps in random order; we sort keys to stay stable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from sim.cluster import gates, messages, schema
from sim.cluster.errors import Cause, forbidden, go_repr, invalid_value, not_supported, required

# -- apimachinery/pkg/util/validation ---------------------------------------------------------------
DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + r"(\." + DNS1123_LABEL_FMT + ")*"
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"
CONFIG_MAP_KEY_FMT = "[-._a-zA-Z0-9]+"
DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
CONFIG_MAP_KEY_MSG = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
MAX_CONFIG_MAP_SIZE = 1024 * 1024  # core.MaxSecretSize, shared with ConfigMaps
MAX_INT32 = 2**31 - 1

RESTART_POLICIES = ["Always", "OnFailure", "Never"]
PULL_POLICIES = ["Always", "IfNotPresent", "Never"]
TOLERATION_OPERATORS = ["Equal", "Exists"]
TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
EVENT_TYPES = ("Normal", "Warning")
STANDARD_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}
POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """validation.RegexError, including its `'a',  or 'b'` double space."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def _full(fmt: str) -> re.Pattern[str]:
    return re.compile(f"^{fmt}\\Z")  # as Go's `$`: the very end; Python's `$` also matches before a newline


_DNS1123_LABEL = _full(DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN = _full(DNS1123_SUBDOMAIN_FMT)
_QUALIFIED_NAME = _full(QUALIFIED_NAME_FMT)
_LABEL_VALUE = _full(LABEL_VALUE_FMT)
_CONFIG_MAP_KEY = _full(CONFIG_MAP_KEY_FMT)


def is_dns1123_label(value: str) -> list[str]:
    errs = [max_len_error(63)] if len(value) > 63 else []
    if not _DNS1123_LABEL.match(value):
        errs.append(regex_error(DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = [max_len_error(253)] if len(value) > 253 else []
    if not _DNS1123_SUBDOMAIN.match(value):
        errs.append(regex_error(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """Label and annotation keys: an optional DNS subdomain prefix and `/`, then a name part."""
    parts = value.split("/")
    errs: list[str] = []
    if len(parts) > 2:
        example = regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        suffix = "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        return [f"a qualified name {example} {suffix}"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + msg for msg in is_dns1123_subdomain(prefix))
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not _QUALIFIED_NAME.match(name):
        errs.append(
            "name part " + regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def is_valid_label_value(value: str) -> list[str]:
    errs = [max_len_error(63)] if len(value) > 63 else []
    if not _LABEL_VALUE.match(value):
        errs.append(regex_error(LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def is_config_map_key(value: str) -> list[str]:
    errs = [max_len_error(253)] if len(value) > 253 else []
    if not _CONFIG_MAP_KEY.match(value):
        errs.append(regex_error(CONFIG_MAP_KEY_MSG, CONFIG_MAP_KEY_FMT, "key.name", "KEY_NAME", "key-name"))
    if value == ".":
        errs.append("must not be '.'")
    elif value == "..":
        errs.append("must not be '..'")
    elif value.startswith(".."):
        errs.append("must not start with '..'")
    return errs


# -- small helpers over untyped JSON ---------------------------------------------------------------


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def required_detail(path: str, detail: str) -> Cause:
    return Cause("FieldValueRequired", path, f"Required value: {detail}")


def duplicate(path: str, shown: str, detail: str = "") -> Cause:
    return Cause("FieldValueDuplicate", path, f"Duplicate value: {shown}" + (f": {detail}" if detail else ""))


def too_long(path: str, max_bytes: int) -> Cause:
    return Cause("FieldValueTooLong", path, f"Too long: may not be more than {max_bytes} bytes")


def _each(path: str, value: Any, msgs: Iterable[str]) -> list[Cause]:
    return [invalid_value(path, value, msg) for msg in msgs]


def validate_labels(labels: Any, path: str) -> list[Cause]:
    """ValidateLabels: key and value errors both sit on the map's own path."""
    causes: list[Cause] = []
    for key, value in sorted(_map(labels).items()):
        causes += _each(path, key, is_qualified_name(key))
        causes += _each(path, value, is_valid_label_value(_str(value)))
    return causes


def validate_annotations(annotations: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    total = 0
    for key, value in sorted(_map(annotations).items()):
        causes += _each(path, key, is_qualified_name(key.lower()))
        total += len(key.encode()) + len(_str(value).encode())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return causes


def validate_object_meta(
    meta: Any, *, namespaced: bool, name_check: Callable[[str], list[str]], path: str = "metadata"
) -> list[Cause]:
    meta = _map(meta)
    name, generate_name, namespace = (
        _str(meta.get("name")),
        _str(meta.get("generateName")),
        _str(meta.get("namespace")),
    )
    causes: list[Cause] = []
    if generate_name:
        # prefix=true: a trailing dash is fine, the random suffix follows it
        causes += _each(
            f"{path}.generateName", generate_name, name_check(generate_name.removesuffix("-") or "a")
        )
    if not name:
        causes.append(required_detail(f"{path}.name", "name or generateName is required"))
    else:
        causes += _each(f"{path}.name", name, name_check(name))
    if namespaced:
        if not namespace:
            causes.append(required(f"{path}.namespace"))
        else:
            causes += _each(f"{path}.namespace", namespace, is_dns1123_label(namespace))
    elif namespace:
        causes.append(forbidden(f"{path}.namespace", "not allowed on this type"))
    causes += validate_labels(meta.get("labels"), f"{path}.labels")
    causes += validate_annotations(meta.get("annotations"), f"{path}.annotations")
    return causes


def validate_object_meta_update(meta: Any, old_meta: Any, path: str = "metadata") -> list[Cause]:
    causes: list[Cause] = []
    for key in ("name", "namespace", "uid", "creationTimestamp"):
        new_value, old_value = _map(meta).get(key), _map(old_meta).get(key)
        if key in ("uid", "creationTimestamp") and not new_value:
            continue  # the server carries these over when the client leaves them out
        if new_value != old_value:
            causes.append(invalid_value(f"{path}.{key}", new_value or "", "field is immutable"))
    return causes


# -- resources -------------------------------------------------------------------------------------


def _is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_extended_resource(name: str) -> bool:
    if _is_native_resource(name) or name.startswith("requests."):
        return False
    return not is_qualified_name("requests." + name)


def _overcommit_allowed(name: str) -> bool:
    return _is_native_resource(name) and not _is_hugepages(name)


def _go_quantity(text: str) -> str:
    """A resource.Quantity printed with %#v, as field errors print a Quantity passed by value."""
    parsed = schema.parse_quantity(text)
    canonical = schema.canonical_quantity(text)
    value, scale = _int64_amount(text)
    fmt = "BinarySI" if not isinstance(parsed, str) and parsed.binary else "DecimalSI"
    if not isinstance(parsed, str) and parsed.exponent_form:
        fmt = "DecimalExponent"
    cached = canonical if canonical == text else ""
    return (
        f"resource.Quantity{{i:resource.int64Amount{{value:{value}, scale:{scale}}}, "
        f'd:resource.infDecAmount{{Dec:(*inf.Dec)(nil)}}, s:"{cached}", Format:"{fmt}"}}'
    )


def _int64_amount(text: str) -> tuple[int, int]:
    parsed = schema.parse_quantity(text)
    if isinstance(parsed, str):
        return 0, 0
    if parsed.binary and parsed.value == parsed.value.to_integral_value():
        return int(parsed.value), 0
    exponent = int(parsed.value.as_tuple().exponent)
    return int(parsed.value.scaleb(-exponent)), exponent


def _quantity(value: Any) -> Decimal | None:
    parsed = schema.parse_quantity(value) if isinstance(value, str) else None
    return None if parsed is None or isinstance(parsed, str) else parsed.value


def validate_container_resource_name(name: str, path: str) -> list[Cause]:
    causes = _each(path, name, is_qualified_name(name))
    if causes:
        return causes
    if "/" not in name:
        if name not in STANDARD_CONTAINER_RESOURCES and not _is_hugepages(name):
            return [invalid_value(path, name, "must be a standard resource for containers")]
    elif not _is_native_resource(name) and not is_extended_resource(name):
        return [invalid_value(path, name, "doesn't follow extended resource name standard")]
    return []


def _validate_quantity_value(name: str, text: str, path: str) -> list[Cause]:
    value = _quantity(text)
    if value is None:
        return []  # the decoder refused it already
    causes: list[Cause] = []
    if value < 0:
        causes.append(
            invalid_value(path, schema.canonical_quantity(text), "must be greater than or equal to 0")
        )
    if is_extended_resource(name) and (value * 1000) % 1000 != 0:
        causes.append(
            Cause("FieldValueInvalid", path, f"Invalid value: {_go_quantity(text)}: must be an integer")
        )
    return causes


def validate_resource_requirements(resources: Any, path: str) -> list[Cause]:
    limits, requests = _map(_map(resources).get("limits")), _map(_map(resources).get("requests"))
    lim_path, req_path = f"{path}.limits", f"{path}.requests"
    causes: list[Cause] = []
    for name, text in sorted(limits.items()):
        here = f"{lim_path}[{name}]"
        causes += validate_container_resource_name(name, here) + _validate_quantity_value(
            name, _str(text), here
        )
    for name, text in sorted(requests.items()):
        here = f"{req_path}[{name}]"
        causes += validate_container_resource_name(name, here) + _validate_quantity_value(
            name, _str(text), here
        )
        request = _quantity(text)
        if name in limits:
            limit = _quantity(limits[name])
            if request is None or limit is None:
                continue
            shown, limit_shown = schema.canonical_quantity(text), schema.canonical_quantity(limits[name])
            if request != limit and not _overcommit_allowed(name):
                causes.append(
                    invalid_value(req_path, shown, f"must be equal to {name} limit of {limit_shown}")
                )
            elif request > limit:
                causes.append(
                    invalid_value(
                        req_path, shown, f"must be less than or equal to {name} limit of {limit_shown}"
                    )
                )
        elif not _overcommit_allowed(name):
            causes.append(required_detail(lim_path, "Limit must be set for non overcommitable resources"))
    return causes


# -- pods ------------------------------------------------------------------------------------------


def validate_containers(containers: Any, path: str) -> list[Cause]:
    if not _list(containers):
        return [required(path)]
    causes: list[Cause] = []
    seen: set[str] = set()
    for index, container in enumerate(_list(containers)):
        here, container = f"{path}[{index}]", _map(container)
        name = _str(container.get("name"))
        if not name:
            causes.append(required(f"{here}.name"))
        else:
            causes += _each(f"{here}.name", name, is_dns1123_label(name))
            if name in seen:
                causes.append(duplicate(f"{here}.name", go_repr(name)))
            seen.add(name)
        image = _str(container.get("image"))
        if not image:
            causes.append(required(f"{here}.image"))
        elif image.strip() != image:
            causes.append(
                invalid_value(f"{here}.image", image, "must not have leading or trailing whitespace")
            )
        for port_index, port in enumerate(_list(container.get("ports"))):
            number = _map(port).get("containerPort")
            if isinstance(number, int) and not 1 <= number <= 65535:
                port_path = f"{here}.ports[{port_index}].containerPort"
                causes.append(invalid_value(port_path, number, "must be between 1 and 65535, inclusive"))
        causes += validate_resource_requirements(container.get("resources"), f"{here}.resources")
        policy = container.get("imagePullPolicy")
        if policy and policy not in PULL_POLICIES:
            causes.append(not_supported(f"{here}.imagePullPolicy", policy, PULL_POLICIES))
    return causes


def _go_toleration(toleration: Mapping[str, Any]) -> str:
    """core.Toleration printed with %#v (the pointer's address is made up, as it would differ anyway)."""
    seconds = "(*int64)(nil)" if toleration.get("tolerationSeconds") is None else "(*int64)(0xc000a1b2c8)"
    fields = ", ".join(
        f"{k}:{go_repr(_str(toleration.get(k.lower())))}" for k in ("Key", "Operator", "Value", "Effect")
    )
    return f"core.Toleration{{{fields}, TolerationSeconds:{seconds}}}"


def validate_tolerations(tolerations: Any, path: str) -> list[Cause]:
    """ValidateTolerations, including upstream's habit of reporting value errors on `operator`."""
    causes: list[Cause] = []
    for index, raw in enumerate(_list(tolerations)):
        here, toleration = f"{path}[{index}]", _map(raw)
        key, operator = _str(toleration.get("key")), _str(toleration.get("operator"))
        value, effect = _str(toleration.get("value")), _str(toleration.get("effect"))
        if key:
            causes += _each(f"{here}.key", key, is_qualified_name(key))
        if not key and operator != "Exists":
            causes.append(invalid_value(f"{here}.operator", operator, messages.TOLERATION_EMPTY_KEY))
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            causes.append(invalid_value(f"{here}.effect", effect, messages.TOLERATION_SECONDS_EFFECT))
        if operator in ("Equal", ""):
            errs = is_valid_label_value(value)
            if errs:
                causes.append(invalid_value(f"{here}.operator", value, ";".join(errs)))
        elif operator == "Exists":
            if value:
                shown = _go_toleration(toleration)
                causes.append(
                    Cause(
                        "FieldValueInvalid",
                        f"{here}.operator",
                        f"Invalid value: {shown}: {messages.TOLERATION_EXISTS_VALUE}",
                    )
                )
        else:
            causes.append(not_supported(f"{here}.operator", operator, TOLERATION_OPERATORS))
        if effect:
            causes += _validate_taint_effect(effect, f"{here}.effect", allow_empty=True)
    return causes


def _validate_taint_effect(effect: str, path: str, *, allow_empty: bool) -> list[Cause]:
    causes = [required(path)] if not effect and not allow_empty else []
    if effect not in TAINT_EFFECTS:
        causes.append(not_supported(path, effect, TAINT_EFFECTS))
    return causes


def validate_pod_spec(spec: Any, path: str = "spec") -> list[Cause]:
    spec = _map(spec)
    causes = validate_containers(spec.get("containers"), f"{path}.containers")
    restart_policy = spec.get("restartPolicy")
    if restart_policy is not None and restart_policy not in RESTART_POLICIES:
        causes.append(not_supported(f"{path}.restartPolicy", restart_policy, RESTART_POLICIES))
    causes += validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    node_name = _str(spec.get("nodeName"))
    if node_name:
        causes += _each(f"{path}.nodeName", node_name, is_dns1123_subdomain(node_name))
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and not 1 <= deadline <= MAX_INT32:
        causes.append(
            invalid_value(
                f"{path}.activeDeadlineSeconds", deadline, f"must be between 1 and {MAX_INT32}, inclusive"
            )
        )
    causes += validate_tolerations(spec.get("tolerations"), f"{path}.tolerations")
    causes += gates.spec_causes(spec, f"{path}.schedulingGates", is_qualified_name)
    return causes


def validate_pod_update(pod: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    """ValidatePodUpdate's common case: the old spec, with only the mutable fields taken from the new."""
    spec, old_spec = _map(pod.get("spec")), _map(old.get("spec"))
    causes = _toleration_update_causes(spec.get("tolerations"), old_spec.get("tolerations"))
    causes += gates.update_causes(spec, old_spec)
    munged = json.loads(json.dumps(old_spec))
    gates.munge(spec, old_spec, munged)
    for kind in ("containers", "initContainers"):
        new_list, munged_list = _list(spec.get(kind)), _list(munged.get(kind))
        if len(new_list) == len(munged_list):
            for new_container, munged_container in zip(new_list, munged_list, strict=True):
                if isinstance(munged_container, dict) and "image" in _map(new_container):
                    munged_container["image"] = _map(new_container)["image"]
    for key in ("activeDeadlineSeconds", "tolerations"):
        _copy_key(spec, munged, key)
    old_grace = old_spec.get("terminationGracePeriodSeconds")
    if isinstance(old_grace, int) and old_grace < 0 and spec.get("terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = 1
    if munged != dict(spec):
        causes.append(forbidden("spec", POD_UPDATE_FORBIDDEN + "\n" + _spec_diff(old_spec, spec)))
    return causes


def _copy_key(source: Mapping[str, Any], target: dict[str, Any], key: str) -> None:
    if key in source:
        target[key] = source[key]
    else:
        target.pop(key, None)


def _toleration_update_causes(new: Any, old: Any) -> list[Cause]:
    """validateOnlyAddedTolerations: every old toleration must survive, tolerationSeconds aside."""
    remaining = [_toleration_identity(t) for t in _list(new)]
    if all(_toleration_identity(t) in remaining for t in _list(old)):
        return []
    return [
        forbidden("spec.tolerations", "existing toleration can not be modified except its tolerationSeconds")
    ]


def _toleration_identity(toleration: Any) -> tuple[str, ...]:
    return tuple(_str(_map(toleration).get(k)) for k in ("key", "operator", "value", "effect"))


def _spec_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """A short stand-in for cmp.Diff: the top-level spec fields that differ."""
    lines = ["  core.PodSpec{"]
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            if key in old:
                lines.append(f"-  {key}: {json.dumps(old[key], sort_keys=True)},")
            if key in new:
                lines.append(f"+  {key}: {json.dumps(new[key], sort_keys=True)},")
    lines.append("  }")
    return "\n".join(lines)


# -- other kinds -----------------------------------------------------------------------------------


def _go_taint(taint: Mapping[str, Any]) -> str:
    fields = ", ".join(f"{k}:{go_repr(_str(taint.get(k.lower())))}" for k in ("Key", "Value", "Effect"))
    return f"core.Taint{{{fields}, TimeAdded:(*v1.Time)(nil)}}"


def validate_taints(taints: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[tuple[str, str]] = set()
    for index, raw in enumerate(_list(taints)):
        here, taint = f"{path}[{index}]", _map(raw)
        key, value, effect = _str(taint.get("key")), _str(taint.get("value")), _str(taint.get("effect"))
        causes += _each(f"{here}.key", key, is_qualified_name(key))
        errs = is_valid_label_value(value)
        if errs:
            causes.append(invalid_value(f"{here}.value", value, ";".join(errs)))
        causes += _validate_taint_effect(effect, f"{here}.effect", allow_empty=False)
        if (key, effect) in seen:
            causes.append(duplicate(here, _go_taint(taint), "taints must be unique by key and effect pair"))
        seen.add((key, effect))
    return causes


def validate_config_map(cm: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    data, binary = _map(cm.get("data")), _map(cm.get("binaryData"))
    total = 0
    for key, value in sorted(data.items()):
        causes += _each(f"data[{key}]", key, is_config_map_key(key))
        if key in binary:
            causes.append(invalid_value(f"data[{key}]", key, "duplicate of key present in binaryData"))
        total += len(_str(value))
    for key, value in sorted(binary.items()):
        causes += _each(f"binaryData[{key}]", key, is_config_map_key(key))
        total += len(_str(value)) * 3 // 4  # base64 on the wire, bytes in the store
    if total > MAX_CONFIG_MAP_SIZE:
        causes.append(too_long("", MAX_CONFIG_MAP_SIZE))
    return causes


def validate_core_event(event: Mapping[str, Any]) -> list[Cause]:
    """legacyValidateEvent for a core/v1 write (no eventTime: old-style event)."""
    involved = event.get("involvedObject")
    if not isinstance(involved, Mapping):
        return [required("involvedObject")]  # the client's CoreV1Event model can't read an event without it
    namespace = _str(_map(event.get("metadata")).get("namespace"))
    involved_namespace = _str(involved.get("namespace"))
    mismatch = invalid_value("involvedObject.namespace", involved_namespace, "does not match event.namespace")
    if event.get("eventTime"):
        # new-style: cluster-scoped subjects may only be reported from default or kube-system
        causes = [mismatch] if not involved_namespace and namespace not in ("default", "kube-system") else []
        return causes + _new_style_event_fields(
            event, reporting_controller_key="reportingComponent", field="source"
        )
    if involved_namespace:
        return [mismatch] if namespace != involved_namespace else []
    return [mismatch] if namespace not in ("", "default") else []


def _new_style_event_fields(
    event: Mapping[str, Any], *, reporting_controller_key: str, field: str
) -> list[Cause]:
    causes: list[Cause] = []
    controller = _str(event.get(reporting_controller_key))
    if not controller:
        causes.append(required(field))
    causes += _each(field, controller, is_qualified_name(controller))
    if not _str(event.get("reportingInstance")):
        causes.append(required("reportingInstance"))
    if not _str(event.get("action")):
        causes.append(required("action"))
    if not _str(event.get("reason")):
        causes.append(required("reason"))
    return causes


def validate_events_v1_event(event: Mapping[str, Any]) -> list[Cause]:
    """ValidateEventCreate for events.k8s.io/v1: strict, and worded with the internal field names."""
    causes = validate_object_meta(event.get("metadata"), namespaced=True, name_check=is_dns1123_subdomain)
    if not event.get("eventTime"):
        causes.append(required("eventTime"))
    if event.get("type") not in EVENT_TYPES:
        causes.append(invalid_value("type", "", f"has invalid value: {_str(event.get('type'))}"))
    causes += _new_style_event_fields(
        event, reporting_controller_key="reportingController", field="reportingController"
    )
    note = _str(event.get("note"))
    if len(note) > 1024:
        causes.append(invalid_value("note", "", "can have at most 1024 characters"))
    return causes


def validate_lease_spec(spec: Any, path: str = "spec") -> list[Cause]:
    spec = _map(spec)
    causes: list[Cause] = []
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        causes.append(invalid_value(f"{path}.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if isinstance(transitions, int) and transitions < 0:
        causes.append(
            invalid_value(f"{path}.leaseTransitions", transitions, "must be greater than or equal to 0")
        )
    return causes


# -- dispatch --------------------------------------------------------------------------------------


def _is_events_v1(resource_plural: str, obj: Mapping[str, Any]) -> bool:
    return resource_plural == "events.events.k8s.io" or _str(obj.get("apiVersion")).startswith(
        "events.k8s.io/"
    )


def validate(
    resource_plural: str, obj: Mapping[str, Any], *, old: Mapping[str, Any] | None = None
) -> list[Cause]:
    """Causes for a create (or an update when `old` is given). Events: `events` is core/v1 unless the body's
    apiVersion (or `events.events.k8s.io`) says events.k8s.io/v1."""
    meta = obj.get("metadata")
    causes: list[Cause]
    if resource_plural == "pods":
        causes = validate_object_meta(meta, namespaced=True, name_check=is_dns1123_subdomain)
        causes += validate_pod_spec(obj.get("spec"))
        if old is not None:
            causes += validate_pod_update(obj, old)
        else:
            causes += gates.create_causes(_map(obj.get("spec")))
    elif resource_plural == "nodes":
        causes = validate_object_meta(meta, namespaced=False, name_check=is_dns1123_subdomain)
        causes += validate_taints(_map(obj.get("spec")).get("taints"), "spec.taints")
    elif resource_plural == "namespaces":
        causes = validate_object_meta(meta, namespaced=False, name_check=is_dns1123_label)
    elif resource_plural == "configmaps":
        causes = validate_object_meta(meta, namespaced=True, name_check=is_dns1123_subdomain)
        causes += validate_config_map(obj)
    elif resource_plural in ("events", "events.events.k8s.io"):
        if _is_events_v1(resource_plural, obj):
            causes = validate_events_v1_event(obj) if old is None else []
        else:
            causes = validate_object_meta(meta, namespaced=True, name_check=is_dns1123_subdomain)
            causes += validate_core_event(obj)
    elif resource_plural == "poddisruptionbudgets":
        causes = validate_object_meta(meta, namespaced=True, name_check=is_dns1123_subdomain)
    elif resource_plural in ("leases", "leases.coordination.k8s.io"):
        causes = validate_object_meta(meta, namespaced=True, name_check=is_dns1123_subdomain)
        causes += validate_lease_spec(obj.get("spec"))
    else:
        raise ValueError(f"no validation for resource {resource_plural!r}")
    if old is not None:
        causes += validate_object_meta_update(meta, old.get("metadata"))
    return causes
