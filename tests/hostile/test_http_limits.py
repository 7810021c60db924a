"""HTTP mode against clients that would knock it over: huge bodies, stalled connections, bad framing, and
signed payloads Bolt cannot read (issue 21).

Memory and threads are read from `gpubot serve` itself, a subprocess on the sim, the emulator and Redis,
through /proc/PID/status; the rest run against `http_mode.make_http_server` in-process. Every request goes
over a real loopback socket, byte for byte as written here; the 200 MB bodies are streamed from one reused
1 MiB buffer, never built. The figures are logged: `--log-cli-level=INFO` shows them.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import selectors
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from bot import settings
from sim.cluster import world
from sim.slack.http_mode import signature
from sim.slack.runner import BackgroundSlack
from tests.hostile.conftest import ListenerGate
from tests.hostile.signed_requests import FORM, command_body, now, post, slack_headers
from tests.integration.botkit import bot_settings
from tests.integration.test_http_mode import PATH, SECRET, gpubot_serve, http_settings, served_bot

logger = logging.getLogger(__name__)

MIB = 1024 * 1024
HUGE = 200 * MIB
RSS_MARGIN = 20 * MIB
"""The bot's peak memory may exceed its idle memory by this much at most while huge bodies come in."""
STALLED = 1500
STALLED_PROBES = 300
"""On the probe port as well, which has a pool of its own."""
HEADER_TIMEOUT = 2.0
BODY_TIMEOUT = 1.0
SHED_MARGIN = 5.0
"""Seconds past the header timeout for the last stalled connection to be closed (queueing, a slow host)."""
PARTIAL_HEADERS = b"POST /slack/events HTTP/1.1\r\nHost: gpubot\r\nX-Slack-Request-Timestamp: 17"


# -- the process, read from /proc ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Usage:
    rss: int
    peak_rss: int
    """VmHWM, since the last `reset_peak`."""
    threads: int
    open_files: int


def usage(pid: int) -> Usage:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = value.split()[0] if value.split() else ""
    return Usage(
        rss=int(fields["VmRSS"]) * 1024,
        peak_rss=int(fields["VmHWM"]) * 1024,
        threads=int(fields["Threads"]),
        open_files=len(os.listdir(f"/proc/{pid}/fd")),
    )


def reset_peak(pid: int) -> None:
    """Set VmHWM back to the current RSS (proc(5), /proc/pid/clear_refs, value 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


# -- raw HTTP ------------------------------------------------------------------------------------------


def status_of(answer: bytes) -> int | None:
    """The status code of an HTTP answer, None if none came (the connection was closed or reset)."""
    parts = answer.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[0].startswith(b"HTTP/") else None


def read_answer(connection: socket.socket) -> bytes:
    received = bytearray()
    try:
        while chunk := connection.recv(64 * 1024):
            received += chunk
    except OSError:
        pass  # reset after (or instead of) the answer
    return bytes(received)


def exchange(port: int, request: bytes, *, timeout: float = 10.0) -> bytes:
    """Send `request` as it is, and read the answer until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as connection:
        connection.sendall(request)
        return read_answer(connection)


def stream_huge_post(port: int, headers: str, *, chunked: bool) -> int | str:
    """POST `HUGE` bytes of body after `headers` as fast as the server takes them; the answer's status,
    or "reset" when the server closed before the body was all sent and no answer could be read."""
    block = memoryview(b"a" * MIB)
    frame_head, frame_tail = (f"{MIB:x}\r\n".encode(), b"\r\n") if chunked else (b"", b"")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        try:
            connection.sendall(f"POST {PATH} HTTP/1.1\r\nHost: gpubot\r\n{headers}\r\n".encode())
            for _ in range(HUGE // MIB):
                connection.sendall(frame_head)
                connection.sendall(block)
                connection.sendall(frame_tail)
        except OSError:
            pass  # the server stopped reading: its answer may still be there
        found = status_of(read_answer(connection))
    return "reset" if found is None else found


# -- in-process fixture ---------------------------------------------------------------------------------


@dataclasses.dataclass
class ServedBot:
    url: str
    port: int
    gate: ListenerGate


@pytest.fixture
def bounded_bot(
    sim: world.BackgroundWorld, http_slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> Iterator[ServedBot]:
    """The real bot behind `http_mode.make_http_server`, with short timeouts: a stall is seen in a second."""
    config = http_settings(bot_settings(sim, http_slack, tmp_path, redis_url))
    limits = settings.HttpLimits(header_timeout_seconds=HEADER_TIMEOUT, body_timeout_seconds=BODY_TIMEOUT)
    config = dataclasses.replace(config, slack=dataclasses.replace(config.slack, http_limits=limits))
    with served_bot(config) as (bot, url):
        gate = ListenerGate()
        bot.app.use(gate.record)
        http_slack.configure_http(bot_url=url, signing_secret=SECRET)
        yield ServedBot(url, urlsplit(url).port or 0, gate)


def help_works(slack: BackgroundSlack) -> bool:
    delivery = slack.type_command("U_ALICE", "C_GPU", "/gpu", "help")
    return (
        delivery.acked
        and delivery.ack_payload is not None
        and "/gpu run IMAGE" in delivery.ack_payload["text"]
    )


# -- memory ---------------------------------------------------------------------------------------------


def test_unsigned_200_mb_posts_leave_the_bots_memory_at_idle(
    sim: world.BackgroundWorld, http_slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    with gpubot_serve(sim, http_slack, tmp_path, redis_url) as served:
        # The request path's code is loaded before idle is read; this warm-up is not what is measured, so a
        # machine busy with the other workers' 200 MB posts may take it twice (the log says if it never does).
        assert any(help_works(http_slack) for _ in range(3)), served.log.read_text()
        pid = served.process.pid
        reset_peak(pid)
        idle = usage(pid)

        declared = stream_huge_post(
            served.port, f"Content-Type: {FORM}\r\nContent-Length: {HUGE}\r\n", chunked=False
        )
        chunked = stream_huge_post(
            served.port, f"Content-Type: {FORM}\r\nTransfer-Encoding: chunked\r\n", chunked=True
        )
        undeclared = stream_huge_post(served.port, f"Content-Type: {FORM}\r\n", chunked=False)
        after = usage(pid)

        logger.info(
            "answers %s, %s, %s; RSS idle %.1f MiB, peak over the three posts %.1f MiB",
            declared,
            chunked,
            undeclared,
            idle.rss / MIB,
            after.peak_rss / MIB,
        )
        for answer, expected in zip((declared, chunked, undeclared), (413, 411, 411), strict=True):
            assert answer in (
                expected,
                "reset",
            )  # a reset: the host too slow to send it all in LINGER_SECONDS
        assert after.peak_rss - idle.rss <= RSS_MARGIN, (idle, after)
        assert help_works(http_slack), served.log.read_text()


# -- stalled connections ----------------------------------------------------------------------------------


def open_stalled(port: int, count: int) -> list[socket.socket]:
    """`count` connections that send part of their headers and then nothing."""
    stalled = []
    for _ in range(count):
        connection = socket.create_connection(("127.0.0.1", port), timeout=10)
        connection.sendall(PARTIAL_HEADERS)
        stalled.append(connection)
    return stalled


def wait_until_closed_by_server(connections: list[socket.socket], *, timeout: float) -> list[socket.socket]:
    """Read each connection until the server closes it (an EOF or a reset, after a 503 or nothing);
    the ones still open after `timeout`."""
    selector = selectors.DefaultSelector()
    for connection in connections:
        connection.setblocking(False)
        selector.register(connection, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    open_ones = set(connections)
    while open_ones and (left := deadline - time.monotonic()) > 0:
        for key, _ in selector.select(left):
            ready = key.fileobj
            assert isinstance(ready, socket.socket)
            try:
                closed = not ready.recv(4096)
            except BlockingIOError:
                closed = False
            except OSError:
                closed = True
            if closed:
                selector.unregister(ready)
                open_ones.discard(ready)
    selector.close()
    return list(open_ones)


def test_1500_stalled_connections_are_shed_within_the_header_timeout(
    sim: world.BackgroundWorld, http_slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    timeouts = {"GPUBOT_HTTP_HEADER_TIMEOUT_SECONDS": str(HEADER_TIMEOUT)}
    with gpubot_serve(sim, http_slack, tmp_path, redis_url, timeouts) as served:
        assert help_works(http_slack)
        pid = served.process.pid
        idle = usage(pid)
        started = time.monotonic()
        stalled = open_stalled(served.port, STALLED) + open_stalled(served.health_port, STALLED_PROBES)
        during = usage(pid)
        try:
            still_open = wait_until_closed_by_server(stalled, timeout=HEADER_TIMEOUT + SHED_MARGIN)
            shed_after = time.monotonic() - started
        finally:
            for connection in stalled:
                connection.close()
        after = usage(pid)

        logger.info(
            "idle %s; %d stalled: %s; all closed after %.1f s: %s",
            idle,
            len(stalled),
            during,
            shed_after,
            after,
        )
        assert not still_open, f"{len(still_open)} of {len(stalled)} stalled connections still open"
        assert during.threads <= idle.threads + 2, (idle, during)  # the pools are made at start
        assert after.open_files <= idle.open_files + 2, (idle, after)
        assert help_works(http_slack), served.log.read_text()
        health = exchange(served.health_port, b"GET /healthz HTTP/1.1\r\nHost: gpubot\r\n\r\n")
        assert status_of(health) == 200 and health.endswith(b"ok\n")


def test_a_connection_stalled_in_its_headers_or_body_is_closed_at_its_deadline(
    http_slack: BackgroundSlack, bounded_bot: ServedBot
) -> None:
    with socket.create_connection(("127.0.0.1", bounded_bot.port), timeout=10) as connection:
        connection.sendall(PARTIAL_HEADERS)
        assert read_answer(connection) == b""  # closed unanswered: it never said what it wanted

    body = command_body("help", "1.2.slow")
    timestamp = str(now())
    headers = slack_headers(timestamp, signature(SECRET, timestamp, body))
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    with socket.create_connection(("127.0.0.1", bounded_bot.port), timeout=10) as connection:
        connection.sendall(
            f"POST {PATH} HTTP/1.1\r\nHost: gpubot\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode()
        )
        connection.sendall(body[:10])
        assert status_of(read_answer(connection)) == 408
    assert not bounded_bot.gate.bodies and help_works(http_slack)


# -- framing and payloads ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        pytest.param(f"Content-Type: {FORM}\r\n", 411, id="no-content-length"),
        pytest.param(f"Transfer-Encoding: chunked\r\nContent-Type: {FORM}\r\n", 411, id="chunked"),
        pytest.param("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 411, id="chunked-and-length"),
        pytest.param("Content-Length: five\r\n", 400, id="length-not-a-number"),
        pytest.param("Content-Length: -5\r\n", 400, id="length-negative"),
        pytest.param(f"Content-Length: {MIB + 1}\r\n", 413, id="one-byte-over-1-mib"),
    ],
)
def test_bad_framing_is_refused_before_the_body_is_read(
    http_slack: BackgroundSlack, bounded_bot: ServedBot, headers: str, status: int
) -> None:
    request = f"POST {PATH} HTTP/1.1\r\nHost: gpubot\r\n{headers}\r\n".encode()
    assert status_of(exchange(bounded_bot.port, request)) == status  # no body sent: none was waited for
    assert not bounded_bot.gate.bodies


def test_a_body_of_exactly_1_mib_is_read_and_judged_by_its_signature(bounded_bot: ServedBot) -> None:
    body = command_body("help", "1.2.big").ljust(MIB, b"x")
    answer = post(bounded_bot.url, body, slack_headers(str(now()), "v0=" + "0" * 64))
    assert answer.status == 401 and not bounded_bot.gate.bodies


MALFORMED = [
    pytest.param(b'{"type": "block_actions", "user": ', "application/json", id="json-cut-short"),
    pytest.param(b"[1, 2, 3]", "application/json", id="json-list"),
    pytest.param(b"[" * 100_000, "application/json", id="json-nested-past-the-recursion-limit"),
    pytest.param(b"payload=%7Bnot+json", FORM, id="payload-not-json"),
    pytest.param(b"payload=" + quote('["a"]').encode(), FORM, id="payload-a-list"),
    pytest.param(b"command=%2Fgpu&text=\xff\xfe", FORM, id="not-utf-8"),
]


@pytest.mark.parametrize(("body", "content_type"), MALFORMED)
def test_a_signed_payload_bolt_cannot_read_is_answered_400_and_an_unsigned_one_401(
    http_slack: BackgroundSlack, bounded_bot: ServedBot, body: bytes, content_type: str
) -> None:
    timestamp = str(now())
    signed = slack_headers(timestamp, signature(SECRET, timestamp, body)) | {"Content-Type": content_type}
    forged = slack_headers(timestamp, signature("not-the-secret", timestamp, body)) | {
        "Content-Type": content_type
    }

    answer = post(bounded_bot.url, body, signed)
    assert (answer.status, answer.body) == (
        400,
        '{"error": "the payload is not the form or JSON Slack sends"}',
    )
    assert post(bounded_bot.url, body, forged).status == 401
    assert not bounded_bot.gate.bodies
    assert help_works(http_slack)  # and a genuine command goes through as before


def test_a_signature_header_that_is_not_ascii_is_refused_401(bounded_bot: ServedBot) -> None:
    body = command_body("help", "1.2.sig")
    answer = post(bounded_bot.url, body, slack_headers(str(now()), "v0=\u00e9"))  # was a 500 inside Bolt
    assert (answer.status, answer.body) == (401, '{"error": "invalid request"}')
    assert not bounded_bot.gate.bodies
