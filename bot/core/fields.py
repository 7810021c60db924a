"""Core: reading a field of an API object or a Slack payload without trusting its shape.

The API server, the Cluster Autoscaler's ConfigMap and Slack all hand over plain JSON; a missing or odd
field reads as empty (never raises), because one strange object must not stop a watch or a handler.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bot.core import podspec

Body = Mapping[str, Any]


def as_map(value: Any) -> Body:
    return value if isinstance(value, Mapping) else {}


def as_maps(value: Any) -> list[Body]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def as_texts(value: Any) -> dict[str, str]:
    """A string map (labels, annotations); a value that is not a string reads as ""."""
    return {str(k): as_text(v) for k, v in as_map(value).items()}


def as_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp with its offset; None when missing or malformed."""
    return podspec.parse_time(value) if isinstance(value, str) and value else None
