"""Services: what people do with a lease once it exists: release it, extend it, keep it when idle-warned.

Each change is one merge patch of the pod's annotations, guarded by its resourceVersion, with its audit
record appended in the same patch. When another writer got in between, the pod is read again and the
change decided again, so two extensions never overwrite each other and the cap is checked against what
the pod says now; a pod whose delete is on record (the reaper's, or a release) or under way is too late to
extend or keep, which orders an extension and the reaper's delete (see `reaper.Reaper._reap`). Only the
owner or an admin may change a lease. A release also reaches runs still being started (their quota
reservations, `reservations.Ledger`) and cancels them.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Generic, Literal, TypeVar

from bot.core import errors, labels, models, notices, podspec, ports, quota, reaping, status, workloads
from bot.services import launcher, reservations

logger = logging.getLogger(__name__)

WRITE_ATTEMPTS = 3
"""Tries at one annotation change while other writes (kubelet status, the reaper) keep changing the pod."""

Result = TypeVar("Result")
Button = Literal["Release", "Extend", "Keep"]


@dataclass(frozen=True)
class Change(Generic[Result]):
    """Annotations to merge into one pod, the audit record that says why, and what the caller learns."""

    annotations: Mapping[str, str]
    entry: models.AuditEntry
    result: Result


def write_audited(
    cluster: ports.Cluster,
    workload: workloads.Workload,
    decide: Callable[[workloads.Workload], Change[Result] | models.UsageError],
) -> Change[Result] | models.UsageError | None:
    """Decide on the pod as last read, write it with the audit record; None once the pod is gone.

    Raises Conflict when the pod kept changing under every attempt.
    """
    current: workloads.Workload | None = workload
    for _ in range(WRITE_ATTEMPTS):
        if current is None or current.uid != workload.uid:
            return None  # gone (or replaced by a namesake): nothing of this pod to change
        decided = decide(current)
        if isinstance(decided, models.UsageError):
            return decided
        notes = {
            **decided.annotations,
            labels.AUDIT_ANNOTATION: podspec.append_audit(current.audit, decided.entry),
        }
        try:
            cluster.annotate_pod(
                current.namespace, current.name, notes, resource_version=current.resource_version
            )
            return decided
        except errors.NotFound:
            return None
        except errors.Conflict:
            current = cluster.get_workload(workload.namespace, workload.name)
    raise errors.Conflict(f"{workload.key} kept changing; nothing was written")


def made_into(run: quota.Reservation, pods: list[workloads.Workload]) -> bool:
    """The run still starting has its pod among these (by its name, or by the request the pod records)."""
    key = podspec.request_key(run.request_id)
    return any(w.name == run.pod or (key and w.request == key) for w in pods)


def too_late(workload: workloads.Workload, verb: str = "extend") -> models.UsageError | None:
    """A pod whose delete is on record (the reaper's, or a release) or under way has no lease left to
    change: said as such, never "Extended". Decided on the pod as the guarded write reads it, so a delete
    recorded after an extension was read fails that write, and this answers the retry."""
    recorded = podspec.recorded_delete(workload.audit)
    if not (workload.deletion_requested or recorded):
        return None
    why = (
        "the reaper is deleting it"
        if recorded and recorded.get("action") == "reap"
        else "it is being released"
    )
    return models.UsageError(
        f"Too late to {verb} `{workload.name}`: {why}, so its lease is over. "
        "A new `/gpu run` starts a fresh one.",
        "/gpu status",
    )


class Leases:
    def __init__(
        self,
        cluster: ports.Cluster,
        chat_port: ports.Chat,
        settings: launcher.LaunchSettings,
        *,
        clock: Callable[[], datetime],
        ledger: reservations.Ledger,
    ) -> None:
        """`ledger`: the runs still being started, so a release reaches them before their pods exist."""
        self._ledger = ledger
        self._cluster = cluster
        self._chat = chat_port
        self._settings = settings
        self._clock = clock

    # -- dispatch ------------------------------------------------------------------------------------
    def handle(self, command: models.ReleaseRequest | models.ExtendRequest, actor: str, channel: str) -> None:
        """The slow half of `/gpu release` and `/gpu extend`."""
        with launcher.failures_told(self._chat, channel, actor, f"/gpu {type(command).__name__}"):
            if isinstance(command, models.ReleaseRequest):
                self.release(command, actor, channel)
            else:
                self.extend(command, actor, channel)

    def press(self, button: Button, key: str, actor: str, channel: str, *, asked: bool = False) -> None:
        """The Release, Extend (the default lease's hours more) or Keep button, as whoever pressed it;
        `asked`: "Keep 30 min" in a DM asking for the GPU. Every button's value is the workload's
        `namespace/name`."""
        name = self.button_target(key, actor, channel)
        if name is None:
            return
        with launcher.failures_told(self._chat, channel, actor, f"the {button} button"):
            if button == "Release":
                self.release(models.ReleaseRequest(name=name), actor, channel)
            elif button == "Extend":
                self.extend(models.ExtendRequest(name=name), actor, channel)
            else:
                self.keep(name, actor, channel, asked=asked)

    def button_target(self, key: str, actor: str, channel: str) -> str | None:
        """The workload a button names, or None after telling the clicker that it names none: a value
        that is not `namespace/name` never came from gpubot's own buttons."""
        name = workloads.name_in_key(key)
        if name is None:
            logger.warning("refused a click by %s whose value %r names no workload", actor, key[:80])
            self._tell(channel, actor, "That button does not name a gpubot workload; nothing was changed.")
        return name

    # -- /gpu release ------------------------------------------------------------------------------
    def release(self, request: models.ReleaseRequest, actor: str, channel: str) -> None:
        """Delete the named, only, or all of the actor's workloads, and cancel those still being started."""
        targets, cancelled = self._release_targets(request, actor, channel)
        for going in [w for w in targets if w.deletion_requested]:  # a second press, or a slow Slack
            self._tell(channel, actor, f"`{going.name}` is being released already.")
        targets = [w for w in targets if not w.deletion_requested]
        allowed = [w for w in targets if self.may_act(w, actor, channel, "release")]
        for workload in allowed:
            self._delete(workload, actor)
        if allowed:
            names = ", ".join(f"`{w.name}`" for w in allowed)
            stopping = "Its pod is stopping" if len(allowed) == 1 else "Their pods are stopping"
            self._tell(channel, actor, f"Released {names}. {stopping}; the thread says when the GPU is back.")
        for name in cancelled:
            what = f"`{name}`" if name else "your run"
            self._tell(channel, actor, f"Released {what} while it was still being started: no pod will run.")

    def _release_targets(
        self, request: models.ReleaseRequest, actor: str, channel: str
    ) -> tuple[list[workloads.Workload], list[str]]:
        """The pods to release, and the names of runs still starting that were cancelled instead. Pods are
        read after the cancel marks: a run whose pod came in between is released as a pod."""
        now = self._clock()
        starting = quota.starting_named(self._ledger.held(now), name=request.name or "", owner=actor, now=now)
        if request.name:
            if self._cancel(starting, actor, channel):  # its pod, if made since, is released as a pod
                found = self._cluster.get_workload(self._settings.namespace, request.name)
                return ([found], []) if found is not None else ([], [request.name])
            found = self.find(request.name, actor, channel)
            return ([found] if found is not None else []), []
        mine = [w for w in self._cluster.list_workloads(actor) if not w.deletion_requested]
        starting = [r for r in starting if not made_into(r, mine)]
        if not mine and not starting:
            self._tell(channel, actor, "You have no workloads to release. `/gpu status` shows the pool.")
            return [], []
        if len(mine) + len(starting) > 1 and not request.everything:
            names = [f"`{w.name}`" for w in mine] + [
                f"`{r.pod}` (starting)" if r.pod else "one starting" for r in starting
            ]
            count = len(names)
            self._tell(
                channel, actor, f"You have {count} workloads ({', '.join(names)}). Try: `/gpu release all`"
            )
            return [], []
        cancelled = self._cancel(starting, actor, channel)
        if cancelled:
            mine = [w for w in self._cluster.list_workloads(actor) if not w.deletion_requested]
        return mine, [r.pod for r in cancelled if not made_into(r, mine)]

    def _cancel(self, starting: list[quota.Reservation], actor: str, channel: str) -> list[quota.Reservation]:
        """Mark each run still starting that the actor may release; the runs read the mark themselves."""
        cancelled = []
        for run in starting:
            if run.owner_id != actor and not self._settings.policy.is_admin(actor):
                name = f"`{run.pod}`" if run.pod else "That run"
                self._tell(
                    channel,
                    actor,
                    f"{name} belongs to {run.owner_id}; only its owner or an admin may release it. "
                    "Try: `/gpu status`",
                )
            elif self._ledger.cancel(run, actor):
                cancelled.append(run)
        return cancelled

    def _delete(self, workload: workloads.Workload, actor: str) -> None:
        entry = podspec.release_audit_entry(actor, owner_id=workload.owner_id, now=self._clock())
        try:
            write_audited(self._cluster, workload, lambda current: Change({}, entry, None))
        except errors.Conflict:  # the delete matters more than its record on the pod; the log keeps it
            logger.warning("release of %s not recorded on the pod: it kept changing", workload.key)
        with contextlib.suppress(errors.NotFound, errors.Conflict):  # gone (maybe a namesake in its place)
            self._cluster.delete_pod(workload.namespace, workload.name, uid=workload.uid)
        launcher.log_audit(entry, workload.key)
        if actor != workload.owner_id:  # the owner hears it: their own release needs no notification
            text = f"Released by {status.actor_phrase(workload.owner_id, actor)}; deleting the pod."
            self._say_in_thread(workload, text, mention=workload.owner_id)

    # -- /gpu extend -------------------------------------------------------------------------------
    def extend(self, request: models.ExtendRequest, actor: str, channel: str) -> None:
        """Push the named (or the actor's only live) workload's lease end."""
        target = self._extend_target(request, actor, channel)
        if target is None or not self.may_act(target, actor, channel, "extend"):
            return
        now = self._clock()
        written = write_audited(
            self._cluster, target, lambda current: self._extension(current, request.hours, actor, now)
        )
        if written is None:
            self._tell(channel, actor, f"`{target.name}` is gone already; there is no lease to extend.")
            return
        if isinstance(written, models.UsageError):
            self._tell(channel, actor, written.message)
            return
        extension = written.result
        launcher.log_audit(written.entry, target.key)
        self._tell(
            channel,
            actor,
            f"Extended `{target.name}` by {extension.hours:g}h: "
            f"the lease now ends {notices.clock_time(extension.lease_end)}.",
        )
        self._say_in_thread(
            target,
            f"Extended by {status.actor_phrase(target.owner_id, actor)} (+{extension.hours:g}h): "
            f"the lease now ends {notices.clock_time(extension.lease_end)}.",
        )

    def _extension(
        self, workload: workloads.Workload, hours: float | None, actor: str, now: datetime
    ) -> Change[reaping.Extension] | models.UsageError:
        """The new lease end for the pod as it is now; extending also answers an idle warning."""
        late = too_late(workload)
        if late is not None:
            return late
        decided = reaping.extend(
            workload.lease_end,
            workload.requested_at,
            hours,
            now,
            self._settings.reaper,
            self._settings.policy.default_lease_hours,
        )
        if isinstance(decided, models.UsageError):
            return replace(decided, suggestion=decided.suggestion.replace("NAME", workload.name))
        extension = replace(decided, lease_end=decided.lease_end.replace(microsecond=0))
        notes = podspec.lease_annotations(
            requested_at=workload.requested_at or now, lease_end=extension.lease_end
        )
        if workload.marks.idle_warned_at is not None:
            notes[labels.IDLE_WARNED_AT_ANNOTATION] = ""  # read back as "no warning"
        entry = podspec.extension_audit_entry(
            actor, hours=extension.hours, lease_end=extension.lease_end, now=now
        )
        return Change(notes, entry, extension)

    def _extend_target(
        self, request: models.ExtendRequest, actor: str, channel: str
    ) -> workloads.Workload | None:
        if request.name:
            found = self.find(request.name, actor, channel)
            return found if found is not None and self._still_live(found, actor, channel) else None
        mine = [w for w in self._cluster.list_workloads(actor) if launcher.is_live(w)]
        if len(mine) == 1:
            return mine[0]
        if not mine:
            self._tell(channel, actor, "You have no running workloads to extend. Try: `/gpu status`")
        else:
            names = ", ".join(f"`{w.name}`" for w in mine)
            hours = f" {request.hours:g}" if request.hours is not None else ""
            self._tell(
                channel,
                actor,
                f"You have {len(mine)} workloads ({names}); say which. "
                f"Try: `/gpu extend {mine[0].name}{hours}`",
            )
        return None

    # -- the Keep button ---------------------------------------------------------------------------
    def keep(self, name: str, actor: str, channel: str, *, asked: bool = False) -> None:
        """The owner answers an idle warning: no idle release for one more idle window, or for
        `reaping.ASKED_KEEP` when someone waiting asked for the GPU."""
        found = self.find(name, actor, channel)
        if found is None or not self._still_live(found, actor, channel, verb="keep"):
            return
        if not self.may_act(found, actor, channel, "keep"):
            return
        now = self._clock()
        span = reaping.ASKED_KEEP if asked else self._settings.reaper.idle_window
        until = (now + span).replace(microsecond=0)
        entry = podspec.keep_audit_entry(actor, kept_until=until, now=now)
        notes = {labels.KEPT_UNTIL_ANNOTATION: podspec.format_time(until)}
        kept = write_audited(
            self._cluster, found, lambda current: too_late(current, "keep") or Change(notes, entry, until)
        )
        if kept is None:
            self._tell(channel, actor, f"`{found.name}` is gone already; there is nothing to keep.")
            return
        if isinstance(kept, models.UsageError):
            self._tell(channel, actor, kept.message)
            return
        launcher.log_audit(entry, found.key)
        said = f"no idle release before {notices.clock_time(until)}"
        self._say_in_thread(found, f"Kept by {status.actor_phrase(found.owner_id, actor)}: {said}.")
        if channel != found.channel:  # pressed in a DM: the thread is elsewhere, so answer here too
            self._tell(channel, actor, f"Kept `{found.name}`: {said}.")

    # -- shared ------------------------------------------------------------------------------------
    def find(self, name: str, actor: str, channel: str) -> workloads.Workload | None:
        """The named workload, or None after telling the actor there is none."""
        found = self._cluster.get_workload(self._settings.namespace, name)
        if found is None:
            self._tell(channel, actor, f"There is no gpubot workload `{name}`. Try: `/gpu status`")
        return found

    def _still_live(
        self, workload: workloads.Workload, actor: str, channel: str, *, verb: str = "extend"
    ) -> bool:
        if launcher.is_live(workload):
            return True
        state = "is being released" if workload.deletion_requested else "has finished"
        self._tell(
            channel,
            actor,
            f"`{workload.name}` {state}, so there is no lease to {verb}. "
            "A new `/gpu run` starts a fresh one. Try: `/gpu status`",
        )
        return False

    def may_act(
        self, workload: workloads.Workload, actor: str, channel: str, verb: str, *, what: str = "it"
    ) -> bool:
        """The owner or an admin may; anyone else is told whose it is, and nothing happens."""
        if workload.owner_id == actor or self._settings.policy.is_admin(actor):
            return True
        self._tell(
            channel,
            actor,
            f"`{workload.name}` belongs to {workload.requester_name or workload.owner_id}; "
            f"only its owner or an admin may {verb} {what}. Try: `/gpu status`",
        )
        return False

    def _say_in_thread(self, workload: workloads.Workload, text: str, *, mention: str = "") -> None:
        if workload.channel and workload.thread_ts:
            self._chat.reply(workload.channel, workload.thread_ts, notices.Reply(text, mention=mention))

    def _tell(self, channel: str, user: str, text: str) -> None:
        self._chat.ephemeral(channel, user, notices.Ephemeral(text))
