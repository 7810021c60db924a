"""Adapters: the edge of HTTP mode, in front of Bolt's WSGI handler.

Bolt's signature check (slack_sdk's `SignatureVerifier.is_valid`) calls `int()` on the
X-Slack-Request-Timestamp header, so an empty or non-numeric one raises inside Bolt's middleware: a 500
and a logged traceback for any request, no secret needed. Slack always sends whole seconds, so such a
request is refused here with the very answer Bolt gives a bad signature.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

logger = logging.getLogger(__name__)

TIMESTAMP_HEADER = "HTTP_X_SLACK_REQUEST_TIMESTAMP"
_WHOLE_SECONDS = re.compile(r"[0-9]{1,15}")
REFUSAL = json.dumps({"error": "invalid request"}).encode()
"""Bolt's RequestVerification body for a request it does not trust."""


class TimestampGuard:
    """Refuse (401) a request whose timestamp is present but not whole seconds; pass the rest to `inner`."""

    def __init__(self, inner: WSGIApplication) -> None:
        self.inner = inner

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        timestamp = environ.get(TIMESTAMP_HEADER)
        if timestamp is None or _WHOLE_SECONDS.fullmatch(timestamp):
            return self.inner(environ, start_response)
        logger.info("refused a request with a malformed X-Slack-Request-Timestamp (%d chars)", len(timestamp))
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(REFUSAL)))]
        start_response("401 Unauthorized", headers)
        return [REFUSAL]
