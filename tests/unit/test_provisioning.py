"""The ETA and the "far longer than usual" threshold from past scale-ups, as plain functions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core import lifecycle, notices, provisioning

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
Step = lifecycle.Step


def progress(*steps: tuple[Step, float], outcome: lifecycle.Outcome | None = None) -> lifecycle.Progress:
    reached = tuple((step, T0 + timedelta(seconds=at)) for step, at in steps)
    return lifecycle.Progress(created=T0, reached=reached, pool="gpu-pool", outcome=outcome)


SCALING = progress((Step.WAITING, 0), (Step.SCALE_UP, 10))


def test_usual_is_the_median_of_what_was_kept() -> None:
    assert provisioning.usual([]) is None
    assert provisioning.usual([300, 100, 120]) == provisioning.Usual(timedelta(seconds=120), 3)


@pytest.mark.parametrize(
    ("samples", "limit"),
    [
        ([], timedelta(minutes=15)),
        ([40], timedelta(seconds=340)),  # the margin wins over twice a short norm
        ([600], timedelta(minutes=20)),  # twice the norm wins over a long one plus the margin
    ],
)
def test_overdue_after_needs_both_twice_the_norm_and_a_margin(samples: list[float], limit: timedelta) -> None:
    assert provisioning.overdue_after(provisioning.usual(samples)) == limit


def test_the_eta_is_an_absolute_time_while_the_node_comes() -> None:
    note = provisioning.eta_note(SCALING, provisioning.usual([120, 100, 140]))
    assert notices.moments(note) == (
        "Node likely ready Sun 09:02 UTC: usually 2m00s after a scale-up here (the median of the last 3)."
    )
    assert "the last scale-up" in provisioning.eta_note(SCALING, provisioning.usual([60]))


@pytest.mark.parametrize(
    "state",
    [
        progress((Step.WAITING, 0)),  # no scale-up: nothing to estimate
        progress((Step.SCALE_UP, 10), (Step.GPU_READY, 90)),  # the node is here
        progress((Step.SCALE_UP, 10), outcome=lifecycle.Outcome.DELETED),
    ],
)
def test_no_eta_without_a_node_on_its_way(state: lifecycle.Progress) -> None:
    assert provisioning.eta_note(state, provisioning.usual([100])) == ""
    assert provisioning.eta_note(SCALING, None) == ""


def test_slow_only_past_the_threshold_and_only_before_the_node_is_ready() -> None:
    history = provisioning.usual([60, 60])
    limit = provisioning.overdue_after(history)
    started = T0 + timedelta(seconds=10)
    assert provisioning.slow(SCALING, history, started + limit - timedelta(seconds=1)) is None
    problem = provisioning.slow(SCALING, history, started + limit)
    assert problem is not None and problem.key == "provisioning-slow"
    assert "6m00s after the scale-up (usually 1m00s)" in problem.summary
    ready = progress((Step.SCALE_UP, 10), (Step.PROVISIONING, 20), (Step.NODE_READY, 30))
    assert provisioning.slow(ready, history, started + 2 * limit) is None


def test_without_history_the_autoscaler_limit_is_the_yardstick() -> None:
    problem = provisioning.slow(SCALING, None, T0 + timedelta(minutes=16))
    assert problem is not None and "the autoscaler gives up at 15m00s" in problem.summary


def test_measured_is_scale_up_to_gpu_allocatable() -> None:
    done = progress((Step.SCALE_UP, 10), (Step.PROVISIONING, 40), (Step.GPU_READY, 130))
    assert provisioning.measured(done) == timedelta(seconds=120)
    assert provisioning.measured(progress((Step.SCHEDULED, 5), (Step.GPU_READY, 1))) is None
