"""The retry backoff every loop in the bot shares."""

import pytest

from bot.core import backoff


def test_it_doubles_from_the_first_delay_up_to_the_cap() -> None:
    assert [backoff.exponential(0.5, 5.0, n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_a_loop_failing_for_hours_stays_at_the_cap() -> None:
    """CI once saw an informer, left retrying a stopped server, die of OverflowError at about 1,024 tries."""
    assert backoff.exponential(0.01, 30.0, 100_000) == 30.0


def test_no_failures_yet_waits_the_first_delay() -> None:
    assert backoff.exponential(0.25, 10.0, 0) == 0.25


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after": "30"}, 30.0),  # HTTP/2 (Slack) sends header names in lower case
        ({"Retry-After": ["2"]}, 2.0),  # a client that keeps every value of a header
        ({"Retry-After": "-3"}, 0.0),
        ({}, None),  # not said: the caller's own default applies (the outbox's, the back-off)
        (None, None),
        ({"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}, None),
        ({"Retry-After": []}, None),
    ],
)
def test_retry_after_reads_the_header_or_says_nothing(
    headers: dict[str, object] | None, seconds: float | None
) -> None:
    assert backoff.retry_after(headers) == seconds
