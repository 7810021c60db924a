"""What a finished run cost: GPU time held from scheduling to its end, and its share of the node price."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.core import costs, lifecycle

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SCHEDULED = lifecycle.Progress(
    created=T0, reached=((lifecycle.Step.WAITING, T0), (lifecycle.Step.SCHEDULED, T0 + timedelta(minutes=6)))
)


def test_a_run_pays_its_gpus_share_of_the_node_for_the_time_it_held_them() -> None:
    ended = T0 + timedelta(minutes=96)  # 1h30m after it was scheduled
    whole = costs.run_cost(SCHEDULED, ended=ended, gpus=1, node_gpus=1, price_per_node_hour=0.54)
    assert whole == costs.RunCost(1.5, 0.54 * 1.5, held_seconds=5400)
    half = costs.run_cost(SCHEDULED, ended=ended, gpus=2, node_gpus=4, price_per_node_hour=4.0)
    assert half is not None and half.gpu_hours == 3.0 and half.dollars == 3.0
    assert costs.cost_text(whole) == "This run held its GPU for 1h30m: 1.50 GPU-hours, ≈ $0.81."


def test_no_cost_without_a_gpu_held_and_no_money_without_a_price() -> None:
    waiting = lifecycle.Progress(created=T0, reached=((lifecycle.Step.WAITING, T0),))
    assert (
        costs.run_cost(waiting, ended=T0 + timedelta(hours=1), gpus=1, node_gpus=1, price_per_node_hour=1)
        is None
    )
    free = costs.run_cost(
        SCHEDULED, ended=T0 + timedelta(hours=1), gpus=1, node_gpus=1, price_per_node_hour=None
    )
    assert free is not None and free.dollars is None and "≈" not in costs.cost_text(free)
