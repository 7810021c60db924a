"""Services: the idle reaper, one round per timer tick on the leading replica.

It reads the workloads the tracker's informers hold (no extra API calls), asks the metrics store which
GPUs sat idle, and lets `reaping.decide` pick at most one act per workload. A reminder's mark is written
on the pod first, guarded by its resourceVersion, and only then posted: a second replica (or a round
that overlaps a leadership change) meets a Conflict and says nothing, so no owner is reminded twice.
Deletes are recorded in the pod's audit annotation and the audit log; a delete claims the pod's uid in
the store first, so its thread message is posted once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from bot.core import errors, idleness, labels, models, notices, podspec, ports, reaping, reminders, workloads
from bot.services import chat, leases, status
from bot.services.launcher import log_audit

logger = logging.getLogger(__name__)

Act = reaping.Act
REAPER_ACTOR = "gpubot"
"""Who the audit trail names for the reaper's own deletes."""
SCRAPE_INTERVAL = timedelta(seconds=15)
"""The DCGM exporter's usual scrape interval, for how many samples a window must hold."""
CLAIM_SECONDS = 24 * 3600
MARKS: dict[Act, str] = {
    Act.REMIND: labels.REMINDED_FOR_ANNOTATION,
    Act.NUDGE: labels.NUDGED_FOR_ANNOTATION,
    Act.IDLE_WARN: labels.IDLE_WARNED_AT_ANNOTATION,
    Act.IDLE_CLEAR: labels.IDLE_WARNED_AT_ANNOTATION,
}


@dataclass(frozen=True)
class Done:
    """One act of a round, for logs and tests."""

    workload: str
    act: Act
    dry_run: bool = False


class Reaper:
    def __init__(
        self,
        cluster: ports.Cluster,
        chat_port: chat.Chat,
        policy: reaping.ReaperPolicy,
        *,
        namespace: str,
        live_workloads: Callable[[], Iterable[workloads.Workload]],
        clock: Callable[[], datetime],
        store: ports.Store | None = None,
        metrics: ports.GpuMetrics | None = None,
        telemetry: ports.Telemetry = ports.NO_TELEMETRY,
    ) -> None:
        """`live_workloads`: gpubot's pods as the informers hold them now (the tracker's view)."""
        self._telemetry = telemetry
        self._cluster = cluster
        self._chat = chat_port
        self._policy = policy
        self._namespace = namespace
        self._live_workloads = live_workloads
        self._clock = clock
        self._store = store
        self._metrics = metrics

    def run_once(self) -> list[Done]:
        now = self._clock()
        found = list(self._live_workloads())
        idle = self._idle_pods(found, now)
        done = []
        for workload in found:
            candidate = reaping.Candidate(
                lease_end=workload.lease_end,
                finished_at=workload.finished_at,
                terminating=workload.deletion_requested,
                marks=workload.marks,
                idle=workload.name in idle,
            )
            act = reaping.decide(candidate, now, self._policy)
            if act is not None and self._perform(act, workload, now):
                done.append(Done(workload.key, act, self._policy.dry_run))
                self._telemetry.count_reaper_act(act.value, dry_run=self._policy.dry_run)
        return done

    # -- idleness --------------------------------------------------------------------------------
    def _idle_pods(self, found: list[workloads.Workload], now: datetime) -> set[str]:
        """Running pods whose GPU sat idle for the whole window; unknown counts as busy."""
        running = [w.name for w in found if w.phase == "Running" and not w.deletion_requested]
        if self._metrics is None or not running:
            return set()
        policy = self._policy
        try:
            seen = self._metrics.gpu_utilisation(self._namespace, running, window=policy.idle_window, at=now)
        except errors.GpubotError as err:
            logger.warning("GPU metrics unavailable (%s); treating every workload as busy", err)
            return set()
        return {
            name
            for name in running
            if idleness.is_idle(
                seen.get(name),
                threshold_percent=policy.idle_threshold_percent,
                window=policy.idle_window,
                scrape_interval=SCRAPE_INTERVAL,
                now=now,
            )
        }

    # -- acting ----------------------------------------------------------------------------------
    def _perform(self, act: Act, workload: workloads.Workload, now: datetime) -> bool:
        if self._policy.dry_run:
            return self._pretend(act, workload)
        if act in reaping.REAPING:
            return self._reap(act, workload, now)
        if not self._mark(act, workload, now):
            return False
        if act is not Act.IDLE_CLEAR:
            self._tell_owner(reminders.message(act, workload, now, self._policy), workload, dm=True)
        return True

    def _mark(self, act: Act, workload: workloads.Workload, now: datetime) -> bool:
        """Write the act's mark, only if the pod is as we last saw it: the one guard against repeats."""
        if act is Act.IDLE_CLEAR:
            value = ""
        elif act is Act.IDLE_WARN:
            value = podspec.format_time(now)
        else:
            value = podspec.format_time(workload.lease_end or now)
        try:
            self._cluster.annotate_pod(
                workload.namespace,
                workload.name,
                {MARKS[act]: value},
                resource_version=workload.resource_version,
            )
        except (errors.Conflict, errors.NotFound):
            logger.info("%s changed before its %s mark; next round decides again", workload.key, act.value)
            return False
        except errors.GpubotError as err:
            logger.warning("could not mark %s for %s: %s", workload.key, act.value, err)
            return False
        return True

    def _reap(self, act: Act, workload: workloads.Workload, now: datetime) -> bool:
        if self._store is not None and not self._store.claim(f"reaped:{workload.uid}", CLAIM_SECONDS):
            return False
        entry = models.AuditEntry(action="reap", actor=REAPER_ACTOR, at=now, detail=(("reason", act.value),))
        self._record(workload, entry)
        try:
            self._cluster.delete_pod(workload.namespace, workload.name)
        except errors.NotFound:
            return False
        except errors.GpubotError as err:
            logger.warning("could not delete %s (%s): %s", workload.key, act.value, err)
            return False
        log_audit(entry, workload.key)
        self._tell_owner(reminders.message(act, workload, now, self._policy), workload, dm=False)
        return True

    def _record(self, workload: workloads.Workload, entry: models.AuditEntry) -> None:
        try:
            leases.write_audited(self._cluster, workload, lambda current: leases.Change({}, entry, None))
        except errors.GpubotError as err:  # the log line still records it; the pod is going anyway
            logger.info("reap of %s not recorded on the pod: %s", workload.key, err)

    def _pretend(self, act: Act, workload: workloads.Workload) -> bool:
        """Dry run: say once per act and lease what would happen, change nothing."""
        said = f"dry-run:{workload.uid}:{act.value}:{workload.lease_end}:{workload.marks}"
        if self._store is not None and not self._store.claim(said, CLAIM_SECONDS):
            return False
        logger.info("dry run: would %s %s", act.value, workload.key)
        self._tell_owner(notices.Reminder(reminders.dry_run(act, workload), workload.key), workload, dm=False)
        return True

    def _tell_owner(self, reminder: notices.Reminder, workload: workloads.Workload, *, dm: bool) -> None:
        if workload.channel and workload.thread_ts:
            self._chat.reply(workload.channel, workload.thread_ts, reminder)
        if dm and workload.owner_id:
            self._chat.dm(workload.owner_id, replace(reminder, thread_channel=workload.channel))


def live_from(
    tracker_threads: Callable[[], dict[str, status.Thread]],
) -> Callable[[], list[workloads.Workload]]:
    """The tracker's threads as the reaper's workload source."""
    return lambda: [thread.workload for thread in tracker_threads().values()]
