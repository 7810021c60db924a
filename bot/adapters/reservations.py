"""Adapters: the `Reservations` port on Redis (small Lua scripts, one atomic step each) and in-process.

The ticket counter and the reservations are changed in one script, so two replicas' runs at the same
moment get distinct tickets and each sees the other's reservation or comes ahead of it. A Redis that does
not answer falls back to this process's own reservations, said in the log: the quota then holds per
replica until Redis is back, and reservations kept meanwhile count for every later run until released.
"""

from __future__ import annotations

import itertools
import logging
import threading

import redis

from bot.adapters import store
from bot.core import ports

logger = logging.getLogger(__name__)

KEEP_SECONDS = 24 * 3600
"""The reservation hash expires this long after its last reservation: nothing outlives a quiet day."""

RESERVE = """
local ticket = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], ARGV[1], ticket .. ' ' .. ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return {ticket, redis.call('HGETALL', KEYS[1])}
"""
"""INCR, HSET and HGETALL as one step: every run reserved earlier is in the answer, every later one has a
higher ticket."""
AMEND = """
local held = redis.call('HGET', KEYS[1], ARGV[1])
if not held then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], string.match(held, '^%d+') .. ' ' .. ARGV[2])
return 1
"""
CANCEL = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return 1
"""
"""A cancel mark only while the run still holds its reservation: a release that comes after the pod exists
is told so (and releases the pod), never a mark nobody reads."""


def split(kept: bytes | str) -> ports.Ticketed:
    ticket, _, value = store.text(kept).partition(" ")
    return int(ticket), value


class MemoryReservations:
    """The same semantics in one process, under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tickets = itertools.count(1)
        self._held: dict[str, ports.Ticketed] = {}
        self._cancelled: dict[str, str] = {}

    def reserve(self, key: str, value: str) -> tuple[int, dict[str, ports.Ticketed]]:
        with self._lock:
            ticket = next(self._tickets)
            self._held[key] = (ticket, value)
            return ticket, dict(self._held)

    def amend(self, key: str, value: str) -> bool:
        with self._lock:
            if key not in self._held:
                return False
            self._held[key] = (self._held[key][0], value)
            return True

    def held(self) -> dict[str, ports.Ticketed]:
        with self._lock:
            return dict(self._held)

    def cancel(self, key: str, by: str) -> bool:
        with self._lock:
            if key not in self._held:
                return False
            self._cancelled[key] = by
            return True

    def cancelled_by(self, key: str) -> str:
        with self._lock:
            return self._cancelled.get(key, "")

    def release(self, key: str) -> None:
        with self._lock:
            self._held.pop(key, None)
            self._cancelled.pop(key, None)


class RedisReservations:
    def __init__(self, client: redis.Redis, *, prefix: str = "gpubot:") -> None:
        self._redis = client
        self._held_key = prefix + "reservations"
        self._tickets_key = prefix + "reservation-tickets"
        self._cancelled_key = prefix + "reservations-cancelled"
        self._reserve = client.register_script(RESERVE)
        self._amend = client.register_script(AMEND)
        self._cancel = client.register_script(CANCEL)
        self.local = MemoryReservations()
        """Reservations made while Redis did not answer; they count (ticket 0: ahead of everyone) until
        their runs release them."""

    def reserve(self, key: str, value: str) -> tuple[int, dict[str, ports.Ticketed]]:
        try:
            ticket, flat = self._reserve(
                keys=[self._held_key, self._tickets_key], args=[key, value, KEEP_SECONDS]
            )
        except redis.RedisError as err:
            logger.warning("redis unavailable (%s); quota reservation %s held in this replica only", err, key)
            return self.local.reserve(key, value)
        held = {store.text(k): split(v) for k, v in zip(flat[::2], flat[1::2], strict=True)}
        ours = {k: (0, value) for k, (_, value) in self.local.held().items() if k not in held}
        return int(ticket), {**ours, **held}

    def amend(self, key: str, value: str) -> bool:
        if self.local.amend(key, value):
            return True
        with store.unless_down("reservation %s not amended", key):
            return bool(self._amend(keys=[self._held_key], args=[key, value]))
        return False

    def held(self) -> dict[str, ports.Ticketed]:
        ours = {k: (0, value) for k, (_, value) in self.local.held().items()}
        with store.unless_down("only this replica's reservations read"):
            raw = self._redis.hgetall(self._held_key)
            return {**ours, **{store.text(k): split(v) for k, v in raw.items()}}
        return ours

    def cancel(self, key: str, by: str) -> bool:
        if self.local.cancel(key, by):
            return True
        with store.unless_down("run %s not cancelled", key):
            keys = [self._held_key, self._cancelled_key]
            return bool(self._cancel(keys=keys, args=[key, by, KEEP_SECONDS]))
        return False

    def cancelled_by(self, key: str) -> str:
        local = self.local.cancelled_by(key)
        if local:
            return local
        with store.unless_down("cancel mark of %s not read", key):
            found = self._redis.hget(self._cancelled_key, key)
            return store.text(found) if found else ""
        return ""

    def release(self, key: str) -> None:
        self.local.release(key)
        with store.unless_down("reservation %s left to expire", key), self._redis.pipeline() as pipe:
            pipe.hdel(self._held_key, key)
            pipe.hdel(self._cancelled_key, key)
            pipe.execute()


def open_reservations(kept: store.RedisStore | store.MemoryStore) -> RedisReservations | MemoryReservations:
    """On the store's Redis, under its key prefix, when it has one, else in this process
    (`REDIS_URL=memory://`, one replica)."""
    if isinstance(kept, store.RedisStore):
        return RedisReservations(kept.client, prefix=kept.prefix)
    return MemoryReservations()
