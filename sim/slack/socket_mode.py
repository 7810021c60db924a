"""Socket Mode as Slack runs it: one-time ws:// URLs, hello, pushed envelopes, acks by envelope_id, refreshes.

Each envelope goes to one live connection (round robin). A missing ack within `ack_timeout` is redelivered
for the types Slack retries (events_api, with retry_attempt / retry_reason), and reported as a timeout for
the rest. A refreshed connection gets no new envelopes; its late acks still count.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import WSMsgType, web

from sim.slack.deliveries import SOCKET_MODE, Delivery
from sim.slack.transcript import Json

logger = logging.getLogger(__name__)

LINK_PATH = "/link/"
"""slack_sdk's builtin client needs a non-empty path in the URL."""


@dataclass
class SocketModeConfig:
    ack_timeout: float = 3.0
    """Slack waits 3 s for an ack."""
    max_retries: int = 3
    """Events API: Slack retries a delivery up to three times."""
    retry_types: frozenset[str] = frozenset({"events_api"})
    """Slash commands and clicks are not redelivered; the user sees operation_timeout instead."""
    connection_life: float | None = None
    """Seconds until a routine refresh_requested disconnect; None keeps connections forever."""
    disconnect_grace: float = 10.0
    """After a disconnect message the server closes the socket itself if the client has not."""
    connect_wait: float = 10.0
    """How long a delivery waits for the app to have a connection at all."""
    max_connections: int = 10


@dataclass
class Connection:
    id: str
    ws: web.WebSocketResponse
    opened: float
    draining: bool = False
    timers: list[asyncio.TimerHandle] = field(default_factory=list)


class SocketModeHub:
    def __init__(self, config: SocketModeConfig, *, app_id: str) -> None:
        self.config = config
        self.app_id = app_id
        self.base_url = ""
        self.connections: dict[str, Connection] = {}
        self.opened_total = 0
        self._tickets: set[str] = set()
        self._acks: dict[str, asyncio.Future[tuple[Json, float]]] = {}
        """Envelope id → the ack frame and when it was read off the socket."""
        self._ids = itertools.count(1)
        self._turn = itertools.count()
        self._changed: asyncio.Condition | None = None
        self.on_change: Callable[[], None] = lambda: None
        """Called whenever the set of connections changes (the runner wakes its waiters)."""

    # -- connecting ---------------------------------------------------------------------------
    def issue_url(self) -> str:
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        ws_base = self.base_url.replace("http://", "ws://", 1)
        return f"{ws_base}{LINK_PATH}?ticket={ticket}&app_id={self.app_id}"

    def live(self) -> list[Connection]:
        return [c for c in self.connections.values() if not c.draining and not c.ws.closed]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.Response(status=401, text="invalid ticket")
        self._tickets.discard(ticket)
        ws = web.WebSocketResponse(autoping=True, max_msg_size=0)
        await ws.prepare(request)
        conn = Connection(f"conn-{next(self._ids)}", ws, time.time())
        self.connections[conn.id] = conn
        self.opened_total += 1
        await ws.send_str(json.dumps(self._hello()))
        self._schedule_refresh(conn)
        if len(self.live()) > self.config.max_connections:
            await self.disconnect(conn, "too_many_websockets")
        await self._notify()
        logger.info("socket mode connection %s opened (%s live)", conn.id, len(self.live()))
        try:
            await self._read(conn)
        finally:
            for timer in conn.timers:
                timer.cancel()
            self.connections.pop(conn.id, None)
            await self._notify()
            logger.info("socket mode connection %s closed", conn.id)
        return ws

    def _hello(self) -> Json:
        life = self.config.connection_life
        return {
            "type": "hello",
            "num_connections": len(self.live()),
            "connection_info": {"app_id": self.app_id},
            "debug_info": {
                "host": "applink-emulator",
                "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                "build_number": 1,
                "approximate_connection_time": int(life) if life is not None else 18060,
            },
        }

    def _schedule_refresh(self, conn: Connection) -> None:
        if self.config.connection_life is None:
            return
        loop = asyncio.get_running_loop()
        refresh = lambda: loop.create_task(self.disconnect(conn, "refresh_requested"))  # noqa: E731
        conn.timers.append(loop.call_later(self.config.connection_life, refresh))

    async def _read(self, conn: Connection) -> None:
        async for message in conn.ws:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                data = json.loads(message.data)
            except ValueError:
                logger.warning("connection %s sent a non-JSON frame: %.80s", conn.id, message.data)
                continue
            future = self._acks.get(str(data.get("envelope_id"))) if isinstance(data, dict) else None
            if future is None:
                logger.info("connection %s: a late ack or an unknown frame: %.200s", conn.id, message.data)
            elif not future.done():
                future.set_result((data, time.monotonic()))

    # -- refreshing ---------------------------------------------------------------------------
    async def disconnect(self, conn: Connection, reason: str) -> None:
        """Tell the app to reconnect; the socket takes no more envelopes and closes after the grace."""
        if conn.draining or conn.ws.closed:
            return
        conn.draining = True
        with contextlib.suppress(ConnectionError, RuntimeError):
            message = {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-emulator"}}
            await conn.ws.send_str(json.dumps(message))
        loop = asyncio.get_running_loop()
        close = lambda: loop.create_task(conn.ws.close())  # noqa: E731
        conn.timers.append(loop.call_later(self.config.disconnect_grace, close))
        await self._notify()

    async def disconnect_all(self, reason: str = "refresh_requested") -> int:
        targets = self.live()
        for conn in targets:
            await self.disconnect(conn, reason)
        return len(targets)

    async def close_all(self) -> None:
        for conn in list(self.connections.values()):
            await conn.ws.close()

    # -- delivering ---------------------------------------------------------------------------
    async def wait_for_connections(self, count: int, timeout: float) -> bool:
        condition = self._condition()
        async with condition:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(condition.wait_for(lambda: len(self.live()) >= count), timeout)
        return len(self.live()) >= count

    async def deliver(self, kind: str, payload: Json, *, accepts_response_payload: bool) -> Delivery:
        started = time.monotonic()
        ack: asyncio.Future[tuple[Json, float]] = asyncio.get_running_loop().create_future()
        envelope_ids: list[str] = []
        attempts = 0
        retries = self.config.max_retries if kind in self.config.retry_types else 0
        error = "timeout"
        try:
            while attempts <= retries:
                conn = await self._pick()
                if conn is None:
                    error = "no_connection"
                    break
                envelope_id = str(uuid.uuid4())
                envelope_ids.append(envelope_id)
                self._acks[envelope_id] = ack
                envelope = _envelope(envelope_id, kind, payload, accepts_response_payload, attempts)
                attempts += 1
                frame = json.dumps(envelope)
                sent = time.monotonic()
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await conn.ws.send_str(frame)
                with contextlib.suppress(TimeoutError):
                    answer, acked_at = await asyncio.wait_for(asyncio.shield(ack), self.config.ack_timeout)
                    return Delivery(
                        type=kind,
                        payload=payload,
                        transport=SOCKET_MODE,
                        acked=True,
                        ack_payload=answer.get("payload"),
                        envelope_ids=tuple(envelope_ids),
                        attempts=attempts,
                        seconds=time.monotonic() - started,
                        ack_seconds=acked_at - sent,
                    )
        finally:
            for envelope_id in envelope_ids:
                self._acks.pop(envelope_id, None)
        return Delivery(
            type=kind,
            payload=payload,
            transport=SOCKET_MODE,
            acked=False,
            envelope_ids=tuple(envelope_ids),
            attempts=attempts,
            error=error,
            seconds=time.monotonic() - started,
        )

    async def _pick(self) -> Connection | None:
        if not self.live() and not await self.wait_for_connections(1, self.config.connect_wait):
            return None
        live = self.live()
        return live[next(self._turn) % len(live)]

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def _notify(self) -> None:
        condition = self._condition()
        async with condition:
            condition.notify_all()
        self.on_change()


def _envelope(
    envelope_id: str, kind: str, payload: Json, accepts_response_payload: bool, attempt: int
) -> Json:
    envelope: Json = {
        "envelope_id": envelope_id,
        "type": kind,
        "payload": payload,
        "accepts_response_payload": accepts_response_payload,
    }
    if kind == "events_api":
        envelope |= {"retry_attempt": attempt, "retry_reason": "timeout" if attempt else ""}
    return envelope
