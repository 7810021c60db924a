"""How many examples the fuzz tests run: a few thousand in `make test`, any number under `make fuzz`.

`GPUBOT_FUZZ_EXAMPLES=N` is the total across the fuzz tests, shared out by weight. Every run is
derandomized (the same inputs each time) and keeps no example database, so a failure reproduces from
the command line alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, settings

Test = TypeVar("Test", bound=Callable[..., None])

FAST_TOTAL = 4000
"""Inputs per `make test` run, across every fuzz test."""


def examples(weight: float) -> int:
    total = int(os.environ.get("GPUBOT_FUZZ_EXAMPLES") or FAST_TOTAL)
    return max(1, round(total * weight))


def fuzz_settings(weight: float) -> settings:
    return settings(
        max_examples=examples(weight),
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


def fuzz(weight: float) -> Callable[[Test], Test]:
    """A hypothesis test's settings for `weight` of the examples, and the `fuzz` mark `make fuzz` selects."""

    def apply(test: Test) -> Test:
        marked: Test = pytest.mark.fuzz(fuzz_settings(weight)(test))
        return marked

    return apply
