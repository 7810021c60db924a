"""What one run cost: the GPU time it held and its share of the node's price, as a pure function."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.core import lifecycle, notices, usage


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
    start = progress.held_since
    if start is None or gpus <= 0 or ended <= start:
        return None
    held = (ended - start).total_seconds()
    spent = usage.held_cost(gpus, node_gpus, price_per_node_hour, held)
    return RunCost(spent.gpu_hours, spent.dollars if price_per_node_hour else None, held)


def cost_text(cost: RunCost) -> str:
    held = notices.format_elapsed(cost.held_seconds)
    money = f", ≈ {notices.format_cost(cost.dollars)}" if cost.dollars is not None else ""
    return f"This run held its GPU for {held}: {cost.gpu_hours:.2f} GPU-hours{money}."
