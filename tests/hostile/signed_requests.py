"""Signed (and mis-signed) slash-command POSTs, as Slack or an attacker would send them to gpubot's URL.

Slack signs `v0:{timestamp}:{body}` with HMAC-SHA256 and the app's signing secret; a request is genuine
only if that signature matches and the timestamp is within five minutes of now. Every way of getting
that wrong is a `Case` here, drawn from a seeded generator so a failure names a case that reproduces.
Timestamps are taken when a case is sent, not when it is drawn, so a slow machine cannot age a case.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from bot.core import commands, models
from sim.slack.http_mode import signature
from tests.hostile import hostile_text

FRESHNESS = 300
"""Seconds a signed request stays valid, either side of now (Slack's rule, Bolt's check)."""
MARGIN = 10
"""Offsets stay this far from the window's edge, for the time between signing and checking."""
RUN = "run nvidia/cuda:12.4.1-base-ubuntu22.04 -- sleep 3600"
FORM = "application/x-www-form-urlencoded"

Headers = dict[str, str]


def command_body(text: str, trigger_id: str, *, user: str = "U_ALICE", channel: str = "C_GPU") -> bytes:
    """A `/gpu` slash command exactly as Slack posts it (form-encoded)."""
    payload = {
        "token": "legacy-verification-token",
        "team_id": "T_GPULAB",
        "team_domain": "gpulab",
        "channel_id": channel,
        "channel_name": "gpu-users",
        "user_id": user,
        "user_name": user.removeprefix("U_").lower(),
        "command": "/gpu",
        "text": text,
        "api_app_id": "A_GPUBOT",
        "is_enterprise_install": "false",
        "response_url": "http://127.0.0.1:9/commands/unused",
        "trigger_id": trigger_id,
    }
    return urlencode(payload).encode()


def slack_headers(timestamp: str, sig: str | None) -> Headers:
    headers = {"Content-Type": FORM, "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)"}
    headers["X-Slack-Request-Timestamp"] = timestamp
    if sig is not None:
        headers["X-Slack-Signature"] = sig
    return headers


Build = Callable[[int], tuple[bytes, Headers]]
"""Given now (whole seconds), the body and headers to send."""


@dataclass(frozen=True)
class Case:
    kind: str
    """`forged`, `missing`, `expired`, `future`, `malformed` (timestamp), or `valid`."""
    detail: str
    trigger_id: str
    build: Build

    @property
    def genuine(self) -> bool:
        return self.kind == "valid"


@dataclass(frozen=True)
class Answer:
    status: int
    body: str


def post(url: str, body: bytes, headers: Headers) -> Answer:
    """One POST over a fresh connection; headers are sent byte for byte, none added but Host and length."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        connection.putrequest("POST", parts.path, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value.encode("utf-8"))
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return Answer(response.status, response.read().decode("utf-8", "replace"))
    finally:
        connection.close()


def ack_text(answer: Answer) -> str:
    """The text of an ack (Bolt answers JSON, or plain text), empty for none."""
    try:
        parsed: Any = json.loads(answer.body) if answer.body.strip().startswith("{") else None
    except ValueError:
        parsed = None
    return str(parsed.get("text", "")) if isinstance(parsed, dict) else answer.body


# -- the generator ---------------------------------------------------------------------------------------


def _flip(hex_digits: str, rng: random.Random) -> str:
    at = rng.randrange(len(hex_digits))
    replacement = rng.choice([c for c in "0123456789abcdef" if c != hex_digits[at]])
    return hex_digits[:at] + replacement + hex_digits[at + 1 :]


def _forgery(secret: str, rng: random.Random, body: bytes, flavour: int) -> tuple[str, bytes, Build]:
    """(what is wrong, the body sent, the builder) for one of thirteen ways to forge a signature."""
    skew = rng.randint(-FRESHNESS + MARGIN, FRESHNESS - MARGIN)
    other_secret = rng.choice(["x", secret + "x", secret[:-1], secret.upper(), hex(rng.getrandbits(64))])
    tampered = body.replace(b"U_ALICE", b"U_ADMIN") if rng.random() < 0.5 else body + b"&text=run+evil"

    def signed(sign: Callable[[str], str], sent: bytes = body) -> Build:
        def build(now: int) -> tuple[bytes, Headers]:
            timestamp = str(now + skew)
            return sent, slack_headers(timestamp, sign(timestamp))

        return build

    def valid(timestamp: str) -> str:
        return signature(secret, timestamp, body)

    flavours: list[tuple[str, bytes, Build]] = [
        ("another secret", body, signed(lambda ts: signature(other_secret, ts, body))),
        ("random hex", body, signed(lambda ts: "v0=" + f"{rng.getrandbits(256):064x}")),
        ("one hex digit changed", body, signed(lambda ts: "v0=" + _flip(valid(ts)[3:], rng))),
        ("body changed after signing", tampered, signed(valid, tampered)),
        ("signed for another timestamp", body, signed(lambda ts: signature(secret, str(int(ts) - 1), body))),
        ("v1 instead of v0", body, signed(lambda ts: "v1=" + valid(ts)[3:])),
        ("upper-case hex", body, signed(lambda ts: valid(ts).upper())),
        ("truncated", body, signed(lambda ts: valid(ts)[: rng.randint(0, 66)])),
        ("HMAC of the body alone", body, signed(lambda ts: "v0=" + _hmac(secret, body, hashlib.sha256))),
        ("SHA-1 instead of SHA-256", body, signed(lambda ts: "v0=" + _hmac(secret, _base(ts, body), "sha1"))),
        ("another request's signature", body, signed(lambda ts: signature(secret, ts, body + b"&x=1"))),
        ("empty v0=", body, signed(lambda ts: "v0=")),
        ("signature with no version", body, signed(lambda ts: valid(ts)[3:])),
    ]
    return flavours[flavour % len(flavours)]


def _base(timestamp: str, body: bytes) -> bytes:
    return b"v0:" + timestamp.encode() + b":" + body


def _hmac(secret: str, message: bytes, digest: Any) -> str:
    return hmac.new(secret.encode(), message, digest).hexdigest()


def _missing(secret: str, body: bytes, flavour: int) -> tuple[str, Build]:
    def no_signature(now: int) -> tuple[bytes, Headers]:
        return body, slack_headers(str(now), None)

    def no_timestamp(now: int) -> tuple[bytes, Headers]:
        headers = slack_headers(str(now), signature(secret, str(now), body))
        del headers["X-Slack-Request-Timestamp"]
        return body, headers

    def neither(now: int) -> tuple[bytes, Headers]:
        return body, {"Content-Type": FORM}

    def empty_signature(now: int) -> tuple[bytes, Headers]:
        return body, slack_headers(str(now), "")

    flavours = [
        ("no signature", no_signature),
        ("no timestamp", no_timestamp),
        ("neither header", neither),
        ("empty signature", empty_signature),
    ]
    return flavours[flavour % len(flavours)]


def _stale(secret: str, body: bytes, offset: int) -> Build:
    """Correctly signed, but for a moment `offset` seconds away: a captured request replayed later, or a
    request signed for the future."""

    def build(now: int) -> tuple[bytes, Headers]:
        timestamp = str(now + offset)
        return body, slack_headers(timestamp, signature(secret, timestamp, body))

    return build


MALFORMED_TIMESTAMPS = ("", "abc", "1e9", "12.5", "0x10", "-", "--1", "1_700_000_000", "NaN", "١٢٣")


def _malformed(secret: str, body: bytes, rng: random.Random) -> tuple[str, Build]:
    """A timestamp that is no whole number, signed correctly over that text (Slack never sends one)."""
    timestamp = rng.choice(MALFORMED_TIMESTAMPS)

    def build(now: int) -> tuple[bytes, Headers]:
        return body, slack_headers(timestamp, signature(secret, timestamp, body))

    return f"timestamp {timestamp!r}", build


def _valid_text(rng: random.Random) -> str:
    """What a genuine request carries: help, or hostile text the parser refuses (an ack, no side effect)."""
    while True:
        text = rng.choice(["help", "help run", *hostile_text.seeded_commands(rng.randrange(10**6), 1)])
        if isinstance(commands.parse_gpu_command(text), models.UsageError | models.HelpRequest):
            return text


def generate(
    secret: str, seed: int, *, forged: int, missing: int, stale: int, malformed: int, valid: int
) -> list[Case]:
    """`stale` is split between expired and future; invalid cases all carry a `/gpu run`."""
    rng = random.Random(seed)
    cases: list[Case] = []

    def trigger() -> str:
        return f"{rng.randrange(10**5)}.{rng.randrange(10**6)}.{rng.getrandbits(64):016x}"

    for index in range(forged):
        trigger_id = trigger()
        detail, _, build = _forgery(secret, rng, command_body(RUN, trigger_id), index)
        cases.append(Case("forged", detail, trigger_id, build))
    for index in range(missing):
        trigger_id = trigger()
        detail, build = _missing(secret, command_body(RUN, trigger_id), index)
        cases.append(Case("missing", detail, trigger_id, build))
    for index in range(stale):
        trigger_id = trigger()
        late = index % 2 == 0
        offset = rng.choice([FRESHNESS + MARGIN, rng.randint(FRESHNESS + MARGIN, 10 * 365 * 86400)])
        build = _stale(secret, command_body(RUN, trigger_id), -offset if late else offset)
        cases.append(Case("expired" if late else "future", f"{offset} s", trigger_id, build))
    for _ in range(malformed):
        trigger_id = trigger()
        detail, build = _malformed(secret, command_body(RUN, trigger_id), rng)
        cases.append(Case("malformed", detail, trigger_id, build))
    for _ in range(valid):
        trigger_id = trigger()
        skew = rng.randint(-FRESHNESS + MARGIN, FRESHNESS - MARGIN)
        build = _stale(secret, command_body(_valid_text(rng), trigger_id), skew)
        cases.append(Case("valid", f"skew {skew} s", trigger_id, build))
    rng.shuffle(cases)
    return cases


def now() -> int:
    return int(time.time())
