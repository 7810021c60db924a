"""HTTP mode's edge: which framing is refused before a body is read; the signature over raw bytes."""

from __future__ import annotations

import pytest

from bot.adapters import slack_http
from sim.slack.http_mode import signature

LIMIT = 1024


@pytest.mark.parametrize(
    ("environ", "found"),
    [
        ({"CONTENT_LENGTH": "0"}, 0),
        ({"CONTENT_LENGTH": "1024"}, 1024),
        ({"CONTENT_LENGTH": "1025"}, 413),
        ({"CONTENT_LENGTH": "9" * 5000}, 413),  # past the 4,300 digits int() takes
        ({}, 411),
        ({"CONTENT_LENGTH": ""}, 411),
        ({"HTTP_TRANSFER_ENCODING": "chunked"}, 411),
        ({"HTTP_TRANSFER_ENCODING": "chunked", "CONTENT_LENGTH": "10"}, 411),
        ({"CONTENT_LENGTH": "-1"}, 400),
        ({"CONTENT_LENGTH": "1e3"}, 400),
        ({"CONTENT_LENGTH": " 10"}, 400),
        ({"CONTENT_LENGTH": "10,10"}, 400),
        ({"CONTENT_LENGTH": "\u0661\u0660"}, 400),  # Arabic-Indic digits, which int() would take
    ],
)
def test_framing(environ: dict[str, str], found: int) -> None:
    checked = slack_http.check_framing(environ, max_body_bytes=LIMIT)
    assert (checked.status.value if isinstance(checked, slack_http.Refusal) else checked) == found


def test_a_signature_is_checked_over_the_bytes_as_they_came() -> None:
    body, now = b"text=\xff\xfe", 1_700_000_000
    signed = signature("secret", str(now), body)
    assert slack_http.is_signed("secret", body, str(now), signed, now=now + 299)
    assert not slack_http.is_signed("secret", body, str(now), signed, now=now + 301)  # Slack's five minutes
    assert not slack_http.is_signed("other", body, str(now), signed, now=now)
    assert not slack_http.is_signed("secret", body + b"x", str(now), signed, now=now)
    assert not slack_http.is_signed("secret", body, str(now), signed.upper(), now=now)
    assert not slack_http.is_signed("secret", body, str(now), "v0=\u00e9", now=now)
    assert not slack_http.is_signed("secret", body, None, signed, now=now)
