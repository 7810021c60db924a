"""GPU profiles: the built-in catalogue, and the operator's profiles file read and checked in full.

Every problem is collected and reported together at start-up, naming the YAML path, as `bot.settings` does
for the environment; `read_profile_catalog` finds the file those settings name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bot.core import commands, images, labels, manifests, models, notebooks, podsecurity, quantities, taints
from bot.settings import Settings, SettingsError, ToolSettings

BUILTIN_PROFILES_YAML = """\
default: t4
profiles:
  t4: &t4
    description: NVIDIA T4 (16 GB) on n1-standard-4, the seed's gpu-pool
    accelerator: nvidia-tesla-t4
    resource: nvidia.com/gpu
    maxCount: 1
    tolerations:
      - {key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}
    nodeSelector:
      app-type: gpu-workloads
    defaults: {cpu: "2", memory: 8Gi}
    pricePerHour: 0.54
  notebook:
    <<: *t4  # the same pool and node; its own image, port and activity
    description: JupyterLab with PyTorch on a T4 of the gpu-pool; its thread shows how to open it
    image: quay.io/jupyter/pytorch-notebook:cuda12-python-3.11
    ports: [8888]
    activity: jupyter
"""
"""The built-in catalogue when no profiles file is configured; deploy/profiles.yaml starts from it."""

PROFILE_FIELDS = frozenset(
    {
        "description",
        "accelerator",
        "resource",
        "maxCount",
        "tolerations",
        "nodeSelector",
        "defaults",
        "pricePerHour",
        "security",
        "image",
        "ports",
        "activity",
        "queue",
    }
)
FIELD_HINTS = {
    "important": "key",  # the seed manifest's mistake, which Kubernetes silently drops
    "maxGpus": "maxCount",
    "gpus": "maxCount",
    "price": "pricePerHour",
    "selector": "nodeSelector",
    "node_selector": "nodeSelector",
}


@dataclass(frozen=True)
class ProfileCatalog:
    default: str
    profiles: Mapping[str, models.GpuProfile]


class _Problems(list[str]):
    def add(self, path: str, problem: str) -> None:
        self.append(f"{path}: {problem}")


def _unknown_fields(
    entry: Mapping[str, Any], allowed: frozenset[str], path: str, problems: _Problems
) -> None:
    problems.extend(manifests.unknown_fields(entry, allowed, path, FIELD_HINTS))


def _read_toleration(entry: Any, path: str, problems: _Problems) -> models.Toleration | None:
    """The API server's rules (taints.toleration_problems), and a YAML-typed tolerationSeconds."""
    if not isinstance(entry, dict):
        problems.add(path, "must be a mapping with key, operator, value, effect")
        return None
    _unknown_fields(entry, taints.TOLERATION_FIELDS, path, problems)
    problems.extend(taints.toleration_problems(entry, path))
    seconds = entry.get("tolerationSeconds")
    if seconds is not None and (not isinstance(seconds, int) or isinstance(seconds, bool)):
        problems.add(f"{path}.tolerationSeconds", "must be a whole number of seconds")
        seconds = None
    toleration = taints.read_toleration(entry)
    return dataclasses.replace(toleration, toleration_seconds=seconds)


def _read_node_selector(raw: Any, path: str, problems: _Problems) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        problems.add(path, "must be a mapping of node label to value")
        return ()
    pairs: list[tuple[str, str]] = []
    for key, value in raw.items():
        if not isinstance(key, str) or not labels.is_qualified_name(key):
            problems.add(path, f"{key!r} is not a valid label key")
        elif not isinstance(value, str) or not labels.is_label_value(value):
            problems.add(
                f"{path}.{key}", f"{value!r} is not a valid label value (quote numbers and booleans)"
            )
        else:
            pairs.append((key, value))
    return tuple(pairs)


def _read_defaults(raw: Any, path: str, problems: _Problems) -> tuple[int, int]:
    fallback = models.GpuProfile(name="x")
    if raw is None:
        return fallback.default_cpu_millis, fallback.default_memory_bytes
    if not isinstance(raw, dict):
        problems.add(path, "must be a mapping with cpu and memory")
        return fallback.default_cpu_millis, fallback.default_memory_bytes
    _unknown_fields(raw, frozenset({"cpu", "memory"}), path, problems)
    cpu = quantities.parse_cpu(str(raw.get("cpu", "2")))
    memory = quantities.parse_memory(str(raw.get("memory", "8Gi")))
    if not cpu:
        problems.add(f"{path}.cpu", f"{raw.get('cpu')!r} is not a CPU amount like 2 or 500m")
    if not memory:
        problems.add(f"{path}.memory", f"{raw.get('memory')!r} is not a memory amount like 8Gi")
    return cpu or fallback.default_cpu_millis, memory or fallback.default_memory_bytes


def _read_count(raw: Any, path: str, problems: _Problems) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool) and 1 <= raw <= commands.MAX_GPUS_PER_POD:
        return raw
    problems.add(path, f"must be a whole number from 1 to {commands.MAX_GPUS_PER_POD}, not {raw!r}")
    return 1


def _read_price(raw: Any, path: str, problems: _Problems) -> float:
    if isinstance(raw, int | float) and not isinstance(raw, bool) and 0 <= raw < 1000:
        return float(raw)
    problems.add(path, f"must be US dollars per hour (a number from 0), not {raw!r}")
    return 0.0


def _read_profile(name: Any, entry: Any, problems: _Problems) -> models.GpuProfile | None:
    path = f"profiles.{name}"
    if not isinstance(name, str) or not labels.is_dns1123_label(name):
        problems.add(
            path, "profile names are lowercase letters, digits and '-' (they are typed after --type)"
        )
        return None
    if not isinstance(entry, dict):
        problems.add(path, "must be a mapping")
        return None
    _unknown_fields(entry, PROFILE_FIELDS, path, problems)
    resource = str(entry.get("resource", labels.GPU_RESOURCE))
    if "/" not in resource or not labels.is_qualified_name(resource):
        problems.add(f"{path}.resource", f"{resource!r} is not an extended resource name like nvidia.com/gpu")
    raw_tolerations = entry.get("tolerations") or []
    if not isinstance(raw_tolerations, list):
        problems.add(f"{path}.tolerations", "must be a list")
        raw_tolerations = []
    tolerations = [
        _read_toleration(t, f"{path}.tolerations[{i}]", problems) for i, t in enumerate(raw_tolerations)
    ]
    cpu, memory = _read_defaults(entry.get("defaults"), f"{path}.defaults", problems)
    return models.GpuProfile(
        name=name,
        resource_name=resource,
        max_count=_read_count(entry.get("maxCount", 1), f"{path}.maxCount", problems),
        tolerations=tuple(t for t in tolerations if t is not None),
        node_selector=_read_node_selector(entry.get("nodeSelector"), f"{path}.nodeSelector", problems),
        default_cpu_millis=cpu,
        default_memory_bytes=memory,
        price_per_hour=_read_price(entry.get("pricePerHour", 0.0), f"{path}.pricePerHour", problems),
        accelerator=str(entry.get("accelerator", "")),
        description=str(entry.get("description", "")),
        security=_read_profile_security(entry.get("security"), f"{path}.security", problems),
        image=_read_image(entry.get("image"), f"{path}.image", problems),
        ports=_read_ports(entry.get("ports"), f"{path}.ports", problems),
        activity=_read_activity(entry.get("activity"), f"{path}.activity", problems),
        queue=_read_queue(entry.get("queue"), f"{path}.queue", problems),
    )


def _read_activity(raw: Any, path: str, problems: _Problems) -> str:
    """Where else than its GPU a run shows activity: `jupyter` reads its Jupyter Server's kernels."""
    if raw is None:
        return ""
    if raw not in notebooks.ACTIVITIES:
        problems.add(path, f"must be one of {', '.join(sorted(notebooks.ACTIVITIES))}, not {raw!r}")
        return ""
    return str(raw)


def _read_queue(raw: Any, path: str, problems: _Problems) -> str:
    """A LocalQueue's name, as Kueue's `LocalQueueName` pattern has it (a DNS-1123 subdomain;
    kubernetes-sigs/kueue v0.19.2 apis/kueue/v1beta2/localqueue_types.go), and short enough for the pod
    label that carries it (63 characters)."""
    if raw is None:
        return ""
    if (
        not isinstance(raw, str)
        or len(raw) > labels.LABEL_VALUE_MAX
        or not all(labels.is_dns1123_label(part) for part in raw.split("."))
    ):
        problems.add(path, f"{raw!r} is not a LocalQueue name (lowercase letters, digits, '-' and '.')")
        return ""
    return raw


def _read_image(raw: Any, path: str, problems: _Problems) -> str:
    if raw is None:
        return ""
    parsed = images.parse_image(str(raw))
    if isinstance(parsed, models.UsageError):
        problems.add(path, parsed.problem)
        return ""
    return parsed.familiar


def _read_ports(raw: Any, path: str, problems: _Problems) -> tuple[int, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in raw):
        problems.add(path, "must be a list of port numbers, like [8888]")
        return ()
    if not all(1 <= port <= 65535 for port in raw) or len(set(raw)) != len(raw):
        problems.add(path, f"ports are distinct numbers from 1 to 65535, not {raw!r}")
        return ()
    if len(raw) > commands.MAX_PORTS:
        problems.add(path, f"at most {commands.MAX_PORTS} ports, not {len(raw)}")
        return ()
    return tuple(raw)


def _read_profile_security(raw: Any, path: str, problems: _Problems) -> models.ProfileSecurity:
    security, found = podsecurity.read_profile_security(raw, path)
    for where, problem in found:
        problems.add(where, problem)
    return security


def _load_document(yaml_text: str) -> dict[str, Any]:
    try:
        document = yaml.safe_load(yaml_text)
    except yaml.YAMLError as error:
        raise SettingsError(f"profiles file is not valid YAML: {error}") from error
    if (
        not isinstance(document, dict)
        or not isinstance(document.get("profiles"), dict)
        or not document["profiles"]
    ):
        raise SettingsError("profiles file must have a non-empty `profiles:` mapping")
    return document


def load_profile_catalog(yaml_text: str, *, default_override: str = "") -> ProfileCatalog:
    """Parse and validate a profiles file; raise SettingsError listing every problem."""
    document = _load_document(yaml_text)
    problems = _Problems()
    _unknown_fields(document, frozenset({"default", "profiles"}), "(top level)", problems)
    loaded = {name: _read_profile(name, entry, problems) for name, entry in document["profiles"].items()}
    profiles = {str(name): profile for name, profile in loaded.items() if profile is not None}
    default = default_override or str(document.get("default") or next(iter(document["profiles"])))
    if default not in profiles and not problems:
        problems.append(f"default: {default!r} is not one of the profiles ({', '.join(profiles)})")
    if problems:
        message = "invalid GPU profiles:\n  " + "\n  ".join(problems)
        raise SettingsError(message, ["invalid GPU profiles: " + "; ".join(problems)])
    return ProfileCatalog(default=default, profiles=profiles)


def read_profile_catalog(settings: Settings | ToolSettings) -> ProfileCatalog:
    """The configured catalogue: the profiles file if one is set, else the built-in `t4`."""
    path = settings.profiles.profiles_file
    try:
        text = Path(path).read_text(encoding="utf-8") if path else BUILTIN_PROFILES_YAML
    except OSError as error:
        raise SettingsError(f"GPUBOT_PROFILES_FILE={path!r}: {error.strerror}") from error
    return load_profile_catalog(text, default_override=settings.profiles.default_profile)
