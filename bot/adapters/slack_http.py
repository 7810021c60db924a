"""Adapters: the edge of HTTP mode, in front of Bolt's WSGI handler.

Bolt's WSGI adapter reads a POST's whole body, as long as its Content-Length says, before anything is
checked: one unsigned 200 MB POST took the bot from 170 MB to 1.2 GB. Then it parses the body before it
checks the signature, and a body that is not the form or JSON it expects (or not UTF-8) raises: a 500
and a logged traceback. So a POST to Slack's path is checked here first, in this order:

1. framing, from the headers alone: no Content-Length or a Transfer-Encoding is 411, a Content-Length
   that is not one whole number 400, one over `max_body_bytes` 413, the body left unread;
2. the signature headers' form: slack_sdk's check calls `int()` on X-Slack-Request-Timestamp, and
   `hmac.compare_digest` on X-Slack-Signature, which raises for non-ASCII text, so either would raise
   inside Bolt's middleware. Slack always sends whole seconds and a hex digest, so anything else is
   refused with the very answer Bolt gives a bad signature (401);
3. the body, read to its length within the server's body deadline (408 when missed);
4. the payload: one Bolt cannot read is 401 unless it is signed (nothing unsigned learns more), then 400.

What passes goes on to Bolt unchanged, its body already in memory.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from slack_bolt.adapter.wsgi.http_request import WsgiHttpRequest
from slack_bolt.request import BoltRequest

logger = logging.getLogger(__name__)

TIMESTAMP_HEADER = "HTTP_X_SLACK_REQUEST_TIMESTAMP"
SIGNATURE_HEADER = "HTTP_X_SLACK_SIGNATURE"
_WHOLE_SECONDS = re.compile(r"[0-9]{1,15}")
_CONTENT_LENGTH = re.compile(r"[0-9]+")
READ_CHUNK_BYTES = 64 * 1024
UNTRUSTED = "invalid request"
"""Bolt's RequestVerification error for a request it does not trust."""


@dataclass(frozen=True)
class Refusal:
    status: HTTPStatus
    error: str

    def answer(self, start_response: StartResponse) -> Iterable[bytes]:
        body = json.dumps({"error": self.error}).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        start_response(f"{self.status.value} {self.status.phrase}", headers)
        return [body]


def check_framing(environ: WSGIEnvironment, *, max_body_bytes: int) -> Refusal | int:
    """The body's length from the headers, or why the body will not be read."""
    if environ.get("HTTP_TRANSFER_ENCODING"):
        return Refusal(HTTPStatus.LENGTH_REQUIRED, "send the body with a Content-Length, not chunked")
    declared = environ.get("CONTENT_LENGTH")
    if not declared:
        return Refusal(HTTPStatus.LENGTH_REQUIRED, "a Content-Length is required")
    if not _CONTENT_LENGTH.fullmatch(declared):
        return Refusal(HTTPStatus.BAD_REQUEST, "Content-Length is not a whole number")
    length = int(declared) if len(declared) <= 18 else max_body_bytes + 1  # int() refuses 4,300 digits
    if length > max_body_bytes:
        return Refusal(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the body is over {max_body_bytes} bytes")
    return length


def read_body(stream: io.BufferedIOBase, length: int) -> bytes | Refusal:
    """Exactly `length` bytes, read in chunks; the server's reader enforces the deadline."""
    chunks: list[bytes] = []
    left = length
    try:
        while left > 0:
            chunk = stream.read(min(left, READ_CHUNK_BYTES))
            if not chunk:
                return Refusal(HTTPStatus.BAD_REQUEST, "the body is shorter than its Content-Length")
            chunks.append(chunk)
            left -= len(chunk)
    except TimeoutError:
        return Refusal(HTTPStatus.REQUEST_TIMEOUT, "the body did not arrive in time")
    return b"".join(chunks)


def is_readable_by_bolt(environ: WSGIEnvironment, body: bytes) -> bool:
    """Whether Bolt can build its request from this body: UTF-8, and form or JSON making an object."""
    try:
        headers = WsgiHttpRequest(environ).get_headers()
        BoltRequest(body=body.decode("utf-8"), query=environ.get("QUERY_STRING", ""), headers=headers)
    except (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError):
        return False  # UnicodeDecodeError and JSONDecodeError are ValueErrors; a JSON list, an AttributeError
    return True


SIGNATURE_FRESHNESS_SECONDS = 300
"""Slack's rule: a signature is good for five minutes either side of its timestamp
(docs.slack.dev/authentication/verifying-requests-from-slack)."""


def is_signed(secret: str, body: bytes, timestamp: str | None, signature: str | None, *, now: float) -> bool:
    """Slack's v0 signature over the body's bytes as they came. slack_sdk's SignatureVerifier decodes the
    body as UTF-8 first and raises on any other; this is for bodies that are not."""
    if timestamp is None or signature is None or not signature.isascii():
        return False
    if not _WHOLE_SECONDS.fullmatch(timestamp) or abs(now - int(timestamp)) > SIGNATURE_FRESHNESS_SECONDS:
        return False
    base = b"v0:" + timestamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


class SlackRequestGuard:
    """Check a POST to Slack's `path` as the module docstring says, then pass it to `inner` (Bolt's
    SlackRequestHandler); anything else goes to `inner` as it is."""

    def __init__(
        self, inner: WSGIApplication, *, path: str, signing_secret: str, max_body_bytes: int
    ) -> None:
        self.inner = inner
        self.path = path
        self.signing_secret = signing_secret
        self.max_body_bytes = max_body_bytes

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST" or environ.get("PATH_INFO") != self.path:
            return self.inner(environ, start_response)
        checked = self.check(environ)
        if isinstance(checked, Refusal):
            logger.info("refused a Slack request: %s %s", checked.status.value, checked.error)
            return checked.answer(start_response)
        environ["wsgi.input"] = io.BytesIO(checked)
        return self.inner(environ, start_response)

    def check(self, environ: WSGIEnvironment) -> bytes | Refusal:
        """The body, or the answer that refuses the request."""
        length = check_framing(environ, max_body_bytes=self.max_body_bytes)
        if isinstance(length, Refusal):
            return length
        timestamp, signature = environ.get(TIMESTAMP_HEADER), environ.get(SIGNATURE_HEADER)
        if timestamp is not None and not _WHOLE_SECONDS.fullmatch(timestamp):
            return Refusal(HTTPStatus.UNAUTHORIZED, UNTRUSTED)
        if signature is not None and not signature.isascii():
            return Refusal(HTTPStatus.UNAUTHORIZED, UNTRUSTED)
        body = read_body(environ["wsgi.input"], length)
        if isinstance(body, Refusal):
            return body
        if not is_readable_by_bolt(environ, body):
            if not is_signed(self.signing_secret, body, timestamp, signature, now=time.time()):
                return Refusal(HTTPStatus.UNAUTHORIZED, UNTRUSTED)
            return Refusal(HTTPStatus.BAD_REQUEST, "the payload is not the form or JSON Slack sends")
        return body
