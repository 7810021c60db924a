"""Core: the Cluster Autoscaler's status ConfigMap (kube-system/cluster-autoscaler-status), read once.

The autoscaler writes it in two formats: YAML (`clusterWide`, `nodeGroups`; CA 1.28 and later) and, in
older releases, plain text (`Cluster-wide:` then `Health: Healthy`). Only the cluster-wide health can be
relied on in the text; everything per node group comes from the YAML. `/gpu status`, the drain
explanation and doctor all read it here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import yaml

from bot.core import lifecycle
from bot.core.fields import as_map

_TEXT_HEALTH = re.compile(r"Cluster-wide:\s*\n\s*Health:\s*(\w+)")
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d+))? ([+-]\d{4})")


@dataclass(frozen=True)
class NodeGroup:
    name: str
    """The autoscaler's id: a GKE MIG URL, an AWS ASG name."""
    health: str = ""
    min_size: int | None = None
    max_size: int | None = None
    scale_down: str = ""
    """`NoCandidates` or `CandidatesPresent`; empty when the status does not say."""
    candidates: int | None = None

    @property
    def pool(self) -> str:
        return lifecycle.pool_name(self.name)


@dataclass(frozen=True)
class Status:
    health: str = ""
    """Cluster-wide: `Healthy`, `Unhealthy`, or empty when the status does not say."""
    autoscaler: str = ""
    """`Running` or `Initializing` (YAML format only)."""
    time: str = ""
    structured: bool = False
    """The YAML format, which lists every node group it scales (the plain text one does not, usably)."""
    groups: tuple[NodeGroup, ...] = ()

    def group(self, pool: str) -> NodeGroup | None:
        return next((g for g in self.groups if g.pool == pool), None)

    def sizes(self) -> dict[str, tuple[int, int]]:
        """Node group id → (min, max), where the status gives both."""
        return {
            g.name: (g.min_size, g.max_size)
            for g in self.groups
            if g.min_size is not None and g.max_size is not None
        }

    def pool_sizes(self) -> dict[str, tuple[int, int]]:
        """Pool → (min, max), where the status gives both."""
        return {lifecycle.pool_name(name): sizes for name, sizes in self.sizes().items()}


def parse(text: str | None) -> Status:
    """Either format; an absent, unreadable or foreign text is a status that says nothing."""
    try:
        document: Any = yaml.safe_load(text or "")
    except yaml.YAMLError:
        document = None
    if not isinstance(document, Mapping) or not ({"clusterWide", "nodeGroups"} & set(document)):
        found = _TEXT_HEALTH.search(text or "")
        return Status(health=found.group(1) if found else "", time=(text or "")[:80])
    cluster_wide = as_map(document.get("clusterWide"))
    groups = document.get("nodeGroups")
    return Status(
        health=_status_of(cluster_wide.get("health")),
        autoscaler=str(document.get("autoscalerStatus") or ""),
        time=str(document.get("time") or ""),
        structured=True,
        groups=tuple(
            _group(g)
            for g in (groups if isinstance(groups, list) else [])
            if isinstance(g, Mapping) and isinstance(g.get("name"), str)
        ),
    )


def parse_last_updated(text: str) -> datetime | None:
    """Go's `2006-01-02 15:04:05.999999999 -0700 MST`, the autoscaler's layout for its status times."""
    found = _STAMP.search(text or "")
    if found is None:
        return None
    day, clock, fraction, offset = found.groups()
    micros = (fraction or "0")[:6].ljust(6, "0")
    try:
        return datetime.strptime(f"{day} {clock}.{micros} {offset}", "%Y-%m-%d %H:%M:%S.%f %z")
    except ValueError:
        return None


def _group(raw: Mapping[str, Any]) -> NodeGroup:
    health, scale_down = as_map(raw.get("health")), as_map(raw.get("scaleDown"))
    return NodeGroup(
        name=str(raw["name"]),
        health=_status_of(health),
        min_size=_int(health.get("minSize")),
        max_size=_int(health.get("maxSize")),
        scale_down=_status_of(scale_down),
        candidates=_int(scale_down.get("candidates")),
    )


def _status_of(section: Any) -> str:
    return str(section.get("status") or "") if isinstance(section, Mapping) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
