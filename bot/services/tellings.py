"""Services: telling an owner what the reaper did, as a delivery that an act never waits on.

The workload's thread comes first. A thread Slack refuses for good (the bot removed from the channel, the
channel archived or deleted: `errors.Unreachable`) is recorded, and the owner gets the message by DM
instead, with a line saying why it is not in the thread; a DM refused for good is recorded too. Recorded
means a warning log line naming the workload, the act, where and why, and the `gpubot_undelivered_total`
metric. A Slack that is down or slow (`Unavailable`, `RateLimited`) leaves the delivery for a later round.

A delete's telling outlives its pod, so the reaper journals it in the store before the delete and drops
it once it is delivered or recorded undeliverable: a bot killed in between tells it after its restart.
Each entry names the replica that owns it and when it was last tried; another replica takes it over only
once that is `TAKEOVER_AFTER` old (the owner is gone), so two replicas do not both tell it.
With the store down nothing is journaled: a telling cut short by a kill is then lost, the delete is not.
"""

from __future__ import annotations

import enum
import json
import logging
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timedelta

from bot.core import errors, notices, podspec, ports, reminders, workloads

logger = logging.getLogger(__name__)

TABLE = "reaper-tellings"
"""The store's table of deletes not yet told, keyed by pod uid and act."""
TAKEOVER_AFTER = timedelta(minutes=5)
"""Another replica's telling untried this long (on the bot's clock) is taken over: its replica is gone."""
TAKEOVER_CLAIM_SECONDS = 3600


class Outcome(enum.Enum):
    THREAD = "thread"
    """Posted in the workload's thread."""
    DM = "dm"
    """Sent to the owner by DM, the thread being out of reach (or there being none)."""
    LOST = "lost"
    """Neither the thread nor a DM could take it, for good: recorded, not retried."""
    LATER = "later"
    """Slack down or slow: nothing was sent; a later round tries again."""


@dataclass(frozen=True)
class Delivery:
    outcome: Outcome
    thread_refused: str = ""
    """Why the thread refused it for good (`errors.Why`, or "refused"); "" if it was not refused."""


@dataclass(frozen=True)
class Target:
    """Who hears of an act on which workload, and where."""

    act: str
    workload: str
    """`namespace/name`, for the record."""
    owner: str
    channel: str
    thread_ts: str

    @classmethod
    def of(cls, act: str, workload: workloads.Workload) -> Target:
        return cls(act, workload.key, workload.owner_id, workload.channel, workload.thread_ts or "")


class Teller:
    """Delivers one notice: its thread, else a DM to its owner; each wait bounded by `wait_seconds`."""

    def __init__(
        self,
        chat_port: ports.Chat,
        *,
        wait_seconds: float,
        telemetry: ports.Telemetry = ports.NO_TELEMETRY,
    ) -> None:
        self._chat = chat_port
        self._wait = wait_seconds
        self._telemetry = telemetry

    def deliver(self, notice: notices.Reminder, target: Target, *, thread_refused: str = "") -> Delivery:
        """`thread_refused`: the thread refused it already (an earlier try), so go straight to the DM."""
        refused = thread_refused
        if target.channel and target.thread_ts and not refused:
            try:
                self._chat.post(target.channel, notice, thread_ts=target.thread_ts, timeout=self._wait)
                return Delivery(Outcome.THREAD)
            except (errors.Unavailable, errors.RateLimited) as err:
                logger.info("%s: the %s message waits for Slack (%s)", target.workload, target.act, err)
                return Delivery(Outcome.LATER)
            except errors.GpubotError as err:
                refused = err.why if isinstance(err, errors.Unreachable) else "refused"
                self.record(target, where="thread", why=refused, err=err)
        return self._dm(notice, target, refused)

    def _dm(self, notice: notices.Reminder, target: Target, refused: str) -> Delivery:
        if not target.owner:
            self.record(target, where="dm", why="no-owner", err=None)
            return Delivery(Outcome.LOST, refused)
        note = reminders.thread_refused_note(refused) if refused else ""
        instead = replace(notice, thread_channel=target.channel, thread_note=note)
        try:
            self._chat.post_dm(target.owner, instead, timeout=self._wait)
        except (errors.Unavailable, errors.RateLimited) as err:
            logger.info("%s: the %s DM waits for Slack (%s)", target.workload, target.act, err)
            return Delivery(Outcome.LATER, refused)
        except errors.GpubotError as err:
            why = err.why if isinstance(err, errors.Unreachable) else "refused"
            self.record(target, where="dm", why=why, err=err)
            return Delivery(Outcome.LOST, refused)
        return Delivery(Outcome.DM, refused)

    def record(self, target: Target, *, where: str, why: str, err: errors.GpubotError | None) -> None:
        """An undeliverable telling, for the operator: one log line with its fields, and a metric."""
        facts = {
            "workload": target.workload,
            "act": target.act,
            "where": where,
            "why": why,
            "channel": target.channel,
            "thread_ts": target.thread_ts,
            "owner": target.owner,
            "error": str(err) if err else "",
        }
        logger.warning(
            "undeliverable: the %s message of %s could not go to its %s (%s: %s)",
            target.act,
            target.workload,
            where,
            why,
            err or "nobody to send it to",
            extra={"undelivered": facts},
        )
        self._telemetry.count_undelivered(target.act, where=where, why=why)


# -- the journal of deletes not yet told ---------------------------------------------------------------


@dataclass(frozen=True)
class Telling:
    """A delete's message, from its journaling until it is delivered or recorded undeliverable."""

    key: str
    target: Target
    text: str
    replica: str
    tried_at: datetime
    """When it was journaled or last tried, on the bot's clock."""
    thread_refused: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                **asdict(self.target),
                "text": self.text,
                "replica": self.replica,
                "tried_at": podspec.format_time(self.tried_at),
                "thread_refused": self.thread_refused,
            }
        )

    @property
    def notice(self) -> notices.Reminder:
        return notices.Reminder(self.text, self.target.workload)

    @property
    def uid(self) -> str:
        return self.key.partition(":")[0]


def telling_key(uid: str, act: str) -> str:
    return f"{uid}:{act}"


def read(key: str, raw: str) -> Telling | None:
    try:
        found = json.loads(raw)
        tried_at = podspec.parse_time(str(found["tried_at"]))
        if tried_at is None:
            return None
        target = Target(**{f.name: str(found[f.name]) for f in fields(Target)})
        return Telling(
            key, target, str(found["text"]), str(found["replica"]), tried_at, str(found["thread_refused"])
        )
    except (ValueError, KeyError, TypeError):
        return None


def is_due(telling: Telling, replica: str, now: datetime) -> bool:
    """A replica's own tellings are due every round (it is the only one trying them); another's once
    it has gone untried for `TAKEOVER_AFTER`."""
    return telling.replica == replica or now - telling.tried_at >= TAKEOVER_AFTER


class Journal:
    def __init__(self, store: ports.Store | None, *, replica: str) -> None:
        self._store = store
        self.replica = replica

    def keep(self, telling: Telling) -> None:
        if self._store is not None:
            self._store.put(TABLE, telling.key, telling.to_json())

    def drop(self, telling: Telling) -> None:
        if self._store is not None:
            self._store.drop(TABLE, telling.key)

    def due(self, now: datetime, *, besides: set[str]) -> list[Telling]:
        """Tellings to deliver now, other than `besides` (in hand already); another replica's are taken
        over, claimed so that no third replica takes them too."""
        if self._store is None:
            return []
        found = []
        for key, raw in self._store.entries(TABLE).items():
            if key in besides:
                continue
            telling = read(key, raw)
            if telling is None:
                logger.warning("dropping unreadable reaper telling %s: %.200s", key, raw)
                self._store.drop(TABLE, key)
                continue
            if not is_due(telling, self.replica, now):
                continue
            if telling.replica != self.replica:
                stamp = podspec.format_time(telling.tried_at)
                if not self._store.claim(f"telling:{key}:{stamp}", TAKEOVER_CLAIM_SECONDS):
                    continue
                telling = replace(telling, replica=self.replica, tried_at=now)
                self.keep(telling)
                logger.info("taking over the %s message of %s", telling.target.act, telling.target.workload)
            found.append(telling)
        return found
