"""Adapters: the `Store` port on Redis, and the stated in-process fallback for a single replica.

Redis is shared by the replicas, so a Slack request claimed by one is not handled again by another.
`private_redis_server` starts a throwaway redis-server on a Unix socket for the demo and the tests.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import redis

logger = logging.getLogger(__name__)

MEMORY_URL = "memory://"
"""`REDIS_URL=memory://`: keep everything in the process. Right for one replica only."""
SERVER_START_SECONDS = 10.0


@contextlib.contextmanager
def unless_down(consequence: str, *args: object) -> Iterator[None]:
    """Run a Redis call, or log that Redis did not answer and what that costs (`consequence`, %-style with
    `args`) and carry on: every caller has an answer that does without Redis."""
    try:
        yield
    except redis.RedisError as err:
        logger.warning("redis unavailable (%s); %s", err, consequence % args)


class RedisStore:
    def __init__(self, client: redis.Redis, *, prefix: str = "gpubot:") -> None:
        self.prefix = prefix
        self.client = client
        """The connection, shared with the quota's reservations (`reservations.RedisReservations`)."""

    def claim(self, key: str, ttl_seconds: int) -> bool:
        with unless_down("handling %s without a duplicate check", key):
            return bool(self.client.set(self.prefix + key, "1", nx=True, ex=max(1, ttl_seconds)))
        return True

    def add_sample(self, series: str, value: float, *, keep: int) -> None:
        name = self.prefix + series
        with unless_down("sample for %s not kept", series), self.client.pipeline() as pipe:
            pipe.lpush(name, repr(value))
            pipe.ltrim(name, 0, keep - 1)
            pipe.execute()

    def samples(self, series: str) -> list[float]:
        with unless_down("no history for %s", series):
            return [float(value) for value in self.client.lrange(self.prefix + series, 0, -1)]
        return []

    def remember(self, key: str, value: str, ttl_seconds: int) -> None:
        with unless_down("%s not kept", key):
            self.client.set(self.prefix + key, value, ex=max(1, ttl_seconds))

    def recall(self, key: str) -> str | None:
        with unless_down("%s not read", key):
            raw = self.client.get(self.prefix + key)
            return None if raw is None else text(raw)
        return None

    def add_amounts(self, table: str, amounts: Mapping[str, float], ttl_seconds: int) -> None:
        """One transaction: every field added (HINCRBYFLOAT), then the table's expiry set."""
        name = self.prefix + table
        with unless_down("%s not added to", table), self.client.pipeline() as pipe:
            for key, amount in amounts.items():
                pipe.hincrbyfloat(name, key, amount)
            pipe.expire(name, max(1, ttl_seconds))
            pipe.execute()

    def amounts(self, table: str) -> dict[str, float] | None:
        with unless_down("%s not read", table):
            return {text(k): float(v) for k, v in self.client.hgetall(self.prefix + table).items()}
        return None

    def put(self, table: str, key: str, value: str) -> bool:
        with unless_down("%s %s not kept", table, key):
            self.client.hset(self.prefix + table, key, value)
            return True
        return False

    def drop(self, table: str, key: str) -> None:
        with unless_down("%s %s not dropped", table, key):
            self.client.hdel(self.prefix + table, key)

    def entries(self, table: str) -> dict[str, str]:
        with unless_down("%s not read", table):
            return {text(k): text(v) for k, v in self.client.hgetall(self.prefix + table).items()}
        return {}

    def close(self) -> None:
        self.client.close()


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class MemoryStore:
    """The same semantics in one process: claims expire on the monotonic clock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, tuple[str, float]] = {}
        """key → (value, monotonic expiry), claims and remembered values alike, as in Redis."""
        self._series: dict[str, list[float]] = {}
        self._tables: dict[str, dict[str, str]] = {}
        self._amounts: dict[str, tuple[dict[str, float], float]] = {}
        """table → (field → total, monotonic expiry), as a Redis hash with an expiry."""

    def claim(self, key: str, ttl_seconds: int) -> bool:
        with self._lock:
            if self._live(key) is not None:
                return False
            self._values[key] = ("1", time.monotonic() + max(1, ttl_seconds))
            return True

    def remember(self, key: str, value: str, ttl_seconds: int) -> None:
        with self._lock:
            self._values[key] = (value, time.monotonic() + max(1, ttl_seconds))

    def recall(self, key: str) -> str | None:
        with self._lock:
            return self._live(key)

    def add_amounts(self, table: str, amounts: Mapping[str, float], ttl_seconds: int) -> None:
        with self._lock:
            totals = self._live_amounts(table)
            for key, amount in amounts.items():
                totals[key] = totals.get(key, 0.0) + amount
            self._amounts[table] = (totals, time.monotonic() + max(1, ttl_seconds))

    def amounts(self, table: str) -> dict[str, float] | None:
        with self._lock:
            return dict(self._live_amounts(table))

    def _live_amounts(self, table: str) -> dict[str, float]:
        kept = self._amounts.get(table)
        if kept is None or kept[1] <= time.monotonic():
            self._amounts.pop(table, None)
            return {}
        return kept[0]

    def _live(self, key: str) -> str | None:
        now = time.monotonic()
        self._values = {k: kept for k, kept in self._values.items() if kept[1] > now}
        kept = self._values.get(key)
        return kept[0] if kept is not None else None

    def add_sample(self, series: str, value: float, *, keep: int) -> None:
        with self._lock:
            self._series[series] = [value, *self._series.get(series, [])][:keep]

    def samples(self, series: str) -> list[float]:
        with self._lock:
            return list(self._series.get(series, []))

    def put(self, table: str, key: str, value: str) -> bool:
        with self._lock:
            self._tables.setdefault(table, {})[key] = value
        return True

    def drop(self, table: str, key: str) -> None:
        with self._lock:
            self._tables.get(table, {}).pop(key, None)

    def entries(self, table: str) -> dict[str, str]:
        with self._lock:
            return dict(self._tables.get(table, {}))

    def close(self) -> None:
        pass


def open_store(url: str, *, prefix: str) -> RedisStore | MemoryStore:
    if url == MEMORY_URL:
        logger.warning("REDIS_URL=%s: state kept in this process; run one replica only", MEMORY_URL)
        return MemoryStore()
    client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
    return RedisStore(client, prefix=prefix)


@contextlib.contextmanager
def private_redis_server() -> Iterator[str | None]:
    """A redis-server of our own on a Unix socket (no port to collide on), or None if none is installed."""
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="gpubot-redis-") as tmp:
        socket_path = Path(tmp) / "redis.sock"
        process = subprocess.Popen(
            [binary, "--port", "0", "--unixsocket", str(socket_path), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"unix://{socket_path}"
            _wait_for_ping(url, process)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=SERVER_START_SECONDS)


def _wait_for_ping(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + SERVER_START_SECONDS
    client = redis.Redis.from_url(url)
    try:
        while True:
            with contextlib.suppress(redis.ConnectionError, FileNotFoundError):
                if client.ping():
                    return
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start (exit code {process.poll()})")
            time.sleep(0.02)
    finally:
        client.close()
