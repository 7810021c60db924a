"""Kubernetes' own naming rules, written out again here so a pod gpubot builds is judged independently.

Copied from apimachinery/pkg/util/validation (IsDNS1123Label, IsQualifiedName, IsValidLabelValue) and
pkg/apis/core/validation (ValidateAnnotations' 256 KiB total, a container image without surrounding
whitespace), with Go's anchoring: `fullmatch`, never `$`, which in Python also matches before a final
newline. Neither the product's `labels` module nor the sim's validation is reused, so a shared mistake
cannot hide. One rule is the container runtime's, not the API's: execve cannot take an argument holding
a NUL byte, so such a pod is accepted and then never starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63
TOTAL_ANNOTATION_SIZE = 256 * 1024

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh", "busybox", "/bin/sh", "/bin/bash", "/bin/ash"})


def dns1123_label(value: str) -> list[str]:
    errors = [f"longer than {DNS1123_LABEL_MAX}"] if len(value) > DNS1123_LABEL_MAX else []
    if not _DNS1123_LABEL.fullmatch(value):
        errors.append("not a lowercase RFC 1123 label")
    return errors


def dns1123_subdomain(value: str) -> list[str]:
    errors = [f"longer than {DNS1123_SUBDOMAIN_MAX}"] if len(value) > DNS1123_SUBDOMAIN_MAX else []
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errors.append("not a lowercase RFC 1123 subdomain")
    return errors


def qualified_name(key: str) -> list[str]:
    """A label or annotation key: `[prefix/]name`, the prefix a DNS subdomain."""
    parts = key.split("/")
    if len(parts) > 2:
        return ["more than one `/`"]
    errors = []
    if len(parts) == 2:
        errors += [f"prefix: {e}" for e in dns1123_subdomain(parts[0])] if parts[0] else ["empty prefix"]
    name = parts[-1]
    if len(name) > QUALIFIED_NAME_MAX:
        errors.append(f"name part longer than {QUALIFIED_NAME_MAX}")
    if not _QUALIFIED_NAME.fullmatch(name):
        errors.append("name part is not alphanumerics with `-_.` inside")
    return errors


def label_value(value: str) -> list[str]:
    errors = [f"longer than {LABEL_VALUE_MAX}"] if len(value) > LABEL_VALUE_MAX else []
    if not _LABEL_VALUE.fullmatch(value):
        errors.append("not empty or alphanumerics with `-_.` inside")
    return errors


def labels_problems(found: Mapping[str, Any], where: str) -> list[str]:
    problems = []
    for key, value in found.items():
        problems += [f"{where} key {key!r}: {e}" for e in qualified_name(key)]
        if not isinstance(value, str):
            problems.append(f"{where} {key!r} is not a string")
            continue
        problems += [f"{where} {key!r}={value!r}: {e}" for e in label_value(value)]
    return problems


def annotations_problems(found: Mapping[str, Any]) -> list[str]:
    problems, total = [], 0
    for key, value in found.items():
        problems += [f"annotation key {key!r}: {e}" for e in qualified_name(key.lower())]
        if not isinstance(value, str):
            problems.append(f"annotation {key!r} is not a string")
            continue
        total += len(key.encode("utf-8", "surrogatepass")) + len(value.encode("utf-8", "surrogatepass"))
    if total > TOTAL_ANNOTATION_SIZE:
        problems.append(f"annotations total {total} bytes, over {TOTAL_ANNOTATION_SIZE}")
    return problems


def container_problems(container: Mapping[str, Any]) -> list[str]:
    problems = [f"container name: {e}" for e in dns1123_label(str(container.get("name", "")))]
    image = container.get("image")
    if not isinstance(image, str) or not image or image.strip() != image:
        problems.append(f"image {image!r} is empty or has surrounding whitespace")
    for field in ("command", "args"):
        argv = container.get(field, [])
        if not isinstance(argv, list) or not all(isinstance(word, str) for word in argv):
            problems.append(f"{field} is not a list of strings")
        elif any("\x00" in word for word in argv):
            problems.append(f"{field} holds a NUL byte, which no exec can pass")
    return problems


def pod_problems(pod: Mapping[str, Any]) -> list[str]:
    """Everything the API server (or the runtime) would refuse in `pod`'s names, labels and container."""
    metadata = pod.get("metadata") or {}
    problems = [f"name: {e}" for e in dns1123_label(str(metadata.get("name", "")))]
    problems += [f"namespace: {e}" for e in dns1123_label(str(metadata.get("namespace", "")))]
    problems += labels_problems(metadata.get("labels") or {}, "label")
    problems += annotations_problems(metadata.get("annotations") or {})
    spec = pod.get("spec") or {}
    problems += labels_problems(spec.get("nodeSelector") or {}, "nodeSelector")
    for container in spec.get("containers") or []:
        problems += container_problems(container)
    return problems


def shell_wrapped(container: Mapping[str, Any]) -> bool:
    """True when the container runs a shell with `-c`: the one way user text would become a script."""
    argv = [*container.get("command", []), *container.get("args", [])]
    return any(word in SHELLS or word.endswith("/sh") for word in argv[:1]) and "-c" in argv[1:3]
