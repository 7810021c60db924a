"""Adapter: the outbox's queued writes kept in the store until Slack has them, so a killed bot owes nothing.

Each queued write (a thread reply, an edit, an ephemeral, a DM) is one entry of its replica's table,
`outbox:<replica>`, written before the caller returns and dropped once Slack accepted it (or refused it for
good). Each entry has an idempotency key, which a reply or DM also carries to Slack in its message
`metadata`, so a write replayed after a kill is first looked for in Slack and not posted twice.

Who replays what: a replica takes its own entries left by an earlier run of itself (same identity, another
boot) at start and on every beat after; any replica takes a gone replica's entries once that replica's
heartbeat (`outbox-alive:<replica>`, renewed every `BEAT_SECONDS`) has lapsed. Every entry is claimed by
its owner, boot and key before it is taken, so one replica replays it, once. With the store down nothing is
kept and the outbox goes on in memory, as the store's warnings in the log say.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from bot.core import ports

logger = logging.getLogger(__name__)

REPLICAS = "outbox-replicas"
"""Table of every replica that ever kept an outbox here, so a gone one's entries can be found."""
BEAT_SECONDS = 10.0
"""How often a replica says it is alive, and looks for entries left by an earlier run of itself."""
ALIVE_SECONDS = 60
"""A replica silent this long is gone: its entries are taken over. Six missed beats, so a busy replica
(a long GC, a starved CPU) is not taken for dead."""
CLAIM_SECONDS = 24 * 3600
"""How long the claim on a taken entry lasts; the entry lives on under its new owner, with a new claim."""
EVENT_TYPE = "gpubot_outbox_write"
"""The `metadata.event_type` of gpubot's journaled messages (docs.slack.dev/messaging/message-metadata:
event_type plus an event_payload object), whose payload's `key` is the write's idempotency key."""


@dataclass(frozen=True)
class Entry:
    """One queued write as kept: enough to send it again in another process."""

    key: str
    kind: str
    lane: tuple[str, ...]
    args: dict[str, Any]
    at: float
    """Wall-clock seconds when it was queued (or its last coalesced edit was)."""
    owner: str
    boot: str

    def to_json(self) -> str:
        fields = {"kind": self.kind, "lane": list(self.lane), "args": self.args, "at": self.at}
        return json.dumps(fields | {"boot": self.boot})


def read(owner: str, key: str, raw: str) -> Entry | None:
    try:
        found = json.loads(raw)
        lane = tuple(str(part) for part in found["lane"])
        args = found["args"]
        if not isinstance(args, dict):
            return None
        return Entry(key, str(found["kind"]), lane, args, float(found["at"]), owner, str(found["boot"]))
    except (ValueError, KeyError, TypeError):
        return None


def metadata(key: str) -> dict[str, Any]:
    """What a journaled message carries to Slack, so a replay can find it there."""
    return {"event_type": EVENT_TYPE, "event_payload": {"key": key}}


def key_of(message: dict[str, Any]) -> str:
    """The idempotency key a message from Slack's history carries, or ''."""
    found = message.get("metadata")
    if not isinstance(found, dict) or found.get("event_type") != EVENT_TYPE:
        return ""
    payload = found.get("event_payload")
    return str(payload.get("key", "")) if isinstance(payload, dict) else ""


class OutboxJournal:
    def __init__(self, store: ports.Store, *, replica: str, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self.replica = replica or "gpubot"
        self.boot = uuid.uuid4().hex[:12]
        """This run of the replica: entries of an earlier boot under the same name are a dead run's."""
        self._clock = clock
        self._stop = threading.Event()
        self._beater: threading.Thread | None = None

    # -- this replica's own entries -----------------------------------------------------------------
    def new_key(self) -> str:
        return uuid.uuid4().hex

    def keep(self, key: str, kind: str, lane: tuple[str, ...], args: dict[str, Any]) -> None:
        entry = Entry(key, kind, lane, args, self._clock(), self.replica, self.boot)
        self._store.put(self._table(self.replica), key, entry.to_json())

    def forget(self, key: str) -> None:
        self._store.drop(self._table(self.replica), key)

    # -- taking over ------------------------------------------------------------------------------
    def left_over(self) -> list[Entry]:
        """Entries no live run keeps: this replica's from earlier boots, and those of replicas gone
        silent. Each is claimed for this run, and kept under it from now on; oldest first."""
        taken = [e for e in self._entries(self.replica) if e.boot != self.boot and self._claim(e)]
        for replica in self._store.entries(REPLICAS):
            if replica == self.replica or self._store.recall(self._alive_key(replica)) is not None:
                continue
            found = self._entries(replica)
            taken += [e for e in found if self._claim(e)]
            if not found:
                self._store.drop(REPLICAS, replica)
        for entry in taken:
            adopted = replace(entry, owner=self.replica, boot=self.boot)
            self._store.put(self._table(self.replica), entry.key, adopted.to_json())
            if entry.owner != self.replica:
                self._store.drop(self._table(entry.owner), entry.key)
        if taken:
            logger.info("outbox: took over %s unsent Slack writes of stopped runs", len(taken))
        return sorted(taken, key=lambda e: e.at)

    def _claim(self, entry: Entry) -> bool:
        return self._store.claim(f"outbox-take:{entry.owner}:{entry.boot}:{entry.key}", CLAIM_SECONDS)

    def _entries(self, replica: str) -> list[Entry]:
        found = []
        for key, raw in self._store.entries(self._table(replica)).items():
            entry = read(replica, key, raw)
            if entry is None:
                logger.warning("outbox: dropping an unreadable entry %s of %s: %.200s", key, replica, raw)
                self._store.drop(self._table(replica), key)
                continue
            found.append(entry)
        return found

    # -- the heartbeat ----------------------------------------------------------------------------
    def start(self, on_beat: Callable[[], object]) -> None:
        """Say this run is alive now and every `BEAT_SECONDS`, calling `on_beat` after each beat."""
        self._store.put(REPLICAS, self.replica, self.boot)
        self._beat()
        self._beater = threading.Thread(target=self._run, args=(on_beat,), name="outbox-beat", daemon=True)
        self._beater.start()

    def stop(self) -> None:
        """Stop beating, and say so at once: what is left is taken over by the next beat of any replica."""
        self._stop.set()
        if self._beater is not None:
            self._beater.join(BEAT_SECONDS)
        self._store.remember(self._alive_key(self.replica), "", 1)

    def _run(self, on_beat: Callable[[], object]) -> None:
        while not self._stop.wait(BEAT_SECONDS):
            self._beat()
            try:
                on_beat()
            except Exception:  # the next beat tries again; a dead beat thread would strand entries
                logger.exception("outbox: taking over unsent writes failed")

    def _beat(self) -> None:
        self._store.remember(self._alive_key(self.replica), self.boot, ALIVE_SECONDS)

    @staticmethod
    def _table(replica: str) -> str:
        return f"outbox:{replica}"

    @staticmethod
    def _alive_key(replica: str) -> str:
        return f"outbox-alive:{replica}"
