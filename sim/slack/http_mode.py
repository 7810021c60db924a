"""HTTP mode: Slack POSTs signed requests to the app's URL and reads the ack (and any response) in the reply.

Bodies and headers are Slack's: slash commands as form fields, interactions as one `payload=<json>` field,
events as JSON; `X-Slack-Signature: v0=HMAC-SHA256(secret, "v0:{ts}:{body}")`. Events are retried with
`X-Slack-Retry-Num` / `X-Slack-Retry-Reason` until the app answers 200 or says `X-Slack-No-Retry: 1`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp

from sim.slack.deliveries import HTTP, Delivery
from sim.slack.transcript import Json

logger = logging.getLogger(__name__)

USER_AGENT = "Slackbot 1.0 (+https://api.slack.com/robots)"


@dataclass
class HttpModeConfig:
    bot_url: str = ""
    """Where Slack would POST: Bolt's default is http://host:3000/slack/events."""
    signing_secret: str = "emulated-signing-secret"
    timeout: float = 3.0
    """Slack gives up after 3 s (retry reason http_timeout)."""
    max_retries: int = 3


def signature(secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def encode_body(kind: str, payload: Json) -> tuple[bytes, str]:
    if kind == "slash_commands":
        return urlencode(payload).encode(), "application/x-www-form-urlencoded"
    if kind == "interactive":
        return urlencode({"payload": json.dumps(payload)}).encode(), "application/x-www-form-urlencoded"
    return json.dumps(payload).encode(), "application/json"


def signed_headers(
    secret: str, body: bytes, content_type: str, *, now: float | None = None
) -> dict[str, str]:
    timestamp = str(int(time.time() if now is None else now))
    return {
        "Content-Type": content_type,
        "User-Agent": USER_AGENT,
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature(secret, timestamp, body),
    }


def parse_response(text: str) -> Json | None:
    """Bolt answers an ack with an empty body, a JSON object, or plain text (shown as the message)."""
    stripped = text.strip()
    if not stripped:
        return None
    if stripped.startswith("{"):
        try:
            parsed: Any = json.loads(stripped)
        except ValueError:
            return {"text": text}
        return parsed if isinstance(parsed, dict) else {"text": text}
    return {"text": text}


async def deliver(
    session: aiohttp.ClientSession, config: HttpModeConfig, kind: str, payload: Json
) -> Delivery:
    body, content_type = encode_body(kind, payload)
    started = time.monotonic()
    retries = config.max_retries if kind == "events_api" else 0
    attempts, status, error, reason = 0, 0, "", ""
    while attempts <= retries:
        headers = signed_headers(config.signing_secret, body, content_type)
        if attempts:
            headers |= {"X-Slack-Retry-Num": str(attempts), "X-Slack-Retry-Reason": reason}
        attempts += 1
        try:
            timeout = aiohttp.ClientTimeout(total=config.timeout)
            async with session.post(config.bot_url, data=body, headers=headers, timeout=timeout) as response:
                status, text = response.status, await response.text()
                no_retry = response.headers.get("X-Slack-No-Retry") == "1"
        except TimeoutError:
            status, error, reason, no_retry = 0, "timeout", "http_timeout", False
        except aiohttp.ClientError as exc:
            logger.info("HTTP-mode POST to %s failed: %s", config.bot_url, exc)
            status, error, reason, no_retry = 0, "connection_failed", "connection_failed", False
        else:
            if status == 200:
                return Delivery(
                    type=kind,
                    payload=payload,
                    transport=HTTP,
                    acked=True,
                    ack_payload=parse_response(text),
                    attempts=attempts,
                    status=status,
                    seconds=time.monotonic() - started,
                )
            error, reason = f"http_{status}", "http_error"
        if no_retry:
            break
    return Delivery(
        type=kind,
        payload=payload,
        transport=HTTP,
        acked=False,
        attempts=attempts,
        status=status,
        error=error,
        seconds=time.monotonic() - started,
    )
