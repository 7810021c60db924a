"""Services: the idle reaper, one round per timer tick on the leading replica.

It reads the workloads the tracker's informers hold (no extra API calls), asks the metrics store which
GPUs sat idle, and lets `reaping.decide` pick at most one act per workload. A round first does what the
cluster must do, none of it waiting on Slack, and only then tells people: no Slack error or outage can
keep a GPU alive past its lease.

Every act that speaks is claimed on the pod first (the telling-since annotation, guarded by its
resourceVersion): a second replica, or a round that overlaps a leadership change, meets a Conflict and
says nothing. A delete is then journaled to be told (`tellings.Journal`), recorded on the pod (the audit
record, which clears the claim) and carried out; its message is delivered after the round's acts, in its
thread, else by DM to the owner, else recorded as undeliverable, and dropped from the journal once one of
those happened. A reminder is delivered the same way and only then marked done on the pod. So a bot killed
mid-act leaves a claim that goes void after the policy's timeout and the act is done again, once, or a
journaled telling its restart delivers: nothing is lost to a crash, and said twice only if the crash falls
between Slack's answer and the mark (or the journal's drop). A delete whose record is on the pod but
whose delete never came is finished quietly (`FINISH_DELETE`), for the reaper's deletes and releases alike.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from bot.core import (
    connect,
    errors,
    idleness,
    labels,
    models,
    notebooks,
    notices,
    podspec,
    ports,
    reaping,
    reminders,
    status,
    workloads,
)
from bot.services import tellings
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
EVIDENCE = labels.IDLE_EVIDENCE_ANNOTATION
DELETE_ATTEMPTS = 3
"""Tries at a delete on record while the kubelet keeps changing the pod (each a Conflict of its own)."""
MARKS: dict[Act, str] = {
    Act.REMIND: labels.REMINDED_FOR_ANNOTATION,
    Act.NUDGE: labels.NUDGED_FOR_ANNOTATION,
    Act.IDLE_WARN: labels.IDLE_WARNED_AT_ANNOTATION,
    Act.IDLE_CLEAR: labels.IDLE_WARNED_AT_ANNOTATION,
}
TELL_WAIT_SECONDS = 10.0
"""How long one message waits for Slack within a round (the outbox retries inside it). Shorter than the
outbox's minute: after the first message Slack could not take, the round leaves the rest to the next."""


@dataclass(frozen=True)
class Notebooks:
    """Where notebooks show activity besides their GPU: read before one is called idle."""

    reader: ports.NotebookActivity
    profiles: frozenset[str]
    """The profiles with `activity: jupyter`."""
    url_of: Callable[[str], str]
    """The URL with its token a workload's output showed (the tracker's, by workload key); "" if none yet."""


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
        chat_port: ports.Chat,
        policy: reaping.ReaperPolicy,
        *,
        namespace: str,
        live_workloads: Callable[[], Iterable[workloads.Workload]],
        clock: Callable[[], datetime],
        store: ports.Store | None = None,
        metrics: ports.GpuMetrics | None = None,
        telemetry: ports.Telemetry = ports.NO_TELEMETRY,
        replica: str = "",
        tell_wait_seconds: float = TELL_WAIT_SECONDS,
        start_errors: Callable[[str], str] | None = None,
        notebooks_seen: Notebooks | None = None,
    ) -> None:
        """`live_workloads`: gpubot's pods as the informers hold them now (the tracker's view);
        `replica` names this replica in the journal of deletes not yet told; `start_errors` gives the
        cluster's newest message about a workload's failing start (from the events the tracker saw);
        `notebooks_seen` reads a notebook's Jupyter before it is called idle."""
        self._telemetry = telemetry
        self._cluster = cluster
        self._chat = chat_port
        self._policy = policy
        self._namespace = namespace
        self._live_workloads = live_workloads
        self._clock = clock
        self._store = store
        self._metrics = metrics
        self._start_errors = start_errors
        self._notebooks = notebooks_seen
        self._verdicts: dict[str, notebooks.Verdict] = {}
        """This round's idle verdicts by workload key: what its words say it was judged on."""
        self._teller = tellings.Teller(chat_port, wait_seconds=tell_wait_seconds, telemetry=telemetry)
        self._journal = tellings.Journal(store, replica=replica)
        self._untold: dict[str, tellings.Telling] = {}
        """This replica's deletes not yet told, kept here too for when the store is down."""
        self._slack_waits = False
        """Set in a round once Slack could not take a message: the round's other messages wait too."""

    def run_once(self) -> list[Done]:
        """One round: the acts on the cluster first, then the messages (deletes told, reminders)."""
        now = self._clock()
        found = list(self._live_workloads())
        self._verdicts = self._idleness(found, now)
        idle = {w.name for w in found if (v := self._verdicts.get(w.key)) is not None and v.idle}
        self._slack_waits = False
        due = [
            (w, act) for w in found if (act := reaping.decide(self._candidate(w, idle), now, self._policy))
        ]
        speaking = [(w, act) for w, act in due if self._speaks(act)]
        done = [self._done(w, act) for w, act in due if not self._speaks(act) and self._perform(act, w, now)]
        self._tell_deletes(found, now)
        for workload, act in speaking:
            if self._slack_waits:
                break  # Slack could not take the last one; this round's other messages wait for the next
            if self._remind(act, workload, now):
                done.append(self._done(workload, act))
        return done

    def _candidate(self, workload: workloads.Workload, idle: set[str]) -> reaping.Candidate:
        return reaping.Candidate(
            lease_end=workload.lease_end,
            finished_at=workload.finished_at,
            terminating=workload.deletion_requested,
            marks=workload.marks,
            idle=workload.name in idle,
            delete_recorded=podspec.delete_recorded(workload.audit),
            start=workload.start,
        )

    def _speaks(self, act: Act) -> bool:
        """Only speaks (a reminder): delivered after the round's acts. A dry run only speaks, at once."""
        return act in reaping.SPEAKING and not self._policy.dry_run

    def _done(self, workload: workloads.Workload, act: Act) -> Done:
        self._telemetry.count_reaper_act(act.value, dry_run=self._policy.dry_run)
        return Done(workload.key, act, self._policy.dry_run)

    # -- idleness --------------------------------------------------------------------------------
    def _idleness(self, found: list[workloads.Workload], now: datetime) -> dict[str, notebooks.Verdict]:
        """A verdict for each workload whose GPU sat idle; a notebook's Jupyter is read only then."""
        gpu_idle = self._idle_pods(found, now)
        return {w.key: self._judge(w, now) for w in found if w.name in gpu_idle}

    def _judge(self, workload: workloads.Workload, now: datetime) -> notebooks.Verdict:
        seen = self._notebooks
        if seen is None or workload.profile not in seen.profiles:
            return notebooks.Verdict(True)
        port, token = connect.server_of(seen.url_of(workload.key))
        reading: notebooks.Reading = (
            seen.reader.jupyter_activity(workload.namespace, workload.name, port=port, token=token)
            if token
            else notebooks.Unread("gpubot has not seen its login token in its log")
        )
        verdict = notebooks.judge(True, reading, window=self._policy.idle_window, now=now)
        if verdict.evidence is notebooks.Evidence.GPU_UNREAD:
            logger.info("%s: GPU idle, Jupyter not read (%s)", workload.key, verdict.why_unread)
        return verdict

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
        """An act on the cluster, waiting on nothing but the cluster; a delete's message is journaled."""
        if self._policy.dry_run:
            return self._pretend(act, workload)
        if act is Act.FINISH_DELETE:
            logger.info("%s: its release was recorded but not carried out; deleting it now", workload.key)
            return self._delete(act, workload)
        if act is Act.IDLE_CLEAR:
            return bool(self._annotate(workload, {MARKS[act]: "", EVIDENCE: ""}, act, guarded=True))
        return self._reap(act, workload, now)

    def _reap(self, act: Act, workload: workloads.Workload, now: datetime) -> bool:
        """Claim, journal its message, record, delete: on time, whatever Slack says.

        Each step is guarded by the resourceVersion the step before left, from the state the act was decided
        on: an extension (or a Keep) written in between fails the next step with a Conflict, and the next
        round decides again on the new lease. Once the delete is recorded, an extension is refused instead
        (`leases.too_late`), so the owner's answer and the pod's fate always agree."""
        claimed = self._annotate(workload, {CLAIM: podspec.format_time(now)}, act, guarded=True)
        if not claimed:
            return False
        start_error = self._start_errors(workload.key) if self._start_errors else ""
        message = reminders.message(
            act,
            workload,
            now,
            self._policy,
            start_error=start_error,
            idleness=self._verdicts.get(workload.key),
        )
        telling = tellings.Telling(
            tellings.telling_key(workload.uid, act.value),
            tellings.Target.of(act.value, workload),
            message.text,
            self._journal.replica,
            now,
        )
        self._journal.keep(telling)  # first: a kill from here on still tells it, after the restart
        entry = models.AuditEntry("reap", REAPER_ACTOR, now, (("reason", act.value),))
        recorded = self._record(workload, entry, version=claimed)
        if not recorded:  # changed since the claim (an extension?): nothing happened, decide again
            self._annotate(workload, {CLAIM: ""}, act)
            self._journal.drop(telling)
            return False
        self._delete(act, replace(workload, resource_version=recorded))
        self._untold[telling.key] = telling
        return True

    def _remind(self, act: Act, workload: workloads.Workload, now: datetime) -> bool:
        """Claim, deliver (thread, else DM), mark done; a Slack that cannot take it now frees the claim."""
        if not self._annotate(workload, {CLAIM: podspec.format_time(now)}, act, guarded=True):
            return False
        verdict = self._verdicts.get(workload.key)
        message = reminders.message(act, workload, now, self._policy, idleness=verdict)
        delivery = self._teller.deliver(message, tellings.Target.of(act.value, workload))
        if delivery.outcome is tellings.Outcome.LATER:
            self._slack_waits = True
            self._annotate(workload, {CLAIM: ""}, act)  # nothing went out: the next round tries again
            return False
        marked = now if act is Act.IDLE_WARN else workload.lease_end or now  # a reminder's is its lease end
        marks = {MARKS[act]: podspec.format_time(marked), CLAIM: ""}
        if act is Act.IDLE_WARN:
            marks[EVIDENCE] = notebooks.mark(verdict or notebooks.Verdict(True))
        self._annotate(workload, marks, act)
        if delivery.outcome is tellings.Outcome.THREAD and workload.owner_id:
            self._chat.dm(workload.owner_id, replace(message, thread_channel=workload.channel))
        return True

    def _tell_deletes(self, found: list[workloads.Workload], now: datetime) -> None:
        """Deliver the deletes not yet told: this round's, this replica's earlier ones, a gone replica's."""
        pending = list(self._untold.values()) + self._journal.due(now, besides=set(self._untold))
        for telling in pending:
            if self._slack_waits:
                return
            if telling.key not in self._untold and not_done(telling, found):
                logger.info(
                    "%s: its %s was not carried out; not telling it",
                    telling.target.workload,
                    telling.target.act,
                )
                self._journal.drop(telling)
                continue
            delivery = self._teller.deliver(
                telling.notice, telling.target, thread_refused=telling.thread_refused
            )
            if delivery.outcome is tellings.Outcome.LATER:
                self._slack_waits = True
                kept = replace(telling, tried_at=now, thread_refused=delivery.thread_refused)
                self._untold[kept.key] = kept
                self._journal.keep(kept)
                return
            self._untold.pop(telling.key, None)
            self._journal.drop(telling)

    def _annotate(
        self, workload: workloads.Workload, notes: dict[str, str], act: Act, *, guarded: bool = False
    ) -> str:
        """One merge patch; `guarded` only if the pod is as we last saw it, the one guard against repeats.
        The pod's resourceVersion after it, or "" when nothing was written."""
        try:
            return self._cluster.annotate_pod(
                workload.namespace,
                workload.name,
                notes,
                resource_version=workload.resource_version if guarded else "",
            )
        except (errors.Conflict, errors.NotFound):
            logger.info("%s changed before its %s; next round decides again", workload.key, act.value)
        except errors.GpubotError as err:
            logger.warning("could not write %s's %s: %s", workload.key, act.value, err)
        return ""

    def _delete(self, act: Act, workload: workloads.Workload) -> bool:
        """Delete the pod as it was when the delete was decided (its uid and resourceVersion). Changed since
        (the kubelet's status), it is read again and deleted if its delete is still the newest record: no
        extension can come after that record (`leases.too_late`), so nothing can have undone the decision."""
        current: workloads.Workload | None = workload
        for _ in range(DELETE_ATTEMPTS):
            if current is None or current.uid != workload.uid or current.deletion_requested:
                return False
            try:
                self._cluster.delete_pod(
                    current.namespace,
                    current.name,
                    uid=current.uid,
                    resource_version=current.resource_version,
                )
                return True
            except errors.NotFound:
                return False
            except errors.Conflict:  # changed since (or its name taken by another pod): decide again
                current = self._cluster.get_workload(workload.namespace, workload.name)
                if current is not None and not podspec.delete_recorded(current.audit):
                    logger.info("%s changed before its %s's delete; not deleting it", workload.key, act.value)
                    return False
            except errors.GpubotError as err:
                logger.warning("could not delete %s (%s): %s", workload.key, act.value, err)
                return False
        return False

    def _record(self, workload: workloads.Workload, entry: models.AuditEntry, *, version: str) -> str:
        """The reap's audit record, clearing the claim in the same patch, if the pod is still as claimed
        (`version`): all it needs then is its delete. The resourceVersion after it, or "" if not written."""
        notes = {CLAIM: "", labels.AUDIT_ANNOTATION: podspec.append_audit(workload.audit, entry)}
        try:
            written = self._cluster.annotate_pod(
                workload.namespace, workload.name, notes, resource_version=version
            )
        except (errors.Conflict, errors.NotFound):
            logger.info("%s changed since its reap was claimed; next round decides again", workload.key)
            return ""
        except errors.GpubotError as err:
            logger.info("reap of %s not recorded on the pod: %s", workload.key, err)
            return ""
        log_audit(entry, workload.key)
        return written

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


def not_done(telling: tellings.Telling, found: list[workloads.Workload]) -> bool:
    """A journaled delete whose pod is still here, neither going nor with a delete on record: the bot was
    killed between journaling it and acting. The act will be decided again, and told then."""
    return any(
        w.uid == telling.uid and not w.deletion_requested and not podspec.delete_recorded(w.audit)
        for w in found
    )


def live_from(
    tracker_threads: Callable[[], dict[str, status.Thread]],
) -> Callable[[], list[workloads.Workload]]:
    """The tracker's threads as the reaper's workload source."""
    return lambda: [thread.workload for thread in tracker_threads().values()]
