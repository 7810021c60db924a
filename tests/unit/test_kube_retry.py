"""The one retry layer's budget with the default settings: quick failures are retried, a hung API is not."""

from __future__ import annotations

from bot.adapters import kube_retry
from bot.core import errors


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_with_the_defaults_a_quick_5xx_is_retried_until_it_goes_through() -> None:
    clock, tries = Clock(), []

    def attempt(retried: bool) -> str:
        tries.append(retried)
        clock.now += 0.05  # a quick 503
        if len(tries) < 3:
            raise errors.Unavailable("the Kubernetes API is unavailable")
        return "done"

    settings = kube_retry.RequestSettings()
    assert kube_retry.call(settings, "reading", attempt, sleep=clock.sleep, clock=clock) == "done"
    assert tries == [False, True, True]


def test_with_the_defaults_a_try_that_waited_out_its_read_timeout_is_not_repeated() -> None:
    clock, tries = Clock(), []
    settings = kube_retry.RequestSettings()

    def attempt(retried: bool) -> str:
        tries.append(retried)
        clock.now += settings.read_timeout_seconds  # a hung API server
        raise errors.Unavailable("the Kubernetes API did not answer in time")

    try:
        kube_retry.call(settings, "reading", attempt, sleep=clock.sleep, clock=clock)
    except errors.Unavailable:
        pass
    else:
        raise AssertionError("a hung API server must fail the call")
    assert len(tries) == 1 and clock.now <= settings.deadline_seconds
