"""Services: runs accepted (the user saw the ack) whose pod is not made yet, kept in the store until it is.

Slack never sends an acked slash command again, so a bot killed between the ack and the pod's create would
lose the request; this journal is what a restarted bot carries out instead. Each entry names the replica
that accepted it: a replica resumes its own entries when it starts (it is their only owner, and it is not
handling anything yet), and the leader resumes another replica's once they are old enough for that
replica to be gone. With the store down a run cannot be journaled, so it is refused before anything is
made (`accept` says None), rather than started with nothing to carry it across a restart.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from bot.core import models, podspec, ports

logger = logging.getLogger(__name__)

TABLE = "pending-runs"
"""The store's table of accepted runs, keyed by the Slack request's trigger id."""
OTHERS_AFTER = timedelta(minutes=10)
"""Another replica's run still without its pod this long after the ack: that replica is gone."""
TOO_OLD = timedelta(hours=1)
"""Older runs are not carried out late: their owner is told to ask again."""
RESUME_CLAIM_SECONDS = 3600


@dataclass(frozen=True)
class PendingRun:
    request_id: str
    replica: str
    accepted_at: datetime
    text: str
    """The command as typed after `/gpu`, parsed again to carry it out."""
    owner: models.Owner
    channel: str
    thread_ts: str = ""
    """The thread root's ts once it is posted: a resumed run makes its pod there."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "replica": self.replica,
                "at": podspec.format_time(self.accepted_at),
                "text": self.text,
                "user": self.owner.user_id,
                "user_name": self.owner.user_name,
                "team": self.owner.team_id,
                "channel": self.channel,
                "thread_ts": self.thread_ts,
            }
        )


def read(request_id: str, raw: str) -> PendingRun | None:
    try:
        found = json.loads(raw)
        accepted = podspec.parse_time(str(found["at"]))
        owner = models.Owner(str(found["user"]), str(found["user_name"]), str(found["team"]))
        if accepted is None:
            return None
        return PendingRun(
            request_id,
            str(found["replica"]),
            accepted,
            str(found["text"]),
            owner,
            str(found["channel"]),
            str(found.get("thread_ts") or ""),
        )
    except (ValueError, KeyError, TypeError):
        return None


def is_due(pending: PendingRun, replica: str, now: datetime, *, at_start: bool) -> bool:
    """At start a replica takes only its own runs, as nothing of its own is in hand yet. Later rounds
    take only other replicas' old runs: this replica's own are being carried out by its handlers."""
    if pending.replica == replica:
        return at_start
    return not at_start and now - pending.accepted_at >= OTHERS_AFTER


class Journal:
    def __init__(self, store: ports.Store | None, *, replica: str) -> None:
        self._store = store
        self.replica = replica

    def accept(
        self, request_id: str, run: models.RunRequest, owner: models.Owner, channel: str, now: datetime
    ) -> PendingRun | None:
        """The run, journaled; None when the store could not keep it (it is down)."""
        pending = PendingRun(request_id, self.replica, now, run.text, owner, channel)
        return pending if self._keep(pending) else None

    def posted(self, pending: PendingRun, thread_ts: str) -> PendingRun:
        """The thread root is out: a resumed run must use it, not post another."""
        pending = replace(pending, thread_ts=thread_ts)
        self._keep(pending)
        return pending

    def done(self, pending: PendingRun) -> None:
        if self._store is not None and pending.request_id:
            self._store.drop(TABLE, pending.request_id)

    def due(self, now: datetime, *, at_start: bool) -> list[PendingRun]:
        """Runs to carry out now, each claimed so no other replica or round resumes it too."""
        if self._store is None:
            return []
        found = []
        for request_id, raw in self._store.entries(TABLE).items():
            pending = read(request_id, raw)
            if pending is None:
                logger.warning("dropping unreadable pending run %s: %.200s", request_id, raw)
                self._store.drop(TABLE, request_id)
                continue
            if not is_due(pending, self.replica, now, at_start=at_start):
                continue
            if self._store.claim(f"resume:{request_id}:{pending.thread_ts}", RESUME_CLAIM_SECONDS):
                found.append(pending)
        return found

    def _keep(self, pending: PendingRun) -> bool:
        if self._store is not None and pending.request_id:
            return self._store.put(TABLE, pending.request_id, pending.to_json())
        return True
