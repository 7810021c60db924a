"""CPU and memory amounts as users type them, checked against the subset of Kubernetes quantities we accept.

Parsing to integers (millicores, bytes) lets bounds and quotas compare amounts; formatting back gives the
canonical strings the pod manifest carries, so what Kubernetes stores matches what the user asked for.
"""

from __future__ import annotations

import re
from decimal import Decimal

_CPU_CORES = re.compile(r"([0-9]{1,6})(?:\.([0-9]{1,3}))?|\.([0-9]{1,3})")
_CPU_MILLIS = re.compile(r"([0-9]{1,9})m")
_MEMORY = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,6})?)(Ki|Mi|Gi|Ti|Pi|K|M|G|T|P)?")

MEMORY_UNITS: dict[str, int] = {
    "": 1,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
    "K": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "P": 1000**5,
}
_BINARY_UNITS = ("Pi", "Ti", "Gi", "Mi", "Ki")


def count(value: object) -> int:
    """An extended-resource quantity (`"1"`, `2`, GPUs); anything fractional or odd counts as none."""
    try:
        return max(int(str(value)), 0)
    except ValueError:
        return 0


def parse_cpu(text: str) -> int | None:
    """`2`, `0.5`, `.5` or `500m` → millicores; None when it is not a CPU amount we accept."""
    millis = _CPU_MILLIS.fullmatch(text)
    if millis:
        return int(millis.group(1))
    cores = _CPU_CORES.fullmatch(text)
    if not cores:
        return None
    return int(Decimal(text) * 1000)


def parse_memory(text: str) -> int | None:
    """`8Gi`, `512Mi`, `16G`, `1.5Gi` → bytes (rounded down); None when it is not a memory amount."""
    match = _MEMORY.fullmatch(text)
    if not match:
        return None
    number, unit = match.group(1), match.group(2) or ""
    return int(Decimal(number) * MEMORY_UNITS[unit])


def format_cpu(millis: int) -> str:
    """Millicores → `2` when whole cores, else `1500m`."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_memory(size: int) -> str:
    """Bytes → the largest binary unit that divides exactly (`8Gi`), else plain bytes."""
    for unit in _BINARY_UNITS:
        if size and size % MEMORY_UNITS[unit] == 0:
            return f"{size // MEMORY_UNITS[unit]}{unit}"
    return str(size)
