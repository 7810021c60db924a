"""What one run cost: the GPU time it held and its share of the node's price, as a pure function."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.core import lifecycle, notices

SPEND_SECONDS = 3 * 24 * 3600
"""A user's daily spend is kept a few days, long enough for any time zone's "today"."""


def spend_key(user: str, day: str) -> str:
    """The store key of one user's spend on one UTC day (`YYYY-MM-DD`)."""
    return f"spend:{user}:{day}"


@dataclass(frozen=True)
class RunCost:
    gpu_hours: float
    dollars: float | None
    """None when the profile has no price."""
    held_seconds: float


def run_cost(
    progress: lifecycle.Progress,
    *,
    ended: datetime,
    gpus: int,
    node_gpus: int,
    price_per_node_hour: float | None,
) -> RunCost | None:
    """From the moment it was scheduled onto its node until it ended; None if it never held a GPU.

    A node with several GPUs is shared, so a run pays its GPUs' share of the node-hour price.
    """
    start = progress.at(lifecycle.Step.SCHEDULED) or progress.at(lifecycle.Step.RUNNING)
    if start is None or gpus <= 0 or ended <= start:
        return None
    held = (ended - start).total_seconds()
    gpu_hours = gpus * held / 3600
    if not price_per_node_hour:
        return RunCost(gpu_hours, None, held)
    share = gpus / max(node_gpus, gpus, 1)
    return RunCost(gpu_hours, price_per_node_hour * share * held / 3600, held)


def cost_text(cost: RunCost) -> str:
    held = notices.format_elapsed(cost.held_seconds)
    money = f", ≈ {notices.format_cost(cost.dollars)}" if cost.dollars is not None else ""
    return f"This run held its GPU for {held}: {cost.gpu_hours:.2f} GPU-hours{money}."
