"""Adapter: leader election over a coordination.k8s.io/v1 Lease, so only one of several replicas acts.

The rules are client-go's leaderelection (the decisions themselves are pure, in `bot.core.leadership`);
this module reads and writes the Lease with the official client and runs the loop on its own thread.

Public API::

    elector = LeaderElector(
        cluster.api,                      # the ApiClient `kube.KubeCluster` uses
        namespace=cluster.namespace,
        settings=settings.leader,         # lease name, identity, 15 s / 10 s / 2 s
        on_started_leading=begin,         # both called from the elector's thread: keep them short,
        on_stopped_leading=end,           # hand long work to threads of your own
        clock=clock,                      # the time written to and compared with the Lease (UTC)
    )
    elector.start()
    elector.is_leader                     # True between the two callbacks
    elector.leader                        # the holder as last read ("" when unknown or free)
    elector.stop()                        # immediate; releases the lease so a successor need not wait
    elector.stop(release=False)           # as a crash would: others wait for the lease to expire

A candidate tries every retry period (jittered, as client-go does): it creates the Lease if missing, takes
it when it is free or expired, and waits while another holder's lease is valid. The leader renews every
retry period with the resourceVersion it last wrote; a 409 means someone else wrote the lease, so it steps
down at once. Other failures are retried until the renew deadline has passed since the last good renewal,
then it steps down too. After stepping down the elector is a candidate again until `stop()`.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client

from bot.adapters import kube
from bot.core import errors, fields, leadership
from bot.settings import LeaderSettings

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
REQUEST_TIMEOUT_SECONDS = 5.0
"""One Lease read or write; well inside the renew deadline, and the longest `stop()` waits for one."""


def utc_now() -> datetime:
    return datetime.now(UTC)


def _nothing() -> None:
    return None


# -- the Lease on the wire -------------------------------------------------------------------------------


def read_record(lease: Mapping[str, Any]) -> leadership.LeaseRecord:
    """The election fields of a Lease as the API server sent it; missing fields read as a free lease. Its
    times are MicroTimes (`2026-01-01T00:00:00.000000Z`), which the API server stores only with an offset."""
    spec = lease.get("spec") or {}
    duration, transitions = spec.get("leaseDurationSeconds"), spec.get("leaseTransitions")
    return leadership.LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        duration_seconds=duration if isinstance(duration, int) else 0,
        acquired_at=fields.as_time(spec.get("acquireTime")),
        renewed_at=fields.as_time(spec.get("renewTime")),
        transitions=transitions if isinstance(transitions, int) else 0,
    )


def lease_body(name: str, record: leadership.LeaseRecord, *, current: Mapping[str, Any] | None) -> Obj:
    """The Lease to write: `current` (metadata, resourceVersion, other spec fields kept) with `record`."""
    base: Obj = dict(current) if current is not None else {"metadata": {"name": name}}
    spec = dict(base.get("spec") or {})
    spec.update(
        holderIdentity=record.holder,
        leaseDurationSeconds=record.duration_seconds,
        acquireTime=record.acquired_at,
        renewTime=record.renewed_at,
        leaseTransitions=record.transitions,
    )
    return {**base, "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": spec}


# -- the elector ------------------------------------------------------------------------------------------


class LeaderElector:
    """One replica's part in the election for `settings.lease_name`; see the module docstring."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        namespace: str,
        settings: LeaderSettings,
        on_started_leading: Callable[[], None] = _nothing,
        on_stopped_leading: Callable[[], None] = _nothing,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        problems = leadership.timing_problems(
            lease_duration=settings.lease_duration_seconds,
            renew_deadline=settings.renew_deadline_seconds,
            retry_period=settings.retry_period_seconds,
        )
        if problems:
            raise ValueError("leader election settings do not work together: " + "; ".join(problems))
        self.leases = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.settings = settings
        self.lease_name = settings.lease_name
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.clock = clock
        self._leading = False
        self._lease: Obj | None = None
        """The Lease as we last wrote it: a leader renews against its resourceVersion."""
        self._last_renewed = clock()
        self._leader = ""
        self._release_on_stop = True
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"leader-{settings.lease_name}", daemon=True)

    @property
    def identity(self) -> str:
        return self.settings.identity

    @property
    def is_leader(self) -> bool:
        return self._leading

    @property
    def leader(self) -> str:
        """The holder as this replica last read or wrote the lease (client-go `GetLeader`); "" if unknown."""
        return self._leader

    def start(self) -> None:
        self._thread.start()

    def stop(self, *, release: bool = True, timeout: float = 2 * REQUEST_TIMEOUT_SECONDS) -> bool:
        """Stop campaigning; a leader releases the lease unless `release=False`. True once the thread ends."""
        self._release_on_stop = release
        self._stopping.set()
        if threading.current_thread() is self._thread or not self._thread.is_alive():
            return not self._thread.is_alive()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- the loop -------------------------------------------------------------------------------------
    def _run(self) -> None:
        logger.info("%s campaigning for lease %s/%s", self.identity, self.namespace, self.lease_name)
        while not self._stopping.is_set():
            if self._try_claim():
                self._lead()
            else:
                self._stopping.wait(self._candidate_pause())

    def _candidate_pause(self) -> float:
        period = self.settings.retry_period_seconds
        return period * (1 + random.uniform(0, leadership.JITTER_FACTOR))

    def _lead(self) -> None:
        self._announce(leading=True)
        while not self._stopping.wait(self.settings.retry_period_seconds) and self._renew():
            pass
        if self._stopping.is_set() and self._release_on_stop:
            self._release()
        self._announce(leading=False)

    def _announce(self, *, leading: bool) -> None:
        self._leading = leading
        logger.info("%s %s leading", self.identity, "started" if leading else "stopped")
        callback = self.on_started_leading if leading else self.on_stopped_leading
        try:
            callback()
        except Exception:
            logger.exception("leader election callback %s failed", getattr(callback, "__name__", callback))

    # -- one step each --------------------------------------------------------------------------------
    def _try_claim(self) -> bool:
        """A candidate's step: read the lease, decide, write it if we may. True once it is ours."""
        try:
            current = self._read()
            record = None if current is None else read_record(current)
            now = self.clock()
            decision = leadership.decide_claim(record, identity=self.identity, now=now)
            if decision is leadership.Claim.WAIT:
                assert record is not None  # WAIT is only ever decided for an existing lease
                self._note_holder(record)
                return False
            self._claim(record, now, current=current)
        except errors.Conflict:
            logger.info("another candidate wrote lease %s first", self.lease_name)
            return False
        except errors.GpubotError as err:
            logger.warning("cannot claim lease %s: %s", self.lease_name, err)
            return False
        self._last_renewed, self._leader = now, self.identity
        if decision is leadership.Claim.TAKE and record is not None:
            logger.info("%s took lease %s over from %r", self.identity, self.lease_name, record.holder)
        return True

    def _renew(self) -> bool:
        """A leader's step: extend our lease. False once leadership is lost."""
        assert self._lease is not None  # a leader has written the lease
        now = self.clock()
        try:
            self._claim(read_record(self._lease), now, current=self._lease)
        except (errors.Conflict, errors.NotFound) as err:
            logger.warning("lost lease %s: it changed under us (%s)", self.lease_name, err)
            self._leader = ""
            return False
        except errors.GpubotError as err:
            deadline = timedelta(seconds=self.settings.renew_deadline_seconds)
            if leadership.may_keep_leading(last_renewed=self._last_renewed, now=now, renew_deadline=deadline):
                logger.warning("cannot renew lease %s, retrying: %s", self.lease_name, err)
                return True
            logger.warning(
                "lease %s not renewed within the renew deadline, stepping down: %s", self.lease_name, err
            )
            return False
        self._last_renewed = now
        logger.debug("renewed lease %s at %s", self.lease_name, now)
        return True

    def _claim(self, record: leadership.LeaseRecord | None, now: datetime, *, current: Obj | None) -> None:
        """Write the lease as ours from `now`, over `current`: a new term, or a renewal of ours."""
        duration = self.settings.lease_duration_seconds
        wanted = leadership.claim(record, identity=self.identity, now=now, duration_seconds=duration)
        self._lease = self._write(wanted, current=current)

    def _release(self) -> None:
        assert self._lease is not None
        freed = leadership.release(read_record(self._lease), now=self.clock())
        try:
            self._lease = self._write(freed, current=self._lease)
        except errors.GpubotError as err:
            logger.warning("cannot release lease %s; it frees itself on expiry: %s", self.lease_name, err)
            return
        self._leader = ""
        logger.info("%s released lease %s", self.identity, self.lease_name)

    def _note_holder(self, record: leadership.LeaseRecord) -> None:
        if record.holder != self._leader:
            self._leader = record.holder
            logger.info(
                "lease %s held by %r until %s", self.lease_name, record.holder, leadership.expires_at(record)
            )

    # -- the API --------------------------------------------------------------------------------------
    def _read(self) -> Obj | None:
        try:
            read = self.leases.read_namespaced_lease
            return kube.send(REQUEST_TIMEOUT_SECONDS, read, self.lease_name, self.namespace)
        except errors.NotFound:
            return None

    def _write(self, record: leadership.LeaseRecord, *, current: Obj | None) -> Obj:
        """Create the lease, or replace `current` (a 409 when its resourceVersion is no longer the latest)."""
        name = self.lease_name
        with kube.translated():
            body = client.V1Lease.from_dict(lease_body(name, record, current=current))
        assert body is not None  # from_dict returns None only for None
        leases = self.leases
        if current is None:
            return kube.send(REQUEST_TIMEOUT_SECONDS, leases.create_namespaced_lease, self.namespace, body)
        return kube.send(REQUEST_TIMEOUT_SECONDS, leases.replace_namespaced_lease, name, self.namespace, body)
