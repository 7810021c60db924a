"""Services: `/gpu run`, `/gpu release` and `/gpu status`, the slow half of each command (after the ack).

Each one reads the cluster through the `Cluster` port, asks the core, acts through the port, and tells the
user through the `Chat` port. Every run and release leaves an audit record: on the pod's audit annotation
and as one structured log line.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.core import errors, labels, models, notices, podspec, ports, quota, workloads
from bot.services import chat, status

logger = logging.getLogger(__name__)
audit_logger = logging.getLogger("gpubot.audit")

CREATE_ATTEMPTS = 3
"""A create that failed for a transient reason is retried; a retry that meets its own pod gets a Conflict."""
AUDIT_ATTEMPTS = 3
"""Tries to append a release to the pod's audit annotation while other writes keep changing the pod."""


@dataclass(frozen=True)
class LaunchSettings:
    namespace: str
    profiles: Mapping[str, models.GpuProfile]
    default_profile: str
    policy: models.QuotaPolicy
    security: models.PodSecurity = field(default_factory=models.PodSecurity)


def log_audit(entry: models.AuditEntry, workload: str) -> None:
    """One JSON line per run or release: who, what, when, and on which workload."""
    fields = {**podspec.audit_fields(entry), "workload": workload}
    audit_logger.info("audit %s", json.dumps(fields, sort_keys=True), extra={"audit": fields})


def held_gpus(owned: list[workloads.Workload]) -> int:
    """GPUs a user holds or waits for: what quota counts (finished or terminating pods hold none)."""
    return sum(w.gpus for w in owned if status.holds_gpu(w) and not w.deletion_requested)


class Launcher:
    def __init__(
        self,
        cluster: ports.Cluster,
        chat_port: chat.Chat,
        settings: LaunchSettings,
        *,
        clock: Callable[[], datetime],
    ) -> None:
        self._cluster = cluster
        self._chat = chat_port
        self._settings = settings
        self._clock = clock

    # -- dispatch ------------------------------------------------------------------------------------
    def handle(self, command: models.GpuCommand, owner: models.Owner, channel: str) -> None:
        """The slow half of any `/gpu` command; a cluster failure becomes an ephemeral, never a crash."""
        try:
            if isinstance(command, models.RunRequest):
                self.run(command, owner, channel)
            elif isinstance(command, models.StatusRequest):
                self.status(command, owner.user_id, channel)
            elif isinstance(command, models.ReleaseRequest):
                self.release(command, owner.user_id, channel)
        except errors.GpubotError as err:
            logger.exception("/gpu %s for %s failed", type(command).__name__, owner.user_id)
            self._tell(
                channel, owner.user_id, f"That did not work: the cluster said {err}. Try again shortly."
            )

    # -- /gpu run ----------------------------------------------------------------------------------
    def run(self, request: models.RunRequest, owner: models.Owner, channel: str) -> workloads.Workload | None:
        """Quota check, thread root, pod; None (and an ephemeral saying why) when nothing was created."""
        settings = self._settings
        owned = self._cluster.list_workloads(owner.user_id)
        profile = quota.check_run(
            request,
            profiles=settings.profiles,
            default_profile=settings.default_profile,
            owned_gpus=held_gpus(owned),
            policy=settings.policy,
        )
        if isinstance(profile, models.UsageError):
            self._chat.ephemeral(channel, owner.user_id, notices.Ephemeral(profile.message))
            return None
        asked = notices.format_gpus(request.gpus, profile.name)
        who = owner.user_name or owner.user_id
        root = notices.Reply(f"{who} asked for {asked}: `{request.image}`. Following it here.")
        thread_ts = self._chat.post(channel, root)
        return self._create(request, profile, owner, channel=channel, thread_ts=thread_ts)

    def _create(
        self,
        request: models.RunRequest,
        profile: models.GpuProfile,
        owner: models.Owner,
        *,
        channel: str,
        thread_ts: str,
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
        )
        name = str(manifest["metadata"]["name"])
        try:
            created = self._create_once(manifest, thread_ts)
        except errors.GpubotError as err:
            self._refuse_in_thread(channel, thread_ts, name, err)
            return None
        log_audit(podspec.run_audit_entry(request, owner, profile, now), created.key)
        return created

    def _create_once(self, manifest: Mapping[str, object], thread_ts: str) -> workloads.Workload:
        """Create, retrying transient failures; a Conflict with our own thread's pod means it exists."""
        metadata = manifest["metadata"]
        assert isinstance(metadata, dict)
        for attempt in range(1, CREATE_ATTEMPTS + 1):
            try:
                return self._cluster.create_pod(manifest)
            except errors.Conflict:
                existing = self._cluster.get_workload(str(metadata["namespace"]), str(metadata["name"]))
                if existing is not None and existing.thread_ts == thread_ts:
                    return existing
                raise
            except (errors.Unavailable, errors.RateLimited):
                if attempt == CREATE_ATTEMPTS:
                    raise
                logger.warning("creating pod %s failed (try %s); retrying", metadata["name"], attempt)
        raise errors.Unavailable("unreachable")

    def _refuse_in_thread(self, channel: str, thread_ts: str, name: str, err: errors.GpubotError) -> None:
        if isinstance(err, errors.Conflict):
            text = f"A workload named `{name}` exists already; pick another `--name`. Nothing was created."
        elif isinstance(err, errors.Invalid):
            text = f"The cluster refused the pod: {err.message}. Nothing was created."
        else:
            text = f"The cluster could not be reached ({err}); nothing was created. Try again in a minute."
        logger.warning("run of %s failed: %s", name, err)
        self._chat.update(channel, thread_ts, notices.Reply(f":x: {text}"))

    # -- /gpu release ------------------------------------------------------------------------------
    def release(self, request: models.ReleaseRequest, actor: str, channel: str) -> list[str]:
        """Delete the named, only, or all of the actor's workloads; return the names released."""
        targets = self._release_targets(request, actor, channel)
        allowed = [w for w in targets if self._may_release(w, actor, channel)]
        released = [w.name for w in allowed if self._delete(w, actor)]
        if released:
            names = ", ".join(f"`{name}`" for name in released)
            self._chat.ephemeral(channel, actor, notices.Ephemeral(f"Released {names}."))
        return released

    def release_key(self, key: str, actor: str, channel: str) -> list[str]:
        """The Release button: its value is the workload's `namespace/name`."""
        _, _, name = key.rpartition("/")
        return self.release(models.ReleaseRequest(name=name), actor, channel)

    def _release_targets(
        self, request: models.ReleaseRequest, actor: str, channel: str
    ) -> list[workloads.Workload]:
        if request.name:
            found = self._cluster.get_workload(self._settings.namespace, request.name)
            if found is None:
                self._tell(
                    channel,
                    actor,
                    f"There is no gpubot workload `{request.name}`. `/gpu status` lists yours.",
                )
            return [found] if found is not None else []
        mine = [w for w in self._cluster.list_workloads(actor) if not w.deletion_requested]
        if not mine:
            self._tell(channel, actor, "You have no workloads to release. `/gpu status` shows the pool.")
        elif len(mine) > 1 and not request.everything:
            names = ", ".join(f"`{w.name}`" for w in mine)
            self._tell(channel, actor, f"You have {len(mine)} workloads ({names}). Try: `/gpu release all`")
            return []
        return mine

    def _may_release(self, workload: workloads.Workload, actor: str, channel: str) -> bool:
        if workload.owner_id == actor or self._settings.policy.is_admin(actor):
            return True
        self._tell(
            channel,
            actor,
            f"`{workload.name}` belongs to {workload.requester_name or workload.owner_id}; "
            "only its owner or an admin may release it. Try: `/gpu status`",
        )
        return False

    def _delete(self, workload: workloads.Workload, actor: str) -> bool:
        entry = podspec.release_audit_entry(actor, owner_id=workload.owner_id, now=self._clock())
        self._record_on_pod(workload, entry)
        with contextlib.suppress(errors.NotFound):  # gone already: released all the same
            self._cluster.delete_pod(workload.namespace, workload.name)
        log_audit(entry, workload.key)
        if workload.channel and workload.thread_ts:
            by = "its owner" if actor == workload.owner_id else f"admin {actor}"
            self._chat.reply(
                workload.channel, workload.thread_ts, notices.Reply(f"Released by {by}; deleting the pod.")
            )
        return True

    def _record_on_pod(self, workload: workloads.Workload, entry: models.AuditEntry) -> None:
        """Append to the pod's audit annotation, re-reading when another write got in between."""
        current: workloads.Workload | None = workload
        for _ in range(AUDIT_ATTEMPTS):
            if current is None or current.uid != workload.uid:
                return  # gone already (or replaced by a namesake): nothing of this pod to record on
            value = podspec.append_audit(current.audit, entry)
            try:
                self._cluster.annotate_pod(
                    current.namespace,
                    current.name,
                    {labels.AUDIT_ANNOTATION: value},
                    resource_version=current.resource_version,
                )
                return
            except errors.NotFound:
                return
            except errors.Conflict:
                current = self._cluster.get_workload(workload.namespace, workload.name)
        logger.warning("release of %s not recorded on the pod: it kept changing", workload.key)

    def _tell(self, channel: str, user: str, text: str) -> None:
        self._chat.ephemeral(channel, user, notices.Ephemeral(text))

    # -- /gpu status -------------------------------------------------------------------------------
    def status(self, request: models.StatusRequest, user: str, channel: str) -> notices.Ephemeral:
        everything = self._cluster.list_workloads()
        shown = everything if request.everyone else [w for w in everything if w.owner_id == user]
        sizes = status.autoscaler_sizes(self._cluster.read_autoscaler_status())
        pools = status.pool_views(
            self._cluster.list_nodes(), everything, sizes, profiles=self._settings.profiles.values()
        )
        pending = sum(w.gpus for w in everything if status.holds_gpu(w) and not w.node)
        report = status.status_report(
            shown, pools, pending_gpus=pending, everyone=request.everyone, now=self._clock()
        )
        self._chat.ephemeral(channel, user, report)
        return report
