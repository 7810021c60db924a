"""Services: pre-warm schedules. `/gpu warm` keeps them in a ConfigMap that every replica watches; at each
schedule's edges the leader moves the pools' min sizes through the cloud adapter and tells the channel.

A schedule's edges are cron jobs in the composition root (`Bot.sync_warm_jobs`); `reconcile` is safe to
run at any time, since it only brings each pool to what the schedules want now. A pool whose schedule was
removed is judged once more, so its min falls back to 0 and it can drain.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from bot.core import episodes, errors, models, notices, pools, ports, warm
from bot.core.models import WarmSchedule

logger = logging.getLogger(__name__)

WRITE_ATTEMPTS = 3
"""Two admins editing at once: re-read and retry the ConfigMap this many times before giving up."""


def _nothing() -> None:
    return None


class Warmer:
    def __init__(
        self,
        pool_manager: ports.PoolManager | None,
        configs: ports.ConfigStore,
        chat_port: ports.Chat,
        *,
        cloud: pools.Cloud | None,
        configured: Iterable[WarmSchedule],
        configmap: str,
        channel: str,
        policy: models.QuotaPolicy,
        profiles: Iterable[models.GpuProfile],
        clock: Callable[[], datetime],
        on_change: Callable[[], None] = _nothing,
    ) -> None:
        """`pool_manager` None: no cloud is configured, so schedules can be listed but do nothing."""
        self._pools = pool_manager
        self._cloud = cloud
        self._configs = configs
        self._chat = chat_port
        self._configured = tuple(configured)
        self._configmap = configmap
        self._channel = channel
        self._policy = policy
        self._profiles = tuple(profiles)
        self._clock = clock
        self.on_change = on_change
        """Called after the stored schedules changed: the root re-arms the cron jobs and reconciles."""
        self._stored: list[WarmSchedule] = []
        self._dropped: set[str] = set()
        self._prices: dict[str, float | None] = {}
        self._lock = threading.Lock()
        self._reconciling = threading.Lock()

    @property
    def configmap(self) -> str:
        return self._configmap

    @property
    def schedules(self) -> list[WarmSchedule]:
        with self._lock:
            return [*self._configured, *self._stored]

    # -- the ConfigMap, as every replica's informer delivers it ------------------------------------
    def on_config(self, change: str, obj: Mapping[str, Any]) -> None:
        text = "" if change == ports.DELETED else str((obj.get("data") or {}).get(warm.STORED_KEY, ""))
        found, bad = warm.read_stored(text)
        for line in bad:
            logger.warning("ConfigMap %s: skipping %r, which is not a warm schedule", self._configmap, line)
        with self._lock:
            if found == self._stored:
                return
            gone = {s.pool for s in self._stored} - {s.pool for s in found}
            self._stored = found
            self._dropped |= gone
        self.on_change()

    # -- the leader's edges ----------------------------------------------------------------------------
    def reconcile(self) -> list[warm.WarmChange]:
        """Bring every scheduled pool's min size to what its schedules want now; say what changed."""
        if self._pools is None:
            return []
        with self._reconciling:
            schedules = self.schedules
            with self._lock:
                names = {s.pool for s in schedules} | self._dropped
            views = self._read_pools(sorted(names))
            bounds = {name: (view.min_size, view.max_size) for name, view in views.items()}
            now = self._clock()
            changes = warm.plan(schedules, bounds, now)
            done = [change for change in changes if self._apply(change, views[change.pool])]
            for change in done:
                self._tell(warm.change_text(change, now, self._prices.get(change.pool)))
            with self._lock:
                self._dropped -= set(bounds)
            return done

    def _read_pools(self, names: list[str]) -> dict[str, pools.PoolView]:
        assert self._pools is not None
        views = {}
        for name in names:
            try:
                view = self._pools.get_pool(name)
            except errors.NotFound:
                self._tell(
                    f":warning: A warm schedule names pool {name}, which the cloud does not have. "
                    "Fix: `/gpu warm` to see it, then remove it or create the pool (`gpubot pool create`)."
                )
                continue
            except errors.GpubotError as err:  # the next edge, or the next change, tries again
                logger.warning("could not read pool %s for its warm schedule: %s", name, err)
                continue
            views[name] = view
            self._prices[name] = self._price(view)
        return views

    def _price(self, view: pools.PoolView) -> float | None:
        node_labels = {**view.labels, **pools.cloud_set_labels(view.cloud, view.name, view.accelerator_type)}
        return episodes.pool_price(node_labels, self._profiles)

    def _apply(self, change: warm.WarmChange, view: pools.PoolView) -> bool:
        """`view`: the pool as read for this plan, so its bounds are not read twice."""
        assert self._pools is not None
        if change.before == change.after:
            return True  # only a warning to give: the schedule wants more than the max allows
        try:
            resize = pools.plan_resize(view, min_size=change.after, max_size=None)
            if isinstance(resize, pools.Refused):
                raise errors.Invalid(resize.reason)
            self._pools.set_pool_size(change.pool, resize)
        except errors.GpubotError as err:
            logger.warning("warm: setting %s min %d failed: %s", change.pool, change.after, err)
            self._tell(
                f":warning: Could not set {change.pool}'s min size to {change.after} for its warm schedule: "
                f"{err}. The next schedule edge tries again; `gpubot doctor` checks the bot's cloud access."
            )
            return False
        logger.info("warm: %s min %d -> %d", change.pool, change.before, change.after)
        return True

    def _tell(self, text: str) -> None:
        if self._channel:
            self._chat.post(self._channel, notices.Reply(text))

    # -- /gpu warm -------------------------------------------------------------------------------------
    def handle(self, request: models.WarmRequest, actor: str, channel: str) -> None:
        if request.add is None and request.remove is None:
            answer = self.listing(actor)
        elif refusal := self._refusal(actor):
            answer = refusal
        elif request.add is not None:
            answer = self._add(request.add)
        else:
            assert request.remove is not None
            answer = self._remove(request.remove)
        self._chat.ephemeral(channel, actor, notices.Ephemeral(answer))

    def _refusal(self, actor: str) -> str:
        if not self._policy.is_admin(actor):
            return "Only gpubot admins can change warm schedules. `/gpu warm` lists them."
        if self._pools is None:
            return (
                "Warm schedules need the bot to reach the pool's cloud: set GPUBOT_CLOUD (gke or eks) and "
                "GPUBOT_CLOUD_CLUSTER (and, on GKE, GPUBOT_GKE_PROJECT and GPUBOT_GKE_LOCATION)."
            )
        return ""

    def listing(self, actor: str) -> str:
        now = self._clock()
        lines = self.lines(now)
        if not lines:
            hint = f" Add one: `/gpu warm {warm.EXAMPLE}`" if self._policy.is_admin(actor) else ""
            return f"No warm schedules: the pools scale from zero on demand.{hint}"
        return "\n".join(["*Warm schedules*", *lines])

    def lines(self, now: datetime) -> list[str]:
        """The schedules as `/gpu warm` and `/gpu status` show them, numbered as `remove N` takes them."""
        configured, schedules = len(self._configured), self.schedules
        return [
            warm.schedule_line(n, s, now, self._prices.get(s.pool), configured=n <= configured)
            for n, s in enumerate(schedules, start=1)
        ]

    def _add(self, schedule: WarmSchedule) -> str:
        assert self._pools is not None
        try:
            view = self._pools.get_pool(schedule.pool)
        except errors.NotFound:
            return f"There is no pool named {schedule.pool} at {self._cloud_name()}; nothing was changed."
        except errors.GpubotError as err:
            return f"Could not read pool {schedule.pool} ({err}); nothing was changed. Try again shortly."
        self._prices[schedule.pool] = self._price(view)
        if any(s == schedule for s in self.schedules):
            return f"`{warm.describe(schedule)}` is already a warm schedule; nothing was changed."
        outcome = self._write(lambda found: [*found, schedule])
        if outcome:
            return outcome
        line = warm.schedule_line(
            len(self.schedules) + 1, schedule, self._clock(), self._prices[schedule.pool], configured=False
        )
        capped = (
            f"\n:warning: {schedule.pool} can have at most {view.max_size} nodes, so {view.max_size} "
            f"stay warm. Fix: `gpubot pool set {schedule.pool} --max {schedule.min_nodes}`"
            if schedule.min_nodes > view.max_size
            else ""
        )
        return f"Added warm schedule {line}{capped}\nThe channel is told when it starts and stops."

    def _remove(self, number: int) -> str:
        schedules, configured = self.schedules, len(self._configured)
        if not 1 <= number <= len(schedules):
            return f"There is no warm schedule {number}; `/gpu warm` lists {len(schedules)}."
        if number <= configured:
            return (
                f"Schedule {number} is set in the bot's configuration (GPUBOT_WARM_SCHEDULES, the Helm value "
                "`warm.schedules`); change it there."
            )
        gone = schedules[number - 1]
        outcome = self._write(lambda found: [s for s in found if s != gone])
        if outcome:
            return outcome
        return f"Removed warm schedule `{warm.describe(gone)}`; its pool drains to zero when idle."

    def _write(self, edit: Callable[[list[WarmSchedule]], list[WarmSchedule]]) -> str:
        """Read, edit, write, guarded by the resourceVersion; the watch brings the result to every replica."""
        for _ in range(WRITE_ATTEMPTS):
            try:
                found = self._configs.read_config(self._configmap)
                stored, _ = warm.read_stored(found.data.get(warm.STORED_KEY, "") if found else "")
                data = {warm.STORED_KEY: warm.stored_text(edit(stored))}
                self._configs.write_config(self._configmap, data, version=found.version if found else None)
                return ""
            except errors.Conflict:
                continue  # someone else wrote it since our read: read again
            except errors.GpubotError as err:
                return (
                    f"Could not save the schedules in ConfigMap {self._configmap} ({err}); nothing changed."
                )
        return f"ConfigMap {self._configmap} kept changing under me; nothing changed. Try again."

    def _cloud_name(self) -> str:
        return self._cloud.value.upper() if self._cloud else "the cloud"
