"""Services: the idle reaper, one round per timer tick on the leading replica.

It reads the workloads the tracker's informers hold (no extra API calls), asks the metrics store which
GPUs sat idle, and lets `reaping.decide` pick at most one act per workload. Every act that speaks is
claimed on the pod first (the telling-since annotation, guarded by its resourceVersion): a second replica,
or a round that overlaps a leadership change, meets a Conflict and says nothing. Then the thread message
is posted and waited for, and only then is the act marked done on the pod (the reminder's mark, or the
audit record a delete is preceded by). So a bot killed mid-act leaves a claim that goes void after the
policy's timeout, and the act is done again, once: a reminder is never lost to a crash, and sent twice
only if the crash falls between Slack's answer and the mark. A delete whose record is on the pod but
whose delete never came is finished quietly (`FINISH_DELETE`), for the reaper's deletes and releases alike.
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
"""How long a dry run remembers it said what it would do."""
CLAIM = labels.TELLING_SINCE_ANNOTATION
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
                delete_recorded=podspec.delete_recorded(workload.audit),
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
        if act is Act.FINISH_DELETE:
            logger.info("%s: its release was recorded but not carried out; deleting it now", workload.key)
            return self._delete(act, workload)
        if act is Act.IDLE_CLEAR:
            return self._annotate(workload, {MARKS[act]: ""}, act, guarded=True)
        if not self._annotate(workload, {CLAIM: podspec.format_time(now)}, act, guarded=True):
            return False
        message = reminders.message(act, workload, now, self._policy)
        if not self._post_in_thread(message, workload):
            self._annotate(workload, {CLAIM: ""}, act)  # nothing went out: the next round tries again
            return False
        if act in reaping.REAPING:
            self._record(workload, models.AuditEntry("reap", REAPER_ACTOR, now, (("reason", act.value),)))
            return self._delete(act, workload)
        self._annotate(workload, {MARKS[act]: self._mark_value(act, workload, now), CLAIM: ""}, act)
        if workload.owner_id:
            self._chat.dm(workload.owner_id, replace(message, thread_channel=workload.channel))
        return True

    def _mark_value(self, act: Act, workload: workloads.Workload, now: datetime) -> str:
        return podspec.format_time(now if act is Act.IDLE_WARN else workload.lease_end or now)

    def _annotate(
        self, workload: workloads.Workload, notes: dict[str, str], act: Act, *, guarded: bool = False
    ) -> bool:
        """One merge patch; `guarded` only if the pod is as we last saw it, the one guard against repeats."""
        try:
            self._cluster.annotate_pod(
                workload.namespace,
                workload.name,
                notes,
                resource_version=workload.resource_version if guarded else "",
            )
        except (errors.Conflict, errors.NotFound):
            logger.info("%s changed before its %s; next round decides again", workload.key, act.value)
            return False
        except errors.GpubotError as err:
            logger.warning("could not write %s's %s: %s", workload.key, act.value, err)
            return False
        return True

    def _post_in_thread(self, message: notices.Reminder, workload: workloads.Workload) -> bool:
        """Post the act's message in the workload's thread and wait until Slack has it."""
        if not (workload.channel and workload.thread_ts):
            return True  # no thread to speak in: the DM (for reminders) is all there is
        try:
            self._chat.post(workload.channel, message, thread_ts=workload.thread_ts)
        except errors.GpubotError as err:
            logger.warning("could not post %s's reminder: %s", workload.key, err)
            return False
        return True

    def _delete(self, act: Act, workload: workloads.Workload) -> bool:
        try:
            self._cluster.delete_pod(workload.namespace, workload.name, uid=workload.uid)
        except (errors.NotFound, errors.Conflict):  # gone, or its name taken by another pod since
            return False
        except errors.GpubotError as err:
            logger.warning("could not delete %s (%s): %s", workload.key, act.value, err)
            return False
        return True

    def _record(self, workload: workloads.Workload, entry: models.AuditEntry) -> None:
        """The reap's audit record, clearing the claim in the same patch: all it needs now is its delete."""
        change = leases.Change({CLAIM: ""}, entry, None)
        try:
            leases.write_audited(self._cluster, workload, lambda current: change)
        except errors.GpubotError as err:  # the log line still records it; the pod is going anyway
            logger.info("reap of %s not recorded on the pod: %s", workload.key, err)
        log_audit(entry, workload.key)

    def _pretend(self, act: Act, workload: workloads.Workload) -> bool:
        """Dry run: say once per act and lease what would happen, change nothing."""
        said = f"dry-run:{workload.uid}:{act.value}:{workload.lease_end}:{workload.marks}"
        if self._store is not None and not self._store.claim(said, CLAIM_SECONDS):
            return False
        logger.info("dry run: would %s %s", act.value, workload.key)
        if workload.channel and workload.thread_ts:
            said_text = notices.Reminder(reminders.dry_run(act, workload), workload.key)
            self._chat.reply(workload.channel, workload.thread_ts, said_text)
        return True


def live_from(
    tracker_threads: Callable[[], dict[str, status.Thread]],
) -> Callable[[], list[workloads.Workload]]:
    """The tracker's threads as the reaper's workload source."""
    return lambda: [thread.workload for thread in tracker_threads().values()]
