"""Services: spend this week or month, from the store's days (finished runs) and the pods (running ones),
and `/gpu usage`, which says it to the asker alone.

Per-user cost never becomes a Prometheus label (one series per user and channel would grow without bound):
it lives in the store's day tables and, for running workloads, in what their pods say.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from bot.core import models, notices, ports, usage

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reckoning:
    summary: usage.Summary
    complete: bool
    """False when the store could not be read: only the running workloads are counted."""


UNREADABLE = "Finished runs are unknown for now (gpubot's Redis is unreachable): this counts running ones."


class Spending:
    def __init__(
        self,
        store: ports.Store | None,
        chat_port: ports.Chat,
        *,
        held: Callable[[], list[usage.Held]],
        names: Callable[[], dict[str, str]],
        policy: models.QuotaPolicy,
        clock: Callable[[], datetime],
    ) -> None:
        """`held`: the runs holding GPUs now, as their pods say (the tracker's informer view); `names`:
        Slack user name → id of the users whose pods it sees."""
        self._store = store
        self._chat = chat_port
        self._held = held
        self._names = names
        self.policy = policy
        """Who the admins are: they may see everyone's spend."""
        self._clock = clock

    def reckon(self, period: usage.Period, now: datetime) -> Reckoning:
        """Everyone's spend since the period began: the store's days, then the running runs until `now`."""
        since = usage.period_start(period, now)
        finished = self._finished(since, now)
        running = [usage.running(held, since=since, now=now) for held in self._held()]
        summary = usage.summarize(period, since, [*(finished or []), *running])
        return Reckoning(summary, finished is not None)

    def _finished(self, since: datetime, now: datetime) -> list[usage.Spend] | None:
        """The store's days of the period; None when it cannot be read."""
        spends: list[usage.Spend] = []
        if self._store is None:
            return spends
        for day in usage.days(since, now):
            fields = self._store.amounts(usage.day_table(day))
            if fields is None:
                return None
            spends += usage.read_day(fields)
        return spends

    # -- /gpu usage ---------------------------------------------------------------------------------
    def handle(self, request: models.UsageRequest, owner: models.Owner, channel: str) -> None:
        self._chat.ephemeral(channel, owner.user_id, self.answer(request, owner))

    def answer(self, request: models.UsageRequest, owner: models.Owner) -> notices.Notice:
        """The asker's own spend; someone else's for an admin; everyone's for an admin naming nobody."""
        me = owner.user_id
        named = request.user_id or self._user_named(request.user_name, owner)
        if request.named and named != me and not self.policy.is_admin(me):
            return notices.Ephemeral(
                "Only admins can see someone else's spend. `/gpu usage` shows yours; nothing was changed."
            )
        if request.named and not named:
            return notices.Ephemeral(
                f"I know no @{request.user_name} among people whose gpubot runs ended. Mention them "
                "(type `@` and pick them from the list) and try again."
            )
        reckoning = self.reckon(usage.Period(request.period), self._clock())
        if not request.named and self.policy.is_admin(me):
            return everyone_report(reckoning)
        return one_report(reckoning, named or me, yours=(named or me) == me)

    def _user_named(self, name: str, owner: models.Owner) -> str:
        if not name:
            return ""
        if name == owner.user_name.lower():
            return owner.user_id
        known = self._store.entries(usage.NAMES_TABLE) if self._store is not None else {}
        return self._names().get(name) or known.get(name, "")


def one_report(reckoning: Reckoning, user: str, *, yours: bool) -> notices.UsageReport:
    summary = reckoning.summary
    when = f"{usage.period_name(summary.period)}, {usage.since_text(summary)}"
    amount = usage.amount_text(summary.of(user))
    other = "month" if summary.period is usage.Period.WEEK else "week"
    hint = f"Finished and running workloads, until now. `/gpu usage {other}` for this {other}."
    note = hint if reckoning.complete else UNREADABLE
    if yours:
        return notices.UsageReport(f"Your spend {when}", (amount,), note=note)
    return notices.UsageReport(f"Spend {when}", by_user=((user, amount),), note=note)


def everyone_report(reckoning: Reckoning) -> notices.UsageReport:
    summary = reckoning.summary
    total = usage.Total(
        "",
        sum(t.gpu_hours for t in summary.by_user),
        sum(t.dollars for t in summary.by_user),
        sum(t.unpriced_hours for t in summary.by_user),
    )
    return notices.UsageReport(
        f"Everyone's spend {usage.period_name(summary.period)}, {usage.since_text(summary)}",
        (f"Total: {usage.amount_text(total)}",),
        by_user=tuple((t.who, usage.amount_text(t)) for t in summary.by_user),
        by_channel=tuple((t.who, usage.amount_text(t)) for t in summary.by_channel),
        note="Channels are where each run was started." if reckoning.complete else UNREADABLE,
    )
