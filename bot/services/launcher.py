"""Services: `/gpu run` and `/gpu status`, the slow half of each command (after the ack).

Each one reads the cluster through the `Cluster` port, asks the core, acts through the port, and tells the
user through the `Chat` port. Every run leaves an audit record: on the pod's audit annotation and as one
structured log line. What happens to a lease afterwards (release, extend, keep) is `leases.Leases`.

A run is journaled from its acceptance to its pod (`pending.Journal`), so one cut short by a crash is
carried out after the restart, and the pod records which Slack request asked for it, so a redelivery of
that request finds the pod and does nothing more, even when the store has forgotten its claim.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.core import (
    autoscaler_status,
    commands,
    errors,
    labels,
    models,
    notices,
    podsecurity,
    podspec,
    ports,
    quota,
    reaping,
    status,
    usage,
    workloads,
)
from bot.services import pending, recent, reservations

logger = logging.getLogger(__name__)
audit_logger = logging.getLogger("gpubot.audit")

UNTRACKED = (
    "Not started: gpubot cannot keep track of new runs right now (its store is down); nothing was made."
    " Try again in a minute."
)
"""A run refused as the store cannot journal it: started anyway, a restart before its pod would lose it."""


@dataclass(frozen=True)
class LaunchSettings:
    namespace: str
    profiles: Mapping[str, models.GpuProfile]
    default_profile: str
    policy: models.QuotaPolicy
    security: models.PodSecurity = field(default_factory=models.PodSecurity)
    reaper: reaping.ReaperPolicy = field(default_factory=reaping.ReaperPolicy)
    """The lease cap and idle window that extensions and Keep work within."""


def log_audit(entry: models.AuditEntry, workload: str) -> None:
    """One JSON line per run, release, extension or keep: who, what, when, and on which workload."""
    fields = {**podspec.audit_fields(entry), "workload": workload}
    audit_logger.info("audit %s", json.dumps(fields, sort_keys=True), extra={"audit": fields})


@contextlib.contextmanager
def failures_told(chat_port: ports.Chat, channel: str, user: str, what: str) -> Iterator[None]:
    """A cluster failure during `what` becomes an ephemeral to whoever asked, never a crash."""
    try:
        yield
    except errors.GpubotError as err:
        logger.exception("%s for %s failed", what, user)
        chat_port.ephemeral(channel, user, notices.Ephemeral(failure_text(err)))


def failure_text(err: errors.GpubotError) -> str:
    """What failed, in words that name the right service: Slack, or the cluster."""
    if isinstance(err, errors.ChatUnavailable):
        slack = f"Slack is not taking gpubot's messages right now ({err})"
        return f"That did not work: {slack}. Try again in a minute."
    if isinstance(err, errors.Unavailable):
        return f"That did not work: {err}. Try again in a minute."
    return f"That did not work: the cluster said {err}. Try again shortly."


def is_live(workload: workloads.Workload) -> bool:
    """Running or waiting, and not being deleted: it holds (or will hold) GPUs, and its lease can change."""
    return status.holds_gpu(workload) and not workload.deletion_requested


def held_gpus(owned: list[workloads.Workload]) -> int:
    """GPUs a user holds or waits for: what quota counts (finished or terminating pods hold none)."""
    return sum(w.gpus for w in owned if is_live(w))


def unreachable_text(why: errors.Why) -> str:
    """A run refused because its channel will not take the bot's thread: why, and how to fix it."""
    if why == "archived":
        return "This channel is archived, so I cannot follow a run in it. Nothing was started."
    where = (
        "I am not in this channel"
        if why == "not-member"
        else "I cannot post in this channel (a private channel I am not in?)"
    )
    return (
        f"{where}, so I cannot follow your run here; nothing was started. Invite me with "
        "`/invite @gpubot`, then run it again."
    )


def run_outcome(result: workloads.Workload | models.UsageError | None) -> ports.CommandOutcome:
    if isinstance(result, models.UsageError):
        return "refused"
    return "failed" if result is None else "ok"


class Launcher:
    def __init__(
        self,
        cluster: ports.Cluster,
        chat_port: ports.Chat,
        settings: LaunchSettings,
        *,
        clock: Callable[[], datetime],
        ledger: reservations.Ledger,
        store: ports.Store | None = None,
        telemetry: ports.Telemetry = ports.NO_TELEMETRY,
        replica: str = "",
        warm_lines: Callable[[datetime], list[str]] | None = None,
    ) -> None:
        """`store` holds each user's spend today, which `/gpu status` shows, and the runs in flight;
        `replica` names this replica in that journal; `ledger` holds the quota's reservations, shared by
        the replicas."""
        self._telemetry = telemetry
        self._cluster = cluster
        self._chat = chat_port
        self._settings = settings
        self._store = store
        self._clock = clock
        self.warm_lines = warm_lines
        """The warm schedules' lines for `/gpu status`, when there are warm schedules."""
        self._journal = pending.Journal(store, replica=replica)
        self._ledger = ledger

    # -- dispatch ------------------------------------------------------------------------------------
    def handle(
        self,
        command: models.RunRequest | models.StatusRequest,
        owner: models.Owner,
        channel: str,
        *,
        request_id: str = "",
        answer: ports.Answer | None = None,
    ) -> None:
        """The slow half of `/gpu run` and `/gpu status`, each counted once by how it ended.

        `request_id`: the Slack request's trigger id, which journals a run until its pod exists;
        `answer`: the asker's private answer where the bot cannot post (the command's response_url)."""
        if isinstance(command, models.RunRequest):
            accepted = self._journal.accept(request_id, command, owner, channel, self._clock())
            if accepted is None:
                self._refuse_untracked(channel, owner.user_id, answer)
                return
            self._carry_out(command, accepted, answer)
            return
        outcome: ports.CommandOutcome = "failed"  # stays so when the cluster fails on the way
        with failures_told(self._chat, channel, owner.user_id, "/gpu status"):
            self.status(command, owner.user_id, channel)
            outcome = "ok"
        self._telemetry.count_command("status", outcome)

    def resume(self, *, at_start: bool) -> int:
        """Carry out journaled runs a crash cut short: this replica's own at start, any gone replica's
        on the leader. Returns how many were taken up."""
        now = self._clock()
        due = self._journal.due(now, at_start=at_start)
        for accepted in due:
            parsed = commands.parse_gpu_command(accepted.text)
            if now - accepted.accepted_at > pending.TOO_OLD or not isinstance(parsed, models.RunRequest):
                self._journal.done(accepted)
                asked = f"`/gpu {accepted.text}` of {notices.clock_time(accepted.accepted_at)}"
                text = f"Your {asked} was cut short by a restart of gpubot; run it again if you need it."
                self._chat.ephemeral(accepted.channel, accepted.owner.user_id, notices.Ephemeral(text))
                continue
            logger.info("carrying out run %s, accepted by %s", accepted.request_id, accepted.replica)
            self._carry_out(parsed, accepted)
        return len(due)

    def _carry_out(
        self, request: models.RunRequest, accepted: pending.PendingRun, answer: ports.Answer | None = None
    ) -> None:
        outcome: ports.CommandOutcome = "failed"
        owner, channel = accepted.owner, accepted.channel
        try:
            with failures_told(self._chat, channel, owner.user_id, "/gpu run"):
                outcome = run_outcome(self._run(request, accepted, answer))
        finally:
            self._journal.done(accepted)
        self._telemetry.count_command("run", outcome)

    # -- /gpu run ----------------------------------------------------------------------------------
    def precheck(self, request: models.RunRequest) -> models.UsageError | None:
        """The refusal configuration alone gives (no cluster call), for the ack to say at once."""
        checked = self._check(request)
        return checked if isinstance(checked, models.UsageError) else None

    def _check(self, request: models.RunRequest) -> models.GpuProfile | models.UsageError:
        settings = self._settings
        return quota.check_request(
            request,
            profiles=settings.profiles,
            default_profile=settings.default_profile,
            policy=settings.policy,
        )

    def refused_at_once(self) -> None:
        """A run the ack refused (`precheck`): counted as refused, like one refused later."""
        self._telemetry.count_command("run", "refused")

    def _run(
        self, request: models.RunRequest, accepted: pending.PendingRun, answer: ports.Answer | None
    ) -> workloads.Workload | models.UsageError | None:
        """Quota check, thread root, pod: the refusal when policy says no (and an ephemeral saying why);
        None when the cluster would not create the pod (the thread says why). The GPUs are reserved, and
        the quota checked against the pods and the runs ahead; the reservation is kept until the pod
        exists or the run gave up, whatever happens in between."""
        owner = accepted.owner
        profile = self._check(request)
        if isinstance(profile, models.UsageError):
            return self._refuse(accepted.channel, owner.user_id, profile)
        request = quota.with_profile_defaults(request, profile)
        now = self._clock()
        key = accepted.request_id or uuid.uuid4().hex  # a request without a trigger id has none to name it by
        asked = quota.Reservation(key, owner.user_id, request.gpus, now, pod=request.name or "")
        reservation, held = self._ledger.reserve(asked, now)
        try:
            return self._reserved_run(request, profile, reservation, held, accepted, answer)
        finally:
            self._ledger.release(reservation)

    def _reserved_run(
        self,
        request: models.RunRequest,
        profile: models.GpuProfile,
        reservation: quota.Reservation,
        held: list[quota.Reservation],
        accepted: pending.PendingRun,
        answer: ports.Answer | None,
    ) -> workloads.Workload | models.UsageError | None:
        owner, channel = accepted.owner, accepted.channel
        owned = self._cluster.list_workloads(owner.user_id)  # read after reserving: see `in_flight_gpus`
        key = podspec.request_key(accepted.request_id)
        made = next((w for w in owned if key and w.request == key), None)
        if made is not None:
            logger.info("%s exists for this request already: Slack delivered it again", made.key)
            return made
        starting = quota.in_flight_gpus(
            held, mine=reservation, pods={w.name for w in owned}, now=reservation.at
        )
        refused = quota.check_quota(request, held_gpus(owned), self._settings.policy, starting=starting)
        if refused is not None:
            return self._refuse(channel, owner.user_id, refused)
        if by := self._ledger.cancelled_by(reservation):
            self._cancelled(owner, channel, accepted.thread_ts, by)
            return None
        thread_ts = accepted.thread_ts
        if not thread_ts:
            asked = notices.format_gpus(request.gpus, profile.name)
            who = owner.user_name or owner.user_id
            root = notices.Reply(f"{who} asked for {asked}: `{request.image}`. Following it here.")
            try:
                thread_ts = self._chat.post(channel, root)
            except errors.Unreachable as err:  # before any pod: a run nobody could follow is not started
                return self._refuse_unreachable(channel, owner.user_id, err, answer)
            self._journal.posted(accepted, thread_ts)
        name = podspec.pod_name(request, owner, channel=channel, thread_ts=thread_ts)
        reservation = self._ledger.name(reservation, name)
        if by := self._ledger.cancelled_by(reservation):
            self._cancelled(owner, channel, thread_ts, by)
            return None
        created = self._create(request, profile, owner, channel=channel, thread_ts=thread_ts, request_key=key)
        if created is not None and (by := self._ledger.cancelled_by(reservation)):
            self._withdraw(created, by)  # released while it was being made: no pod left behind
            return None
        return created

    def _refuse(self, channel: str, user: str, refusal: models.UsageError) -> models.UsageError:
        self._chat.ephemeral(channel, user, notices.Ephemeral(refusal.message))
        return refusal

    def _cancelled(self, owner: models.Owner, channel: str, thread_ts: str, by: str) -> None:
        """Released before its pod was made: the thread (if it has one) and an owner who did not cancel
        it are told that nothing was started."""
        logger.info("run for %s cancelled by %s before its pod was made", owner.user_id, by)
        who = status.actor_phrase(owner.user_id, by)
        text = f":no_entry_sign: Released by {who} before its pod was made; nothing was started."
        if thread_ts:
            self._chat.update(channel, thread_ts, notices.Reply(text))
        if by != owner.user_id:
            self._chat.ephemeral(channel, owner.user_id, notices.Ephemeral(text))

    def _withdraw(self, created: workloads.Workload, by: str) -> None:
        """Released between the check before the create and the create's answer: recorded as a release
        (so its thread says who released it) and deleted."""
        entry = podspec.release_audit_entry(by, owner_id=created.owner_id, now=self._clock())
        logger.info("%s was released while it was being made; deleting it", created.key)
        notes = {labels.AUDIT_ANNOTATION: podspec.append_audit(created.audit, entry)}
        with contextlib.suppress(errors.NotFound):
            self._cluster.annotate_pod(created.namespace, created.name, notes)
        with contextlib.suppress(errors.NotFound, errors.Conflict):  # gone, or released by the releaser too
            self._cluster.delete_pod(created.namespace, created.name, uid=created.uid)
        log_audit(entry, created.key)

    def _create(
        self,
        request: models.RunRequest,
        profile: models.GpuProfile,
        owner: models.Owner,
        *,
        channel: str,
        thread_ts: str,
        request_key: str = "",
    ) -> workloads.Workload | None:
        now = self._clock()
        manifest = podspec.build_pod(
            request,
            profile,
            owner,
            now=now,
            lease=timedelta(hours=quota.lease_hours(request, self._settings.policy)),
            channel=channel,
            thread_ts=thread_ts,
            namespace=self._settings.namespace,
            security=self._settings.security,
            request_key=request_key,
        )
        name = str(manifest["metadata"]["name"])
        try:
            created = self._create_pod(manifest, name, thread_ts)
        except errors.GpubotError as err:
            self._refuse_in_thread(channel, thread_ts, name, err, profile=profile)
            return None
        log_audit(podspec.run_audit_entry(request, owner, profile, now), created.key)
        recent.remember(self._store, owner.user_id, request.image)
        return created

    def _create_pod(self, manifest: Mapping[str, object], name: str, thread_ts: str) -> workloads.Workload:
        """Create; a Conflict with our own thread's pod (a run resumed after a restart) means it exists.

        Transient failures are retried once, in the cluster adapter (`kube_retry`: at most 4 tries within
        25 s); retrying here as well multiplied them to 12 tries and minutes of a user waiting."""
        try:
            return self._cluster.create_pod(manifest)
        except errors.Conflict:
            existing = self._cluster.get_workload(self._settings.namespace, name)
            if existing is not None and existing.thread_ts == thread_ts:
                return existing
            raise

    def _refuse_untracked(self, channel: str, user: str, answer: ports.Answer | None) -> None:
        """The store is down: a run it cannot journal would be lost to a restart before its pod exists."""
        logger.warning("run for %s in %s refused: the store cannot journal it", user, channel)
        if answer is None or not answer(UNTRACKED):
            self._chat.ephemeral(channel, user, notices.Ephemeral(UNTRACKED))
        self._telemetry.count_command("run", "refused")

    def _refuse_unreachable(
        self, channel: str, user: str, err: errors.Unreachable, answer: ports.Answer | None
    ) -> models.UsageError:
        refusal = models.UsageError(unreachable_text(err.why), "/invite @gpubot")
        logger.info("run in %s for %s refused: the channel refuses the bot (%s)", channel, user, err)
        if answer is None or not answer(refusal.message):
            self._chat.ephemeral(channel, user, notices.Ephemeral(refusal.message))  # refused too, mostly
        return refusal

    def _refuse_in_thread(
        self, channel: str, thread_ts: str, name: str, err: errors.GpubotError, *, profile: models.GpuProfile
    ) -> None:
        if isinstance(err, errors.Conflict):
            text = f"A workload named `{name}` exists already; pick another `--name`. Nothing was created."
        elif isinstance(err, errors.Forbidden) and podsecurity.is_refusal(err.message):
            text = podsecurity.explain_refusal(
                err.message, profile=profile, namespace=self._settings.namespace
            )
        elif isinstance(err, errors.Invalid):
            text = f"The cluster refused the pod: {err.message}. Nothing was created."
        else:
            text = f"The cluster could not be reached ({err}); nothing was created. Try again in a minute."
        logger.warning("run of %s failed: %s", name, err)
        self._chat.update(channel, thread_ts, notices.Reply(f":x: {text}"))

    # -- /gpu status -------------------------------------------------------------------------------
    def status(self, request: models.StatusRequest, user: str, channel: str) -> None:
        everything = self._cluster.list_workloads()
        shown = everything if request.everyone else [w for w in everything if w.owner_id == user]
        sizes = autoscaler_status.parse(self._cluster.read_autoscaler_status()).pool_sizes()
        pools = status.pool_views(
            self._cluster.list_nodes(), everything, sizes, profiles=self._settings.profiles.values()
        )
        waiting = [w for w in everything if status.holds_gpu(w) and not w.node]
        now = self._clock()
        today = self._store.amounts(usage.day_table(now.date())) if self._store else {}
        spent = None if today is None else sum(s.dollars for s in usage.read_day(today) if s.user == user)
        report = status.status_report(
            shown,
            pools,
            pending_gpus=sum(w.gpus for w in waiting if not w.held_by_kueue),
            queued_gpus=sum(w.gpus for w in waiting if w.held_by_kueue),
            everyone=request.everyone,
            now=now,
            spent_today=spent if self._store else None,
            spend_unknown=spent is None,
            warm_lines=self.warm_lines(now) if self.warm_lines else [],
            idle_window=self._settings.reaper.idle_window,
        )
        self._chat.ephemeral(channel, user, report)
