"""Services: the quota's reservations, from a run's check to its pod; cancelling a run still starting.

A run reserves its GPUs before it reads the user's pods (`Ledger.reserve`, one atomic step in the store),
counts the reservations ahead of its own that the pod list does not show yet, and keeps its reservation
until its pod exists or it gives up: so twenty runs at once, on any replicas, cannot all see room for one
more. The pods stay the truth: a reservation is only a run in flight, and one older than
`quota.RESERVATION_TTL` (its replica died) counts for nothing and is dropped.

A `/gpu release` of a run still starting marks it cancelled here; the run reads the mark before it posts
its root, before it creates its pod and after, and gives up (deleting a pod it has just made).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime

from bot.core import ports, quota

logger = logging.getLogger(__name__)


class Ledger:
    def __init__(self, reservations: ports.Reservations) -> None:
        self._reservations = reservations

    def reserve(
        self, reservation: quota.Reservation, now: datetime
    ) -> tuple[quota.Reservation, list[quota.Reservation]]:
        """Take a ticket for `reservation`; it with its ticket, and every live reservation held then."""
        ticket, held = self._reservations.reserve(reservation.request_id, reservation.to_json())
        return replace(reservation, ticket=ticket), self._read(held, now)

    def held(self, now: datetime) -> list[quota.Reservation]:
        return self._read(self._reservations.held(), now)

    def name(self, reservation: quota.Reservation, pod: str) -> quota.Reservation:
        """The run's pod name is known now: a release by name finds it."""
        named = replace(reservation, pod=pod)
        self._reservations.amend(named.request_id, named.to_json())
        return named

    def cancel(self, reservation: quota.Reservation, actor: str) -> bool:
        """Mark the run cancelled; False when it no longer holds its reservation (its pod exists, or it
        ended)."""
        return self._reservations.cancel(reservation.request_id, actor)

    def cancelled_by(self, reservation: quota.Reservation) -> str:
        return self._reservations.cancelled_by(reservation.request_id)

    def release(self, reservation: quota.Reservation) -> None:
        self._reservations.release(reservation.request_id)

    def _read(self, held: dict[str, ports.Ticketed], now: datetime) -> list[quota.Reservation]:
        found = []
        for key, (ticket, raw) in held.items():
            read = quota.read_reservation(key, ticket, raw)
            if read is None or quota.is_stale(read, now):
                logger.warning("dropping a stale or unreadable quota reservation %s: %.200s", key, raw)
                self._reservations.release(key)
                continue
            found.append(read)
        return found
