"""The retry backoff every loop in the bot shares."""

from bot.core import backoff


def test_it_doubles_from_the_first_delay_up_to_the_cap() -> None:
    assert [backoff.exponential(0.5, 5.0, n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_a_loop_failing_for_hours_stays_at_the_cap() -> None:
    """CI once saw an informer, left retrying a stopped server, die of OverflowError at about 1,024 tries."""
    assert backoff.exponential(0.01, 30.0, 100_000) == 30.0


def test_no_failures_yet_waits_the_first_delay() -> None:
    assert backoff.exponential(0.25, 10.0, 0) == 0.25
