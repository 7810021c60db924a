"""Services: a user's App Home tab, built when they open it (and after they press a button on it).

What `/gpu status` and `/gpu usage` say, on one page: their workloads with Extend and Release (the same
buttons as in threads), their spend this week and this month, each pool now with its line, the warm
schedules, and for admins everyone's spend by user and by channel.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from bot.core import (
    autoscaler_status,
    episodes,
    errors,
    lifecycle,
    models,
    notices,
    ports,
    status,
    usage,
    workloads,
)
from bot.services import launcher, spend

logger = logging.getLogger(__name__)


class AppHome:
    def __init__(
        self,
        cluster: ports.Cluster,
        chat_port: ports.Chat,
        spending: spend.Spending,
        *,
        profiles: Mapping[str, models.GpuProfile],
        waiting: Callable[[], dict[str, int]],
        clock: Callable[[], datetime],
        warm_lines: Callable[[datetime], list[str]] | None = None,
    ) -> None:
        """`waiting`: profile → workloads in its pool's line now (the tracker's view)."""
        self._cluster = cluster
        self._chat = chat_port
        self._spending = spending
        self._profiles = profiles
        self._waiting = waiting
        self._clock = clock
        self.warm_lines = warm_lines
        """The warm schedules' lines, when the root wired them."""

    def publish(self, user: str) -> notices.Home:
        """Build `user`'s Home now and queue it for views.publish; a cluster that cannot be read says so."""
        now = self._clock()
        try:
            home = self.build(user, now)
        except errors.GpubotError as err:
            logger.warning("App Home of %s: the cluster could not be read: %s", user, err)
            home = notices.Home(
                (), self._spend(user, now), (), problem=launcher.failure_text(err), updated=now
            )
        self._chat.publish_home(user, home)
        return home

    def build(self, user: str, now: datetime) -> notices.Home:
        everything = self._cluster.list_workloads()
        mine = [w for w in everything if w.owner_id == user]
        nodes = self._cluster.list_nodes()
        sizes = autoscaler_status.parse(self._cluster.read_autoscaler_status()).pool_sizes()
        views = status.pool_views(nodes, everything, sizes, profiles=self._profiles.values())
        waiting = self._waiting()
        return notices.Home(
            workloads=tuple(home_workload(w, now) for w in mine),
            spend=self._spend(user, now),
            pools=tuple(
                pool_text(v, line_length(v.name, nodes, self._profiles.values(), waiting)) for v in views
            ),
            warm=tuple(self.warm_lines(now)) if self.warm_lines else (),
            everyone=self._everyone(user, now),
            updated=now,
        )

    def _spend(self, user: str, now: datetime) -> notices.UsageReport:
        lines = []
        complete = True
        for period in usage.Period:
            reckoning = self._spending.reckon(period, now)
            complete = complete and reckoning.complete
            summary = reckoning.summary
            when = f"{usage.period_name(summary.period).capitalize()}, {usage.since_text(summary)}"
            lines.append(f"{when}: {usage.amount_text(summary.of(user))}")
        note = "Finished and running workloads, until now." if complete else spend.UNREADABLE
        return notices.UsageReport("Your spend", tuple(lines), note=note)

    def _everyone(self, user: str, now: datetime) -> notices.UsageReport | None:
        if not self._spending.policy.is_admin(user):
            return None
        return spend.everyone_report(self._spending.reckon(usage.Period.WEEK, now))


def home_workload(workload: workloads.Workload, now: datetime) -> notices.HomeWorkload:
    """Its `/gpu status` line; Extend and Release while it holds or waits for GPUs and is not going."""
    live = launcher.is_live(workload)
    return notices.HomeWorkload(
        status.workload_line(workload, now, with_owner=False),
        workload.key,
        notices.Buttons(release=live, extend=live),
    )


def line_length(
    pool: str,
    nodes: Iterable[lifecycle.NodeSeen],
    profiles: Iterable[models.GpuProfile],
    waiting: Mapping[str, int],
) -> int:
    """Workloads waiting in a pool's line: those of the profiles whose node selector its nodes match."""
    members = [n for n in nodes if n.pool == pool]
    served = {p.name for p in profiles if any(episodes.selects(p, n.labels) for n in members)}
    return sum(count for profile, count in waiting.items() if profile in served)


def pool_text(view: status.PoolCapacity, waiting: int) -> str:
    line = f"{waiting} waiting in line" if waiting else "no line"
    return f"{status.pool_line(view)} · {line}"
